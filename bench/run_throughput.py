"""Throughput of `geval-spec run` against a local OpenAI-compatible server.

    .venv/bin/python bench/run_throughput.py [--n 2000] [--concurrency 64] [--latency 0.2]
                                             [--client openai-http|litellm]

Starts the test server (tests/openai_server.py) in its own process with a
fixed latency per request, writes a throw-away project with N cases, and runs
the whole `geval-spec run` command once. Prints its wall time as a ratio to
the ideal ceil(N / C) x latency, and the client's CPU time per judgment
(user + system of the geval-spec process, from getrusage). Targets: wall
<= 1.25 x ideal, CPU <= 5 ms per judgment.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from e2e_helpers import make_project  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--client", default="openai-http", choices=["openai-http", "litellm"])
    args = ap.parse_args()

    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"), "--latency",
                               str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline().split()[1])
        with tempfile.TemporaryDirectory() as tmp:
            root = make_project(Path(tmp), f"http://127.0.0.1:{port}/v1", n=args.n, name="bench",
                                client=args.client)
            env = dict(os.environ)
            env.pop("OPENAI_API_KEY", None)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "geval_spec", "run", "bench", "--concurrency",
                                   str(args.concurrency)], cwd=root, capture_output=True, text=True, env=env)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if proc.returncode != 0:
                raise SystemExit(proc.stderr)
    finally:
        server.kill()
        server.wait()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ideal = math.ceil(args.n / args.concurrency) * args.latency
    print(f"client {args.client}: N={args.n} judgments, concurrency {args.concurrency}, latency {args.latency} s")
    print(f"wall {wall:.2f} s; ideal ceil(N/C) x latency = {ideal:.2f} s; ratio {wall / ideal:.2f} "
          f"(target <= 1.25: {'met' if wall / ideal <= 1.25 else 'NOT met'})")
    print(f"client CPU {cpu:.2f} s = {1000 * cpu / args.n:.2f} ms per judgment "
          f"(target <= 5 ms: {'met' if 1000 * cpu / args.n <= 5 else 'NOT met'})")
    print(proc.stdout.strip().splitlines()[-3])


if __name__ == "__main__":
    main()
