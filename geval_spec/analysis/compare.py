"""Two runs (or two spec versions) -> what changed, by how much, and whether it is noise (:class:`Comparison`).

Each side is a run id, or a spec REF that stands for the newest completed run
with that REF's judging fingerprint on the same data (its own analysis
settings apply: a version that only changes aggregation reuses the other's
judgments and sends nothing).

The comparison uses B's analysis settings (splits, groups, bootstrap,
calibration) for both sides and the cases both runs judged. For every split
and level it gives each correlation for A and for B, the difference B - A
and a paired bootstrap interval of the difference: every draw resamples the
same units for both sides, and only cases valid on both sides and labelled
by humans are used. Validity is compared separately.

Per-case agreement with the human label: a case agrees when its judgment is
valid and the judge's and the human's scores, both on 0..1, differ by at most
``calibration.pass_mark`` (0.25 when unset: one step of a 1..5 rubric).
Invalid and missing judgments disagree. The difference in agreement rates
gets a paired bootstrap (on whole groups with ``unit: group``).

The regression gate: only the calibration metric at the calibration level
and split decides; every other interval is descriptive. B is worse when the
whole interval of the difference lies below ``-margin``, better when it lies
above 0, and inconclusive when it contains -margin (with margin 0: when it
contains 0); with a margin, an interval above -margin that reaches 0 or
below is "not worse", and so is a difference that is 0 in every draw (both
sides read the same judgments: an analysis-only change). ``rule: strict`` (``compare --rule strict``) also
fails an inconclusive comparison, for CI that needs evidence of no
regression.
"""

from __future__ import annotations

import difflib
import io
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
from pydantic import Field

from geval_spec.analysis.correlation import METRICS, paired_difference
from geval_spec.analysis.frame import Array, Frame, case_resampling_warning, levels_present, splits_present, to_unit
from geval_spec.analysis.gate import units_of
from geval_spec.analysis.hygiene import paired_resample
from geval_spec.analysis.resolve import Loaded, load
from geval_spec.analysis.results import BootstrapInfo, Result, rounded
from geval_spec.errors import NoStoredRun, Problem
from geval_spec.runner.execute import Progress
from geval_spec.runner.run import RunOptions, execute_run
from geval_spec.spec.fingerprint import shown_dump
from geval_spec.spec.load import ResolvedSpec, load_spec
from geval_spec.spec.project import RUN_ID, Project
from geval_spec.spec.sections import Spec
from geval_spec.store.db import Store
from geval_spec.values import frozen


class Side(Result):
    ref: str
    run: str
    spec: str
    version: int
    file: str
    judging_fingerprint: str
    analysis_fingerprint: str
    method: str
    temperature: float | None


class Change(Result):
    klass: str = Field(serialization_alias="class")
    meaning: str


class Delta(Result):
    a: float | None
    b: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None


class DeltaEntry(Result):
    """One split and level: n counts what both sides use (cases; groups valid on both; systems)."""

    OMIT_IF_NONE = frozenset({"skipped_groups_a", "skipped_groups_b"})
    spearman: Delta
    pearson: Delta
    kendall: Delta
    n: int
    skipped_groups_a: int | None = None  # group level: groups where A's correlation is undefined
    skipped_groups_b: int | None = None

    def metric(self, name: str) -> Delta:
        value: Delta = getattr(self, name)
        return value


class AgreementDelta(Result):
    """Per-case agreement with the human label, A against B; the rates only with two or more labelled cases."""

    tolerance: float
    definition: str
    n: int
    a: float | None = None
    b: float | None = None
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    resampled: str | None = None

    def omitted(self) -> set[str]:
        return {"a", "b", "difference", "ci_low", "ci_high", "resampled"} if self.resampled is None else set()


class ValidityDelta(Result):
    n: int
    a: float | None
    b: float | None
    difference: float | None
    newly_invalid: int
    newly_valid: int
    newly_invalid_cases: list[str]
    newly_valid_cases: list[str]


class Moved(Result):
    case_id: str
    split: str | None
    a: float | None
    b: float | None
    shift: float | None
    human: float | None


Verdict = Literal["better", "not worse", "inconclusive", "worse", "not comparable"]
Rule = Literal["default", "strict"]
STRICT_PASSES: tuple[Verdict, ...] = ("better", "not worse")


class Regression(Result):
    """The regression gate: only the calibration metric at its level and split decides.

    ``verdict`` places the interval of B - A against 0 and -margin: worse
    (all of it below -margin), better (all of it above 0), not worse (all of
    it above -margin, not all above 0: only with a margin), inconclusive (it
    contains -margin; with margin 0, it contains 0), not comparable (no
    interval). ``fails`` (exit 1): worse; under rule strict also
    inconclusive and not comparable.
    """

    metric: str
    level: str
    split: str
    margin: float
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    regressed: bool
    verdict: Verdict
    rule: Rule
    fails: bool
    reason: str


