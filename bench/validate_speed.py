"""Wall time of `geval-spec validate` on the example specs (target: < 0.3 s warm).

Run: .venv/bin/python bench/validate_speed.py
Prints the median of 15 warm runs (after 3 warm-up runs) and its ratio to 0.3 s.

"Warm" means what it does on a user's machine: files in the page cache and
Python's bytecode cache written. The runs therefore drop
PYTHONDONTWRITEBYTECODE, which some sandboxes set (then every start
recompiles geval-spec's own modules from source); the warm-up runs write the
cache.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.3


def once(env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "geval_spec", "validate"], cwd=ROOT, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode())
    return elapsed


def measure(env: dict) -> list[float]:
    for _ in range(3):
        once(env)
    return [once(env) for _ in range(15)]


def main() -> None:
    warm = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = measure(warm)
    median = statistics.median(runs)
    specs = len(list((ROOT / "specs").glob("*.yaml")))
    print(f"validate of {specs} example specs: median {median:.3f} s, min {min(runs):.3f} s, max {max(runs):.3f} s")
    print(f"ratio to the {TARGET} s target: {median / TARGET:.2f} ({'met' if median < TARGET else 'NOT met'})")



if __name__ == "__main__":
    main()
