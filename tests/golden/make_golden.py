"""Capture the outputs that a refactoring must not change.

Runs the command line (``python -m geval_spec``, so it works whatever the
package's internal layout) in a throw-away git repository holding a copy of
``specs/``, and writes every output into one folder:

- the demo: ``import`` of the recorded TCVA verdicts, then ``report --format
  all`` (report.md, report.json, report.html);
- reports of the other two imported TCVA datasets, and the demo at T = 0.9;
- ``sweep`` (Markdown and JSON);
- ``audit`` of every example spec (Markdown and JSON);
- ``compare`` of two committed versions that differ in aggregation (v1 -> v2).

Usage: ``python tests/golden/make_golden.py OUT_DIR``. ``tests/test_golden.py``
runs it and compares the folder with ``tests/golden/expected/`` byte by byte.
Import run ids are derived from content, so every output is reproducible.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

IMPORTS = {
    "summeval-consistency": "specs/data/tcva/summeval-consistency.verdicts.jsonl",
    "summeval-relevance": "specs/data/tcva/summeval-relevance.verdicts.jsonl",
    "usr-faithfulness": "specs/data/tcva/usr-faithfulness.verdicts.jsonl",
}
AUDITED = ("summeval-consistency", "topical-chat-coherence", "nl-samenvatting-consistentie")
# Only these files are copied, so that adding an example spec does not change the commit ids shown in compare.
COPIED = ("summeval-consistency.yaml", "summeval-relevance.yaml", "usr-faithfulness.yaml",
          "topical-chat-coherence.yaml", "nl-samenvatting-consistentie.yaml", "templates", "data/tcva",
          "data/unieval", "data/nl")
# Files added to the copied folders after the outputs were captured (the estimate's demo data): left out, for the
# same reason.
ADDED_LATER = ("summeval-consistency-40-labels.jsonl", "make_partial_labels.py")


def _git(cwd: Path, *args: str) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="golden", GIT_AUTHOR_EMAIL="golden@example.org",
               GIT_COMMITTER_NAME="golden", GIT_COMMITTER_EMAIL="golden@example.org",
               GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, env=env)


def _cli(cwd: Path, *args: str, ok: tuple[int, ...] = (0, 1)) -> str:
    env = dict(os.environ)
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run([sys.executable, "-m", "geval_spec", *args], cwd=str(cwd), capture_output=True,
                          text=True, env=env, timeout=600)
    if proc.returncode not in ok:
        raise SystemExit(f"geval-spec {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc.stdout


def make(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proj = Path(tmp) / "proj"
        for rel in COPIED:
            src, dst = ROOT / "specs" / rel, proj / "specs" / rel
            if src.is_dir():
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*ADDED_LATER))
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, dst)
        _git(proj, "init", "-q")
        _git(proj, "add", "-A")
        _git(proj, "commit", "-q", "-m", "v1")
        db = str(proj / ".geval" / "results.duckdb")
        runs = {}
        for name, path in IMPORTS.items():
            runs[name] = _cli(proj, "import", name, path, "--db", db).strip().splitlines()[-1]
        demo = runs["summeval-consistency"]
        _cli(proj, "report", demo, "--format", "all", "--db", db)
        for ext in ("md", "json", "html"):
            shutil.copy(proj / "reports" / "summeval-consistency" / f"report.{ext}", out / f"demo-report.{ext}")
        for name in ("summeval-relevance", "usr-faithfulness"):
            for ext in ("md", "json"):
                (out / f"{name}-report.{ext}").write_text(
                    _cli(proj, "report", runs[name], "--format", ext, "--out", "-", "--db", db), encoding="utf-8")
        (out / "demo-report-t09.md").write_text(
            _cli(proj, "report", demo, "--temperature", "0.9", "--out", "-", "--db", db), encoding="utf-8")
        for ext in ("md", "json"):
            (out / f"demo-sweep.{ext}").write_text(
                _cli(proj, "sweep", demo, "--format", ext, "--db", db, "--out", "-"), encoding="utf-8")
        for name in AUDITED:
            for ext in ("md", "json"):
                (out / f"{name}-audit.{ext}").write_text(
                    _cli(proj, "audit", name, "--format", ext, "--out", "-"), encoding="utf-8")
        spec = proj / "specs" / "summeval-consistency.yaml"
        spec.write_text(spec.read_text(encoding="utf-8").replace("version: 1", "version: 2")
                        .replace("temperature: 0.5", "temperature: 0.7"), encoding="utf-8")
        _git(proj, "commit", "-q", "-am", "v2")
        for ext in ("md", "json"):
            (out / f"compare.{ext}").write_text(
                _cli(proj, "compare", "summeval-consistency@v1", "summeval-consistency", "--format", ext,
                     "--out", "-", "--db", db), encoding="utf-8")


if __name__ == "__main__":
    make(Path(sys.argv[1]))