class Comparison(Result):
    """Two runs (or spec versions): what changed, by how much, and whether it is more than noise."""

    a: Side
    b: Side
    change: Change
    spec_diff: list[str]
    cases: int
    correlation: dict[str, dict[str, DeltaEntry]]
    agreement: AgreementDelta
    validity: ValidityDelta
    moved: list[Moved]
    regression: Regression
    bootstrap: BootstrapInfo
    warnings: list[str]


DEFAULT_TOLERANCE = 0.25
TOP_MOVED = 10
CLASS_TEXT = {"judging": "new judgments needed: what the judge is sent differs",
              "analysis": "analysis only: recomputed from the same kind of judgments at zero cost",
              "metadata": "metadata only: the same judging and analysis"}


def resolved_yaml(resolved: ResolvedSpec) -> list[str]:
    """The resolved spec (all defaults filled, steps resolved) as stable YAML lines."""
    from ruamel.yaml import YAML

    spec = shown_dump(resolved.spec)
    data: dict[str, Any] = {"spec": spec}
    if isinstance(spec.get("steps"), dict):  # generated steps: show the frozen ones too
        data["generated_steps"] = list(resolved.steps)
    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    y.representer.sort_base_mapping_type_on_output = False
    y.width = 4096
    buf = io.StringIO()
    y.dump(data, buf)
    lines = buf.getvalue().splitlines()
    lines += [f"template: {resolved.template_name}"] + [f"  | {t}" for t in resolved.template_text.splitlines()]
    return lines


def change_class(a: Loaded, b: Loaded) -> str:
    if a.source.judging_fp != b.source.judging_fp or a.run.labels != b.run.labels:  # (run --model, import --judge)
        return "judging"
    if a.source.analysis_fp != b.source.analysis_fp:
        return "analysis"
    return "metadata"


@frozen
class Aligned:
    ids: list[str]
    a: Array  # A's scores, NaN unless valid
    b: Array
    a_status: list[str]
    b_status: list[str]
    frame: Frame  # B's frame restricted to the common cases


def align(fa: Frame, fb: Frame) -> Aligned:
    index_a = {cid: i for i, cid in enumerate(fa.ids)}
    keep = [i for i, cid in enumerate(fb.ids) if cid in index_a]
    ia = [index_a[fb.ids[i]] for i in keep]
    return Aligned(ids=[fb.ids[i] for i in keep], a=np.asarray(fa.score)[ia], b=np.asarray(fb.score)[keep],
                   a_status=[fa.status[i] for i in ia], b_status=[fb.status[i] for i in keep], frame=fb.subset(keep))


def _warnings(a: Loaded, b: Loaded, fa: Frame, fb: Frame, al: Aligned) -> list[str]:
    out = list(dict.fromkeys(fa.warnings + fb.warnings))
    if a.source.run_data_sha256 and b.source.run_data_sha256 and a.source.run_data_sha256 != b.source.run_data_sha256:
        out.append("A and B were judged on different data files; only their common case ids are compared")
    if len(al.ids) < max(len(fa.ids), len(fb.ids)):
        out.append(f"{len(al.ids)} cases are in both runs (A {len(fa.ids)}, B {len(fb.ids)}); "
                   "only those are compared")
    if fa.scale != fb.scale:
        out.append(f"A's scores are on {fa.scale}, B's on {fb.scale}: correlations compare, raw scores do not")
    if a.source.spec.split != b.source.spec.split:
        out.append("A and B define splits differently; B's splits are used for both")
    relabelled = _relabelled(fa, fb, al.ids)
    if relabelled:
        out.append(f"the human scores differ between A and B on {relabelled} of the {len(al.ids)} common cases "
                   "(data.human or the data changed): both sides are scored against B's; A's own report, against "
                   "its own, can differ")
    resampling = case_resampling_warning(b.source.spec, al.frame.groups)
    if resampling:
        out.append(resampling)
    return out


def _relabelled(fa: Frame, fb: Frame, ids: list[str]) -> int:
    """How many of the common cases have other human scores in A than in B (a label gained or lost counts)."""
    index_a = {cid: i for i, cid in enumerate(fa.ids)}
    index_b = {cid: i for i, cid in enumerate(fb.ids)}
    ha = np.asarray(fa.human)[[index_a[c] for c in ids]]
    hb = np.asarray(fb.human)[[index_b[c] for c in ids]]
    same = (ha == hb) | (np.isnan(ha) & np.isnan(hb))
    return int((~same).sum())


