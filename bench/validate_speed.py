"""Wall time of `geval-spec validate` on the example specs, as a ratio to importing its three core libraries.

Run: .venv/bin/python bench/validate_speed.py

Target: validate <= 2.5 x the wall time of ``python -c "import pydantic, jinja2, ruamel.yaml"``, both
measured in this run, alternating (machines differ 2x between sessions; the ratio does not). Prints
the median of 30 warm runs of each (after 3 warm-up runs of each), the ratio of the medians (the
figure the target is judged on) and, as a check on noise, the median of the 30 pairwise ratios.

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
TARGET = 2.5
VALIDATE = [sys.executable, "-m", "geval_spec", "validate"]
IMPORTS = [sys.executable, "-c", "import pydantic, jinja2, ruamel.yaml"]


def once(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode())
    return elapsed


def main() -> None:
    warm = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for _ in range(3):
        once(VALIDATE, warm)
        once(IMPORTS, warm)
    runs: dict[str, list[float]] = {"validate": [], "imports": []}
    for _ in range(30):
        runs["validate"].append(once(VALIDATE, warm))
        runs["imports"].append(once(IMPORTS, warm))
    v, i = statistics.median(runs["validate"]), statistics.median(runs["imports"])
    specs = len(list((ROOT / "specs").glob("*.yaml")))
    print(f"validate of {specs} example specs: median {v:.3f} s (min {min(runs['validate']):.3f}, "
          f"max {max(runs['validate']):.3f})")
    print(f"import pydantic, jinja2, ruamel.yaml: median {i:.3f} s (min {min(runs['imports']):.3f}, "
          f"max {max(runs['imports']):.3f})")
    ratio = v / i
    pairs = statistics.median(a / b for a, b in zip(runs["validate"], runs["imports"]))
    print(f"ratio {ratio:.2f} (target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'}); "
          f"median of the pairwise ratios {pairs:.2f}")


if __name__ == "__main__":
    main()
