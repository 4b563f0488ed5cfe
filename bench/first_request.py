"""Seconds from `geval-spec run` starting to its first request reaching the judge, through litellm.

    .venv/bin/python bench/first_request.py [--n 2000] [--repeat 3]

Starts the local OpenAI-compatible server in this process, writes a project
of N cases whose judge goes through litellm (`client: litellm`), and starts
`geval-spec run` as a child process; the time from the child's start to the
server accepting its first request is measured on one monotonic clock. Runs
it with litellm imported in the background while the run is created and
the first prompts rendered (as shipped), and with that warm-up switched off (the
import then happens at the first call). Also prints the bare cost of
`import litellm` in a fresh interpreter. Each figure is the median of
--repeat runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from e2e_helpers import make_project  # noqa: E402
from openai_server import FakeOpenAI, ServerConfig  # noqa: E402

NO_WARM_UP = ("import geval_spec.runner.run as r; r.warm_up = lambda name: None; "
              "from geval_spec.cli.main import main; main()")
SHIPPED = "from geval_spec.cli.main import main; main()"


def first_request(code: str, n: int) -> float:
    with FakeOpenAI(ServerConfig()) as srv, tempfile.TemporaryDirectory() as tmp:
        root = make_project(Path(tmp), srv.base_url, n=n, name="bench", client="litellm")
        env = dict(os.environ)
        env.pop("OPENAI_API_KEY", None)
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", code, "run", "bench", "--limit", str(n)], cwd=root,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        while not srv.state.accepted_at and proc.poll() is None:
            time.sleep(0.005)
        first = srv.state.accepted_at[0] - start if srv.state.accepted_at else float("nan")
        proc.kill()
        proc.wait()
        return first


def bare_import() -> float:
    out = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); import litellm; "
                          "print(time.perf_counter() - t)"], capture_output=True, text=True,
                         env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    shipped = statistics.median(first_request(SHIPPED, args.n) for _ in range(args.repeat))
    cold = statistics.median(first_request(NO_WARM_UP, args.n) for _ in range(args.repeat))
    bare = statistics.median(bare_import() for _ in range(args.repeat))
    print(f"import litellm alone: {bare:.2f} s")
    print(f"first request after start, litellm imported at the first call: {cold:.2f} s")
    print(f"first request after start, litellm imported in the background (shipped): {shipped:.2f} s")
    print(f"ratio shipped / first-call import: {shipped / cold:.2f}")


if __name__ == "__main__":
    main()