def _correlations(al: Aligned, spec: Spec) -> dict[str, dict[str, DeltaEntry]]:
    frame = al.frame
    h = np.asarray(frame.human)
    both = ~np.isnan(al.a) & ~np.isnan(al.b) & ~np.isnan(h)
    bs = spec.bootstrap
    out: dict[str, dict[str, DeltaEntry]] = {}
    for split in splits_present(frame, spec):
        out[split] = {}
        m = frame.mask(split) & both
        units, groups = units_of(frame, spec, m)
        systems = list(np.asarray(frame.systems, dtype=object)[m])
        for level in levels_present(frame):
            deltas = {}
            found = {}
            for metric in METRICS:
                d = paired_difference(al.a[m], al.b[m], h[m], metric, level, units=units, draws=bs.draws,
                                      seed=bs.seed, conf=bs.level, groups=groups,
                                      systems=systems if level == "system" else None)
                deltas[metric] = Delta(a=rounded(d.a), b=rounded(d.b), difference=rounded(d.diff),
                                       ci_low=rounded(d.ci_low), ci_high=rounded(d.ci_high))
                found[metric] = d
            d = found[spec.calibration.metric]
            skipped = level == "group"
            out[split][level] = DeltaEntry(**deltas, n=d.n, skipped_groups_a=d.skipped_a if skipped else None,
                                           skipped_groups_b=d.skipped_b if skipped else None)
    return out


def _agreement(al: Aligned, spec: Spec, fa: Frame, fb: Frame) -> AgreementDelta:
    frame = al.frame
    bs = spec.bootstrap
    tol = spec.calibration.pass_mark if spec.calibration.pass_mark is not None else DEFAULT_TOLERANCE
    hn = to_unit(np.asarray(frame.human), frame.human_scale)
    an, bn = to_unit(al.a, fa.scale), to_unit(al.b, fb.scale)
    labelled = ~np.isnan(hn)
    definition = f"valid and |judge - human| <= {tol} on a 0..1 scale; invalid or missing judgments disagree"
    if labelled.sum() < 2:
        return AgreementDelta(tolerance=tol, definition=definition, n=int(labelled.sum()))
    with np.errstate(invalid="ignore"):
        agree_a = np.where(np.isnan(an), False, np.abs(an - hn) <= tol + 1e-12) & labelled
        agree_b = np.where(np.isnan(bn), False, np.abs(bn - hn) <= tol + 1e-12) & labelled
    da = agree_a[labelled].astype(float)
    db = agree_b[labelled].astype(float)
    by_group = bs.unit == "group" and any(g is not None for g in frame.groups)
    unit_groups = [g if g is not None else i for g, i, k in zip(frame.groups, frame.ids, labelled) if k] \
        if by_group else None
    diff, lo, hi, _ = paired_resample(db - da, bs.draws, bs.seed, groups=unit_groups, level=bs.level)
    return AgreementDelta(tolerance=tol, definition=definition, n=int(labelled.sum()), a=rounded(float(da.mean())),
                          b=rounded(float(db.mean())), difference=rounded(diff), ci_low=rounded(lo),
                          ci_high=rounded(hi), resampled="groups" if unit_groups is not None else "cases")


def _validity(al: Aligned) -> ValidityDelta:
    va = sum(1 for s in al.a_status if s == "valid")
    vb = sum(1 for s in al.b_status if s == "valid")
    n = len(al.ids)
    newly_invalid = sorted(cid for cid, sa, sb in zip(al.ids, al.a_status, al.b_status) if sa == "valid" != sb)
    newly_valid = sorted(cid for cid, sa, sb in zip(al.ids, al.a_status, al.b_status) if sb == "valid" != sa)
    return ValidityDelta(n=n, a=rounded(va / n) if n else None, b=rounded(vb / n) if n else None,
                         difference=rounded((vb - va) / n) if n else None, newly_invalid=len(newly_invalid),
                         newly_valid=len(newly_valid), newly_invalid_cases=newly_invalid[:10],
                         newly_valid_cases=newly_valid[:10])


def _moved(al: Aligned, fa: Frame, fb: Frame) -> list[Moved]:
    """The cases whose score moved most (0..1 scale)."""
    frame = al.frame
    hn = to_unit(np.asarray(frame.human), frame.human_scale)
    an, bn = to_unit(al.a, fa.scale), to_unit(al.b, fb.scale)
    ok = ~np.isnan(an) & ~np.isnan(bn)
    shift = np.where(ok, bn - an, np.nan)
    order = sorted((i for i in range(len(al.ids)) if ok[i]), key=lambda i: (-round(abs(float(shift[i])), 6), al.ids[i]))
    out = []
    for i in order[:TOP_MOVED]:
        if abs(shift[i]) < 1e-9:
            break
        out.append(Moved(case_id=al.ids[i], split=frame.splits[i], a=rounded(float(an[i])), b=rounded(float(bn[i])),
                         shift=rounded(float(shift[i])), human=rounded(float(hn[i])) if not np.isnan(hn[i]) else None))
    return out


