"""A run's peak RSS with the same data as JSON Lines, CSV and JSON, against the local test server.

    .venv/bin/python bench/data_formats.py [--n 20000] [--text-bytes 2000] [--concurrency 64]

Each case carries a source of about ``--text-bytes`` bytes (the size of a
news summary's source) with a line break inside it. JSON Lines and CSV
files leave their cases' texts in the file during a run (``OnDisk``: read
again a chunk at a time); a JSON file is read whole, and its cases hold
their texts until each chunk is planned. The JSON run is the reference:
what a run of this data costs when its texts are held.

Processes are timed as bench/scale.py times them (/usr/bin/time: user +
system CPU, peak RSS), each on a fresh store, warm (bytecode written). The
three runs must judge the same cases to the same scores: the script checks
that their reports' correlations are equal.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from e2e_helpers import make_project  # noqa: E402
from scale import compile_package, serving, timed  # noqa: E402

WORDS = ("de het een en van in op is dat te zijn voor met als aan bij ook maar om the of and to a in is that "
         "for it with as was on be by this are from at an").split()
COLUMNS = ("id", "doc", "src", "cand", "human")


def rows(n: int, text_bytes: int) -> list[dict[str, object]]:
    rng = random.Random(7)
    out = []
    for i in range(n):
        words: list[str] = []
        size = 0
        while size < text_bytes:
            words.append(rng.choice(WORDS))
            size += len(words[-1]) + 1
        src = " ".join(words)
        score = 1 + (i * 7) % 5
        out.append({"id": f"c{i:06d}", "doc": f"d{i // 4}", "src": src[: len(src) // 2] + "\n" + src[len(src) // 2:],
                    "cand": f"Summary {i} [[score={score}]]", "human": score + (0.5 if i % 3 == 0 else 0)})
    return out


def project(root: Path, fmt: str, data: list[dict[str, object]], base: str) -> Path:
    make_project(root, base, n=1, name="bench", client="openai-http")
    folder = root / "specs" / "data"
    (folder / "cases.jsonl").unlink()
    path = folder / f"cases.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    elif fmt == "json":
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(COLUMNS)
            writer.writerows([r[c] for c in COLUMNS] for r in data)
    spec = root / "specs" / "bench.yaml"
    spec.write_text(spec.read_text().replace("data/cases.jsonl", f"data/cases.{fmt}"))
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--text-bytes", type=int, default=2_000)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    compile_package()
    data = rows(args.n, args.text_bytes)
    tmp = Path(tempfile.mkdtemp(prefix="geval-formats-"))
    results: dict[str, tuple[float, float, int, object]] = {}
    try:
        with serving(0.0) as port:
            base = f"http://127.0.0.1:{port}/v1"
            for fmt in ("jsonl", "csv", "json"):
                root = project(tmp / fmt, fmt, data, base)
                run = timed([sys.executable, "-m", "geval_spec", "run", "bench", "--concurrency",
                             str(args.concurrency)], root)
                report = timed([sys.executable, "-m", "geval_spec", "report", "bench", "--format", "json", "--out", "-", "--exit-zero"], root)
                size = (root / "specs" / "data" / f"cases.{fmt}").stat().st_size
                results[fmt] = (run.rss_mb, run.cpu, size, json.loads(report.out)["correlation"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"N = {args.n:,} cases, about {args.text_bytes:,} bytes of text each, concurrency {args.concurrency}")
    print("| data | file | run peak RSS | run CPU |")
    print("| --- | ---: | ---: | ---: |")
    for fmt, (rss, cpu, size, _) in results.items():
        print(f"| {fmt} | {size / 2**20:.0f} MB | {rss:.0f} MB | {cpu:.1f} s |")
    same = len({json.dumps(r[3], sort_keys=True) for r in results.values()}) == 1
    print(f"the three runs' correlations are {'equal' if same else 'NOT equal'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
