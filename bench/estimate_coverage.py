"""Coverage, width and bias of the PPI++ mean estimate (geval_spec.analysis.ppi), on real and synthetic data.

    .venv/bin/python bench/estimate_coverage.py

Every interval is the one the report gives (geval_spec.analysis.estimate):
Student's t with sample variances (``t_quantile=student_t``); the human-only
interval is the same t-interval of the labels alone.

1. SummEval consistency with the judge's recorded TCVA scores at T = 0.5 and
   0.9 (specs/data/tcva/reference/summeval_tcva_scores.json, matched to
   specs/data/tcva/summeval-consistency.jsonl by id; a score of -1 is a failed
   judge call and its case is left out). The truth is the human mean over all
   valid cases. Each of 1,000 draws keeps the human labels of 40 cases chosen
   at random without replacement; the rest count as unlabelled. Targets:
   coverage of the 95% PPI++ interval >= 0.93, mean PPI width / mean
   human-only width <= 0.90, |mean bias of the PPI point| <= 0.01.
   The truth here is the mean of a finite set of cases, which the estimator's
   variance (made for an infinite population) overstates by about
   Var(Y)/(n + N), so coverage above 0.95 is expected.
2. Synthetic: 6 systems with known true mean human score, 15 labels and a
   few hundred judge-only cases each, drawn afresh every time from the
   system's distribution (the independent-draws setting the papers assume);
   the judge is a biased, noisy, clipped function of the human score.
   1,000 draws. Targets: the 95% interval covers each system's true mean in
   >= 92% of draws, and each pairwise difference (ppi_mean_difference) in
   >= 92% of draws.

Also prints, without a target, per-system coverage at 10, 20, 30 and 40
labels. Exits 1 when a target is missed. The seed is fixed, so every number
but the run time is the same on every run.
"""

import json
import sys
import time
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package

from functools import partial

from geval_spec.analysis.estimate import student_t
from geval_spec.analysis.ppi import MeanEstimate
from geval_spec.analysis.ppi import ppi_mean as _ppi_mean
from geval_spec.analysis.ppi import ppi_mean_difference as _ppi_mean_difference

ppi_mean = partial(_ppi_mean, t_quantile=student_t)  # the report's intervals
ppi_mean_difference = partial(_ppi_mean_difference, t_quantile=student_t)

DATA = ROOT / "specs" / "data" / "tcva" / "summeval-consistency.jsonl"
SCORES = ROOT / "specs" / "data" / "tcva" / "reference" / "summeval_tcva_scores.json"
LEVEL = 0.95
DRAWS = 1000
SEED = 20231102  # PPI++'s arXiv date

REAL_TEMPERATURES = ("T0.5", "T0.9")
REAL_LABELS = 40
REAL_MIN_COVERAGE = 0.93
REAL_MAX_WIDTH_RATIO = 0.90
REAL_MAX_ABS_BIAS = 0.01

SYN_LABELS = 15
SYN_MIN_COVERAGE = 0.92
SYN_MIN_DIFF_COVERAGE = 0.92
SYN_OTHER_LABELS = (10, 20, 30, 40)


@dataclass(frozen=True)
class SyntheticSystem:
    """Human scores on a 5-point scale mapped to 0..1, and the judge's distortion of them.

    ``probs`` are the probabilities of the human scores 0, 0.25, 0.5, 0.75, 1
    (so the true mean is known exactly). The judge scores
    ``clip(offset + slope * human + Normal(0, noise), 0, 1)``.
    """

    name: str
    probs: tuple[float, float, float, float, float]
    offset: float
    slope: float
    noise: float
    unlabelled: int

    @property
    def true_mean(self) -> float:
        return float(np.dot(self.probs, LIKERT))


