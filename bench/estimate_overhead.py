"""What the estimate adds to ``geval-spec report`` at 10,000 cases (target: at most 5%).

    .venv/bin/python bench/estimate_overhead.py [--cases 10000] [--repeats 5]

A throw-away project: 10,000 cases in 2,000 source groups of 5 and 8
systems, a rubric 1..5 judge whose scores are imported (no server), human
scores on the same scale for some of the cases (1,000, then 5,000, chosen at
random), a dev/test split by group, the default 2,000 bootstrap draws.
``report --format all`` runs as its own process, alternately with the
estimate and with it switched off (``analysis.calibration._estimate``
replaced by a function returning None, in the child process), ``--repeats``
times each, and the median wall and CPU times and their ratios are printed,
then ``calibration.build`` in process with and without the estimate (fastest
of 3 each). On a shared 2-core machine these ratios move by 5-15% from run
to run either way, more than the estimate costs, so the target is checked
on the estimate's own work, timed directly: ``estimate()`` plus its
Markdown, plot and JSON (mean of 20), as a share of the report's median wall
time without it. Also printed for comparison: a first import of
scipy.special, which the t quantile does not need
(geval_spec/analysis/student_t.py).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.05

SPEC = """name: big
version: 1
task: Judge a summary.
criterion: {name: Consistency, description: The summary states only facts the source supports.}
steps: [Read the source., Judge the summary.]
rubric:
  scale: {min: 1, max: 5}
  anchors:
    1: {description: contradicts the source}
    2: {description: several unsupported claims}
    3: {description: speculative details}
    4: {description: a harmless nuance}
    5: {description: fully supported}
scoring: {method: direct}
judge: {model: openai/judge-small}
data:
  path: data/big.jsonl
  id: id
  group: doc
  system: sys
  fields: {source: src, candidate: cand}
  human: human
  human_scale: {min: 1, max: 5}
split: {by: group, fractions: {dev: 0.5, test: 0.5}, seed: 1}
estimate: {target_halfwidth: 0.05}
"""

CHILD = r'''
import sys
import geval_spec.analysis.calibration as calibration
if sys.argv[1] == "off":
    calibration._estimate = lambda frame, source: None
sys.argv = ["geval-spec", "report", "big", "--format", "all", "--exit-zero"]
from geval_spec.cli.main import main
main()
'''

IN_PROCESS = r'''
import time
from pathlib import Path
import geval_spec.analysis.calibration as calibration
from geval_spec.analysis.estimate import estimate
from geval_spec.analysis.resolve import load
from geval_spec.spec.project import Project
from geval_spec.store.db import Store
t0 = time.perf_counter()
from scipy.special import stdtrit
cold = time.perf_counter() - t0
project = Project(Path.cwd())
with Store.open_existing(project.default_db) as store:
    loaded = load(store, project, "big")
frame = loaded.frame()
real = calibration._estimate
times = {"on": [], "off": []}
for _ in range(3):
    for mode in ("off", "on"):
        calibration._estimate = real if mode == "on" else (lambda frame, source: None)
        t0 = time.perf_counter(); calibration.build(loaded); times[mode].append(time.perf_counter() - t0)
from geval_spec.output.estimate import estimate_markdown, estimate_plot
t0 = time.perf_counter()
for _ in range(20):
    block = estimate(frame, loaded.source.spec)
    estimate_markdown(block), estimate_plot(block), block.model_dump_json()
alone = (time.perf_counter() - t0) / 20
print(f"{cold:.4f} {min(times['off']):.4f} {min(times['on']):.4f} {alone:.4f} {len(block.differences)}")
'''


def make_project(root: Path, cases: int, labelled: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, cases)
    judge = np.clip(truth + rng.integers(-1, 2, cases) + (rng.random(cases) < 0.3), 1, 5)
    keep = set(rng.choice(cases, labelled, replace=False).tolist())
    (root / "specs" / "data").mkdir(parents=True)
    rows = [json.dumps({"id": f"c{i:05d}", "doc": f"d{i // 5}", "sys": f"s{i % 8}", "src": "source text",
                        "cand": f"candidate {i}", "human": int(truth[i]) if i in keep else None})
            for i in range(cases)]
    (root / "specs" / "data" / "big.jsonl").write_text("\n".join(rows) + "\n")
    (root / "specs" / "big.yaml").write_text(SPEC)
    lines = [json.dumps({"case_id": f"c{i:05d}", "score": int(judge[i])}) for i in range(cases)]
    (root / "judgments.jsonl").write_text("\n".join(lines) + "\n")
    subprocess.run([sys.executable, "-m", "geval_spec", "import", "big", "judgments.jsonl"], cwd=root, check=True,
                   capture_output=True)


def timed(root: Path, mode: str) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one report process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CHILD, mode], cwd=root, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    worst = 0.0
    for labelled in (args.cases // 10, args.cases // 2):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            make_project(root, args.cases, labelled)
            timed(root, "on")  # warm the file cache
            on, off, on_cpu, off_cpu = [], [], [], []
            for k in range(args.repeats):
                for mode in (("off", "on") if k % 2 == 0 else ("on", "off")):  # alternate which goes first
                    wall, cpu = timed(root, mode)
                    (on if mode == "on" else off).append(wall)
                    (on_cpu if mode == "on" else off_cpu).append(cpu)
            inner = subprocess.run([sys.executable, "-c", IN_PROCESS], cwd=root, check=True, capture_output=True,
                                   text=True).stdout.split()
        ratio = statistics.median(on) / statistics.median(off)
        cold, build_off, build_on, alone = (float(x) for x in inner[:4])
        inner_ratio = build_on / build_off
        added = 1 + alone / statistics.median(off)
        worst = max(worst, added)
        print(f"{args.cases:,} cases, {labelled:,} labelled, 8 systems ({inner[4]} differences):")
        print(f"  report --format all, median of {args.repeats} processes each: without the estimate "
              f"{statistics.median(off):.3f} s (min {min(off):.3f}), with it {statistics.median(on):.3f} s "
              f"(min {min(on):.3f}): ratio {ratio:.3f}; CPU {statistics.median(off_cpu):.3f} s against "
              f"{statistics.median(on_cpu):.3f} s: ratio {statistics.median(on_cpu) / statistics.median(off_cpu):.3f}")
        print(f"  in process, fastest of 3: build() without the estimate {build_off:.3f} s, with it {build_on:.3f} s: "
              f"ratio {inner_ratio:.3f}")
        print(f"  the estimate's own work (estimate(), its Markdown, plot and JSON), mean of 20: {alone * 1000:.1f} ms "
              f"= {alone / statistics.median(off):.2%} of the report's median wall time: ratio {added:.3f}; a first "
              f"import of scipy.special (not used) would add {cold * 1000:.0f} ms")
    met = worst <= TARGET
    print(f"worst ratio of the report with the estimate's own work added {worst:.3f}; target <= {TARGET}: "
          f"{'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