def _placed(d: Delta | None, metric: str, m: float) -> tuple[Verdict, str]:
    """Where the interval of B - A lies against 0 and -margin, and the sentence that says so."""
    if d is None or d.difference is None or d.ci_low is None or d.ci_high is None:
        return "not comparable", "not comparable: the split or level is missing, or a correlation is undefined"
    interval = f"{metric} {d.difference:+.3f}, interval [{d.ci_low:.3f}, {d.ci_high:.3f}]"
    line = f"-{m:g}" if m else "0"  # where a regression starts
    if d.ci_high < -m:
        return "worse", f"B is worse: {interval} lies entirely below {line}"
    if d.ci_low > 0:
        return "better", f"B is better: {interval} lies entirely above 0"
    if d.ci_low == d.ci_high == d.difference == 0:  # the same judgments on both sides: no change at all
        return "not worse", f"B is not worse: {interval}, the same in every draw (no change)"
    if d.ci_low > -m:
        return "not worse", f"B is not worse than A by more than the margin: {interval} lies above {line}"
    both = "both 0 and " if d.ci_high >= 0 and m else ""
    return "inconclusive", f"inconclusive: {interval} contains {both}{line}"


def _regression(corr: dict[str, dict[str, DeltaEntry]], spec: Spec, margin: float | None,
                rule: Rule = "default") -> Regression:
    cal = spec.calibration
    m = margin if margin is not None else cal.margin
    entry = corr.get(cal.split, {}).get(cal.level)
    d = entry.metric(cal.metric) if entry is not None else None
    verdict, reason = _placed(d, cal.metric, m)
    fails = verdict == "worse" or (rule == "strict" and verdict not in STRICT_PASSES)
    return Regression(metric=cal.metric, level=cal.level, split=cal.split, margin=m,
                      difference=d.difference if d else None, ci_low=d.ci_low if d else None,
                      ci_high=d.ci_high if d else None, regressed=verdict == "worse", verdict=verdict, rule=rule,
                      fails=fails, reason=reason)


def _side(x: Loaded, frame: Frame) -> Side:
    s = x.source.spec
    return Side(ref=x.label, run=x.run.run_id, spec=s.name, version=s.version, file=x.spec_file,
                judging_fingerprint=x.source.judging_fp, analysis_fingerprint=x.source.analysis_fp,
                method=s.scoring.method, temperature=rounded(frame.temperature))


def compare(a: Loaded, b: Loaded, margin: float | None = None, rule: Rule = "default") -> Comparison:
    spec = b.source.spec
    fa, fb = a.frame(), b.frame()
    al = align(fa, fb)
    corr = _correlations(al, spec)
    cls = change_class(a, b)
    diff = list(difflib.unified_diff(resolved_yaml(a.resolved), resolved_yaml(b.resolved), "A", "B", lineterm="",
                                     n=2))
    bs = spec.bootstrap
    return Comparison(a=_side(a, fa), b=_side(b, fb), change=Change(klass=cls, meaning=CLASS_TEXT[cls]),
                      spec_diff=diff, cases=len(al.ids), correlation=corr, agreement=_agreement(al, spec, fa, fb),
                      validity=_validity(al), moved=_moved(al, fa, fb), regression=_regression(corr, spec, margin, rule),
                      bootstrap=BootstrapInfo(draws=bs.draws, seed=bs.seed, unit=bs.unit, level=bs.level),
                      warnings=_warnings(a, b, fa, fb, al))


def load_side(project: Project, db: Path, what: str, run_missing: bool = False,
              on_progress: Callable[[Progress], None] | None = None,
              say: Callable[[str], None] | None = None) -> Loaded:
    """One side of a comparison: its stored run, or with ``run_missing`` a run made now for a REF without one."""
    if db.exists() or RUN_ID.match(what):
        with Store.open_existing(db) as store:
            try:
                return load(store, project, what)
            except NoStoredRun:
                if not run_missing:
                    raise
    elif not run_missing:
        parsed = load_spec(project.resolve(what))
        raise NoStoredRun(problems=[Problem(f"no stored run of {parsed.name} (no results database yet)",
                                            hint=f"make one: geval-spec run {what}, or pass --run")])
    if say is not None:
        say(f"no stored run for {what}: running it")
    execute_run(load_spec(project.resolve(what)), RunOptions(db=db, ref=what), on_progress=on_progress, on_event=say)
    with Store.open_existing(db) as store:
        return load(store, project, what)
