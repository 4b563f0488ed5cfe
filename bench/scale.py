"""geval-spec at 2,000, 10,000 and 100,000 cases against a local server, next to a raw aiohttp loop.

    .venv/bin/python bench/scale.py [--sizes 2000 10000 100000] [--concurrency 64] [--latency 0.0]

For each N, in one run of this script:

- a raw aiohttp loop (the reference): N requests with the same bodies, C at a
  time, each answer decoded with json.loads: wall time and CPU per request;
- ``geval-spec run`` on a fresh store: wall time, CPU per judgment, peak RSS
  and the store's size on disk;
- the unchanged rerun: requests sent (must be 0) and its CPU as a share of
  the first run's;
- ``geval-spec report --format all`` (2,000 bootstrap draws): wall time.

With ``--latency 0.2 --sizes 2000`` it also checks the run's wall time against
the raw loop's (target: at most 1.15 x, at concurrency 64).

Processes are timed with /usr/bin/time (user + system CPU, peak RSS of that
process alone), warm as on a user's machine after a first run: Python's
bytecode cache written (the script compiles geval-spec's modules first and
drops PYTHONDONTWRITEBYTECODE, which some sandboxes set: then every run
compiled geval-spec's own modules from source, about 0.25 s of CPU and of
wall that the raw loop, whose aiohttp pip compiled at install, does not pay).
The server (tests/openai_server.py) runs in its own process.
Targets (issue: 100,000 cases on one machine): CPU per judgment <= 3 x the raw
loop's CPU per request; RSS at 100k <= 1.5 x RSS at 10k and <= 500 MB; rerun
CPU <= 5% of the first run's with 0 requests sent; report <= 5 s at 10k and
<= 60 s at 100k.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from e2e_helpers import make_project  # noqa: E402

RAW_LOOP = r'''
import asyncio, json, sys
import aiohttp

async def main(url, bodies, concurrency):
    sem = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def one(body):
            async with sem:
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    json.loads(await resp.text())
        await asyncio.gather(*(one(b) for b in bodies))

url, path, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
bodies = [line for line in open(path, encoding="utf-8").read().splitlines() if line]
asyncio.run(main(url, bodies, concurrency))
'''


@dataclass
class Timed:
    wall: float
    cpu: float
    rss_mb: float
    out: str


def warm_env() -> dict[str, str]:
    """The environment of every measured process: no API key, and bytecode written (see the module docstring)."""
    return {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "PYTHONDONTWRITEBYTECODE")}


def compile_package() -> None:
    """Write the bytecode of geval-spec and its plugins, as a first run (or pip, for a package it installs) does."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "geval_spec"), str(ROOT / "plugins")],
                   check=True, capture_output=True, env=warm_env())


def timed(cmd: list[str], cwd: Path) -> Timed:
    env = warm_env()
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %M", *cmd], cwd=cwd, capture_output=True, text=True,
                          env=env)
    wall = time.perf_counter() - start
    line = [x for x in proc.stderr.splitlines() if x.startswith("TIME ")][-1].split()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return Timed(wall, float(line[1]) + float(line[2]), int(line[3]) / 1024, proc.stdout)