LIKERT = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
SYSTEMS = (
    SyntheticSystem("s1", (0.05, 0.10, 0.20, 0.35, 0.30), 0.20, 0.70, 0.12, 300),
    SyntheticSystem("s2", (0.10, 0.15, 0.30, 0.25, 0.20), 0.30, 0.60, 0.15, 250),
    SyntheticSystem("s3", (0.20, 0.25, 0.25, 0.20, 0.10), 0.25, 0.50, 0.20, 400),
    SyntheticSystem("s4", (0.02, 0.08, 0.15, 0.30, 0.45), 0.10, 0.80, 0.10, 200),
    SyntheticSystem("s5", (0.30, 0.30, 0.20, 0.15, 0.05), 0.35, 0.40, 0.25, 350),
    SyntheticSystem("s6", (0.10, 0.20, 0.40, 0.20, 0.10), 0.15, 0.90, 0.30, 300),
)


def covers(low: float | None, high: float | None, truth: float) -> bool:
    """Whether an interval covers the truth; a missing interval counts as a miss."""
    return low is not None and high is not None and low <= truth <= high


def width(low: float | None, high: float | None) -> float:
    """An interval's width (NaN when missing, which the caller counts)."""
    return high - low if low is not None and high is not None else float("nan")


def load_real(temperature: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Human and judge scores of the valid cases, matched by id; and how many judge calls failed."""
    human = {}
    with DATA.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                human[row["id"]] = float(row["human_score"])
    records = json.loads(SCORES.read_text(encoding="utf-8"))
    ys, fs, failed = [], [], 0
    for record in records:
        score = float(record["tcva_scores"][temperature])
        if score == -1:
            failed += 1
            continue
        ys.append(human[record["id"]])
        fs.append(score)
    if len(ys) + failed != len(human):
        raise SystemExit(f"{SCORES.name} and {DATA.name} do not hold the same cases")
    return np.array(ys), np.array(fs), failed


def real_data(temperature: str, rng: np.random.Generator) -> list[tuple[str, bool]]:
    """Run the draws on SummEval at one temperature, print the table, return (target, met) pairs."""
    y, f, failed = load_real(temperature)
    total = y.size
    truth = float(np.mean(y))
    judge_mean = float(np.mean(f))
    ppi_points: list[float] = []
    human_points: list[float] = []
    ppi_widths: list[float] = []
    human_widths: list[float] = []
    lams: list[float] = []
    ppi_hits = human_hits = no_interval = wider = 0
    for _ in range(DRAWS):
        labelled = np.zeros(total, dtype=bool)
        labelled[rng.choice(total, REAL_LABELS, replace=False)] = True
        est = ppi_mean(y[labelled], f[labelled], f[~labelled], level=LEVEL)
        no_interval += est.reason is not None
        ppi_hits += covers(est.ci_low, est.ci_high, truth)
        human_hits += covers(est.human_only.ci_low, est.human_only.ci_high, truth)
        ppi_points.append(np.nan if est.value is None else est.value)
        human_points.append(np.nan if est.human_only.value is None else est.human_only.value)
        ppi_widths.append(width(est.ci_low, est.ci_high))
        human_widths.append(width(est.human_only.ci_low, est.human_only.ci_high))
        lams.append(np.nan if est.lam is None else est.lam)
        wider += ppi_widths[-1] > human_widths[-1]
    coverage = ppi_hits / DRAWS
    ratio = float(np.nanmean(ppi_widths) / np.nanmean(human_widths))
    bias = float(np.nanmean(ppi_points)) - truth
    print(f"\nSummEval consistency, TCVA {temperature}: {total} valid cases ({failed} failed judge calls left "
          f"out), {REAL_LABELS} human labels per draw, {DRAWS:,} draws, {LEVEL:.0%} intervals")
    print(f"  truth (human mean over all valid cases) {truth:.4f}; judge-human correlation "
          f"{np.corrcoef(y, f)[0, 1]:.3f}")
    print(f"  {'estimator':<11} {'mean point':>10} {'mean bias':>10} {'rmse':>7} {'coverage':>9} {'mean width':>11}")
    print(f"  {'judge-only':<11} {judge_mean:>10.4f} {judge_mean - truth:>+10.4f} {abs(judge_mean - truth):>7.4f} "
          f"{'-':>9} {'-':>11}")
    for name, point_list, hits, widths in (("human-only", human_points, human_hits, human_widths),
                                           ("PPI++", ppi_points, ppi_hits, ppi_widths)):
        points = np.array(point_list)
        print(f"  {name:<11} {np.nanmean(points):>10.4f} {np.nanmean(points) - truth:>+10.4f} "
              f"{np.sqrt(np.nanmean((points - truth) ** 2)):>7.4f} {hits / DRAWS:>9.3f} {np.nanmean(widths):>11.4f}")
    print(f"  PPI++ lambda: mean {np.nanmean(lams):.3f} (min {np.nanmin(lams):.3f}, max {np.nanmax(lams):.3f}); "
          f"PPI interval wider than human-only in {wider} draws; no interval in {no_interval}")
    targets = [
        (f"{temperature} PPI++ coverage {coverage:.3f} >= {REAL_MIN_COVERAGE}", coverage >= REAL_MIN_COVERAGE),
        (f"{temperature} width ratio PPI/human-only {ratio:.3f} <= {REAL_MAX_WIDTH_RATIO}",
         ratio <= REAL_MAX_WIDTH_RATIO),
        (f"{temperature} |mean bias of PPI point| {abs(bias):.4f} <= {REAL_MAX_ABS_BIAS}",
         abs(bias) <= REAL_MAX_ABS_BIAS),
    ]
    for text, met in targets:
        print(f"  target {text}: {'met' if met else 'MISSED'}")
    return targets


def draw_system(
    system: SyntheticSystem, rng: np.random.Generator, labels: int = SYN_LABELS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One fresh sample of a system: labelled human scores and judge scores, and judge-only scores."""
    total = labels + system.unlabelled
    human = rng.choice(LIKERT, size=total, p=system.probs)
    judge = np.clip(system.offset + system.slope * human + rng.normal(0, system.noise, total), 0, 1)
    return human[:labels], judge[:labels], judge[labels:]


def coverage_by_labels(rng: np.random.Generator) -> None:
    """Print per-system coverage at other label counts (information, no target)."""
    print(f"  other label counts per system ({DRAWS:,} fresh draws each; coverage worst / mean over systems):")
    for labels in SYN_OTHER_LABELS:
        ppi_hits = np.zeros(len(SYSTEMS))
        human_hits = np.zeros(len(SYSTEMS))
        for _ in range(DRAWS):
            for k, system in enumerate(SYSTEMS):
                est = ppi_mean(*draw_system(system, rng, labels), level=LEVEL)
                ppi_hits[k] += covers(est.ci_low, est.ci_high, system.true_mean)
                human_hits[k] += covers(est.human_only.ci_low, est.human_only.ci_high, system.true_mean)
        print(f"    {labels:>3} labels: PPI++ {ppi_hits.min() / DRAWS:.3f} / {ppi_hits.mean() / DRAWS:.3f}; "
              f"human-only {human_hits.min() / DRAWS:.3f} / {human_hits.mean() / DRAWS:.3f}")


def synthetic(rng: np.random.Generator) -> list[tuple[str, bool]]:
    """Run the per-system and pairwise draws, print the tables, return (target, met) pairs."""
    names = [s.name for s in SYSTEMS]
    pairs = list(combinations(range(len(SYSTEMS)), 2))
    hits = {name: 0 for name in names}
    human_hits = {name: 0 for name in names}
    widths: dict[str, list[float]] = {name: [] for name in names}
    human_widths: dict[str, list[float]] = {name: [] for name in names}
    judge_bias: dict[str, list[float]] = {name: [] for name in names}
    lams: dict[str, list[float]] = {name: [] for name in names}
    points: dict[str, list[float]] = {name: [] for name in names}
    pair_hits = {pair: 0 for pair in pairs}
    pair_human_hits = {pair: 0 for pair in pairs}
    pair_widths: dict[tuple[int, int], list[float]] = {pair: [] for pair in pairs}
    pair_human_widths: dict[tuple[int, int], list[float]] = {pair: [] for pair in pairs}
    for _ in range(DRAWS):
        samples = [draw_system(system, rng) for system in SYSTEMS]
        for system, (y, f, f_u) in zip(SYSTEMS, samples):
            est: MeanEstimate = ppi_mean(y, f, f_u, level=LEVEL)
            truth = system.true_mean
            hits[system.name] += covers(est.ci_low, est.ci_high, truth)
            human_hits[system.name] += covers(est.human_only.ci_low, est.human_only.ci_high, truth)
            widths[system.name].append(width(est.ci_low, est.ci_high))
            human_widths[system.name].append(width(est.human_only.ci_low, est.human_only.ci_high))
            judge_bias[system.name].append(est.judge_only - truth)
            lams[system.name].append(np.nan if est.lam is None else est.lam)
            points[system.name].append(np.nan if est.value is None else est.value - truth)
        for i, j in pairs:
            diff = ppi_mean_difference(*samples[i], *samples[j], level=LEVEL)
            truth = SYSTEMS[j].true_mean - SYSTEMS[i].true_mean
            pair_hits[(i, j)] += covers(diff.ci_low, diff.ci_high, truth)
            pair_human_hits[(i, j)] += covers(diff.human_only.ci_low, diff.human_only.ci_high, truth)
            pair_widths[(i, j)].append(width(diff.ci_low, diff.ci_high))
            pair_human_widths[(i, j)].append(width(diff.human_only.ci_low, diff.human_only.ci_high))

    print(f"\nSynthetic: {len(SYSTEMS)} systems, {SYN_LABELS} human labels each plus 200-400 judge-only cases, "
          f"drawn afresh {DRAWS:,} times; {LEVEL:.0%} intervals")
    print(f"  {'system':<6} {'truth':>6} {'judge bias':>10} {'PPI bias':>9} {'lambda':>7} {'PPI cov':>8} "
          f"{'human cov':>9} {'width ratio':>11} {'no interval':>11}")
    for system in SYSTEMS:
        name = system.name
        print(f"  {name:<6} {system.true_mean:>6.3f} {np.mean(judge_bias[name]):>+10.4f} "
              f"{np.nanmean(points[name]):>+9.4f} {np.nanmean(lams[name]):>7.3f} {hits[name] / DRAWS:>8.3f} "
              f"{human_hits[name] / DRAWS:>9.3f} "
              f"{np.nanmean(widths[name]) / np.nanmean(human_widths[name]):>11.3f} "
              f"{int(np.isnan(widths[name]).sum()):>11}")
    pair_cov = {pair: pair_hits[pair] / DRAWS for pair in pairs}
    worst = min(pair_cov, key=lambda pair: pair_cov[pair])
    human_pair_cov = [pair_human_hits[pair] / DRAWS for pair in pairs]
    ratios = [np.nanmean(pair_widths[pair]) / np.nanmean(pair_human_widths[pair]) for pair in pairs]
    print(f"  pairwise differences ({len(pairs)} pairs, B - A): PPI coverage min {pair_cov[worst]:.3f} "
          f"({names[worst[0]]} vs {names[worst[1]]}), mean {np.mean(list(pair_cov.values())):.3f}; human-only "
          f"coverage min {min(human_pair_cov):.3f}, mean {np.mean(human_pair_cov):.3f}; width ratio "
          f"{min(ratios):.3f}-{max(ratios):.3f}")
    min_cov = min(hits.values()) / DRAWS
    worst_system = min(hits, key=lambda name: hits[name])
    targets = [
        (f"synthetic per-system PPI++ coverage, worst {min_cov:.3f} ({worst_system}) >= {SYN_MIN_COVERAGE}",
         min_cov >= SYN_MIN_COVERAGE),
        (f"synthetic pairwise-difference coverage, worst {pair_cov[worst]:.3f} >= {SYN_MIN_DIFF_COVERAGE}",
         pair_cov[worst] >= SYN_MIN_DIFF_COVERAGE),
    ]
    for text, met in targets:
        print(f"  target {text}: {'met' if met else 'MISSED'}")
    coverage_by_labels(rng)
    return targets


def main() -> int:
    start, cpu_start = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(SEED)
    targets = []
    for temperature in REAL_TEMPERATURES:
        targets += real_data(temperature, rng)
    targets += synthetic(rng)
    missed = [text for text, met in targets if not met]
    print(f"\n{len(targets) - len(missed)} of {len(targets)} targets met in {time.perf_counter() - start:.1f} s "
          f"({time.process_time() - cpu_start:.1f} s CPU)")
    for text in missed:
        print(f"MISSED: {text}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
