"""Wall time of `geval-spec validate` on the example specs (target: < 0.3 s warm).

Run: .venv/bin/python bench/validate_speed.py
Prints the median of 15 warm runs (after 3 warm-up runs) and its ratio to 0.3 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.3


def once() -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "geval_spec", "validate"], cwd=ROOT, capture_output=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode())
    return elapsed


def main() -> None:
    for _ in range(3):
        once()
    runs = [once() for _ in range(15)]
    median = statistics.median(runs)
    specs = len(list((ROOT / "specs").glob("*.yaml")))
    print(f"validate of {specs} example specs: median {median:.3f} s, min {min(runs):.3f} s, max {max(runs):.3f} s")
    print(f"ratio to the {TARGET} s target: {median / TARGET:.2f} ({'met' if median < TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