def server_count(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats") as resp:
        return int(json.loads(resp.read())["total"])


def bodies_of(root: Path, n: int, tmp: Path) -> Path:
    """The request bodies the run sends (rendered by geval-spec itself), one per line, for the raw loop."""
    out = subprocess.run([sys.executable, "-m", "geval_spec", "render", "bench", "--format", "json"], cwd=root,
                         capture_output=True, text=True, check=True, env=warm_env()).stdout
    first = json.loads(out)[0]["body"]
    text = first["messages"][-1]["content"]
    path = tmp / f"bodies-{n}.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):  # the same shape and size, a distinct case each
            body = dict(first, messages=[dict(first["messages"][-1], content=text.replace("Summary 0 ", f"Summary {i} "))])
            fh.write(json.dumps(body) + "\n")
    return path


def one_size(n: int, port: int, concurrency: int, tmp: Path) -> dict[str, float]:
    base = f"http://127.0.0.1:{port}/v1"
    root = make_project(tmp / f"p{n}", base, n=n, name="bench", client="openai-http")
    raw = timed([sys.executable, "-c", RAW_LOOP, f"{base}/chat/completions", str(bodies_of(root, n, tmp)),
                 str(concurrency)], root)
    first = timed([sys.executable, "-m", "geval_spec", "run", "bench", "--concurrency", str(concurrency)], root)
    db = root / ".geval" / "results.duckdb"
    size = sum(p.stat().st_size for p in db.parent.glob("results.duckdb*") if p.is_file()) / 1e6
    before = server_count(port)
    rerun = timed([sys.executable, "-m", "geval_spec", "run", "bench"], root)
    sent = server_count(port) - before
    report = timed([sys.executable, "-m", "geval_spec", "report", "bench", "--format", "all", "--exit-zero"], root)
    return {"n": n, "raw_wall": raw.wall, "raw_cpu_ms": 1000 * raw.cpu / n, "run_wall": first.wall,
            "run_cpu_ms": 1000 * first.cpu / n, "rss": first.rss_mb, "db_mb": size, "rerun_sent": sent,
            "rerun_share": rerun.cpu / first.cpu, "report_wall": report.wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 100000])
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.0)
    args = ap.parse_args()
    compile_package()
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"), "--latency",
                               str(args.latency)], stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        port = int(server.stdout.readline().split()[1])  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.sizes:
                rows.append(one_size(n, port, args.concurrency, Path(tmp)))
                print(f"measured N={n}", file=sys.stderr, flush=True)
    finally:
        server.kill()
        server.wait()
    print(f"concurrency {args.concurrency}, server latency {args.latency} s")
    print("| N | raw loop wall | raw CPU/req | run wall | wall ratio | run CPU/judgment | CPU ratio | peak RSS | store | "
          "rerun sent | rerun CPU share | report all |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['n']:,} | {r['raw_wall']:.1f} s | {r['raw_cpu_ms']:.2f} ms | {r['run_wall']:.1f} s | "
              f"{r['run_wall'] / r['raw_wall']:.2f} | "
              f"{r['run_cpu_ms']:.2f} ms | {r['run_cpu_ms'] / r['raw_cpu_ms']:.2f} | {r['rss']:.0f} MB | "
              f"{r['db_mb']:.0f} MB | {r['rerun_sent']:.0f} | {100 * r['rerun_share']:.1f}% | "
              f"{r['report_wall']:.1f} s |")
    by_n = {r["n"]: r for r in rows}
    checks = [(f"CPU per judgment <= 3 x raw at N={r['n']:,}", r["run_cpu_ms"] <= 3 * r["raw_cpu_ms"]) for r in rows]
    checks += [(f"rerun sends 0 and uses <= 5% CPU at N={r['n']:,}",
                r["rerun_sent"] == 0 and r["rerun_share"] <= 0.05) for r in rows]
    if args.latency >= 0.2 and 2000 in by_n:  # the wall target is stated at latency 0.2 s, C = 64
        checks.append((f"run wall <= 1.15 x raw loop wall at N=2,000, latency {args.latency} s",
                       by_n[2000]["run_wall"] <= 1.15 * by_n[2000]["raw_wall"]))
    if 10000 in by_n:
        checks.append(("report <= 5 s at 10,000", by_n[10000]["report_wall"] <= 5))
    if 100000 in by_n:
        checks.append(("report <= 60 s at 100,000", by_n[100000]["report_wall"] <= 60))
        checks.append(("RSS at 100k <= 500 MB", by_n[100000]["rss"] <= 500))
        if 10000 in by_n:
            checks.append(("RSS at 100k <= 1.5 x RSS at 10k", by_n[100000]["rss"] <= 1.5 * by_n[10000]["rss"]))
    for name, ok in checks:
        print(f"{name}: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
