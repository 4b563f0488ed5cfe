"""TCVA sweep of 19 temperatures over 100k stored verdicts (target <= 1 s).

    .venv/bin/python bench/sweep_speed.py [--cases 20000] [--per-case 5]

Imports 20,000 cases x 5 verdicts (100k verdicts) into a throw-away store
through `geval-spec import`, then times (1) the sweep computation on the
stored judgments (re-aggregation at 19 temperatures and the calibration
metric on dev for each, after scipy is imported) and (2) the whole
`geval-spec sweep RUN` command, which also starts Python, imports scipy,
reads 100k verdicts from DuckDB and bootstraps the interval on test.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SPEC = """name: sweep-bench
version: 1
task: t
criterion: {name: C, description: D}
steps: [s]
scoring: {method: verdicts}
judge: {model: openai/x}
data: {path: data/cases.jsonl, id: id, group: doc, fields: {source: src, candidate: cand}, human: human}
split: {by: group, fractions: {dev: 0.5, test: 0.5}, seed: 1}
calibration: {split: test, level: dataset}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--per-case", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(0)
    levels = ["fully", "mostly", "partially", "minor", "none"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "specs" / "data").mkdir(parents=True)
        (root / "specs" / "sweep-bench.yaml").write_text(SPEC)
        cases, lines = [], []
        for i in range(args.cases):
            quality = rng.random()
            verdicts = [levels[min(4, int(rng.random() * 5 * (1 - quality) + rng.random()))]
                        for _ in range(args.per_case)]
            cases.append(json.dumps({"id": f"c{i}", "doc": f"d{i // 4}", "src": "s", "cand": "c",
                                     "human": round(quality + rng.gauss(0, 0.2), 3)}))
            lines.append(json.dumps({"case_id": f"c{i}", "verdicts": [{"verdict": v} for v in verdicts]}))
        (root / "specs" / "data" / "cases.jsonl").write_text("\n".join(cases) + "\n")
        (root / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
        out = subprocess.run([sys.executable, "-m", "geval_spec", "import", "sweep-bench", "verdicts.jsonl"],
                             cwd=root, capture_output=True, text=True, check=True).stdout
        run_id = out.strip().splitlines()[-1]

        sys.path.insert(0, str(ROOT))
        from geval_spec.analysis.frame import sweep
        from geval_spec.dataset.cases import load_dataset
        from geval_spec.spec.project import Project
        from geval_spec.analysis.resolve import load
        from geval_spec.store.db import Store

        with Store(root / ".geval" / "results.duckdb") as store:
            t0 = time.perf_counter()
            loaded = load(store, Project(root), run_id)
            t_read = time.perf_counter() - t0
        src = loaded.source
        dataset = load_dataset(src.spec, src.data_path, src.data_display, src.problem)
        t0 = time.perf_counter()
        import scipy.stats  # noqa: F401  (imported once per process; timed separately)

        t_import = time.perf_counter() - t0
        n_verdicts = sum(len(j.verdicts or ()) for j in loaded.judgments)
        t0 = time.perf_counter()
        result = sweep(src, loaded.case_ids, loaded.judgments, dataset=dataset, with_test_ci=False)
        t_sweep = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "geval_spec", "sweep", run_id], cwd=root, capture_output=True,
                       check=True)
        t_cmd = time.perf_counter() - t0
    print(f"{len(result.rows)} temperatures over {n_verdicts:,} stored verdicts ({args.cases:,} cases)")
    print(f"sweep computation {t_sweep:.3f} s; ratio to the 1 s target {t_sweep:.2f} "
          f"({'met' if t_sweep <= 1 else 'NOT met'}); chosen T = {result.chosen}")
    print(f"importing scipy.stats (once per process, not counted above): {t_import:.3f} s")
    print(f"reading the run's judgments from DuckDB: {t_read:.3f} s; whole `geval-spec sweep RUN` command "
          f"(with the test interval): {t_cmd:.3f} s")


if __name__ == "__main__":
    main()
