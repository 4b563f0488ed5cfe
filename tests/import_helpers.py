"""A throw-away project whose judgments are imported: exact scores per case, no judge needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from conftest import cli

SPEC = """name: {name}
version: 1
task: Judge a summary.
criterion: {{name: Consistency, description: The summary states only facts the source supports.}}
steps: [Read the source., Judge the summary.]
rubric:
  scale: {{min: 1, max: 5}}
  anchors:
    1: {{description: contradicts the source}}
    2: {{description: several unsupported claims}}
    3: {{description: speculative details}}
    4: {{description: a harmless nuance}}
    5: {{description: fully supported}}
scoring: {{method: {method}}}
judge: {{model: openai/judge-small}}
data:
  path: data/{name}.jsonl
  id: id
  group: doc
{system}  fields: {{source: src, candidate: cand}}
  human: human
{rest}"""


def write_project(root: Path, rows: Iterable[dict[str, Any]], rest: str, *, name: str = "p",
                  system: bool = False, method: str = "direct", scoring: str = "") -> Path:
    """specs/<name>.yaml over ``rows`` (id, doc, human, optional sys and split); ``rest`` is appended YAML.

    ``scoring``: more keys of the scoring section (e.g. ``samples: 4``).
    """
    (root / "specs" / "data").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"src": "s", "cand": f"c{i}", **r}) for i, r in enumerate(rows)]
    (root / "specs" / "data" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    text = SPEC.format(name=name, system="  system: sys\n" if system else "", rest=rest,
                       method=method + (f", {scoring}" if scoring else ""))
    (root / "specs" / f"{name}.yaml").write_text(text)
    return root


def import_lines(root: Path, lines: Iterable[dict[str, Any]], label: str, *, name: str = "p") -> str:
    """Import JSON Lines of judgments; the run id."""
    path = root / f"{label}.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    res = cli("import", name, str(path), cwd=root)
    assert res.code == 0, res.err
    return res.out.strip().splitlines()[-1]


def import_scores(root: Path, scores: dict[str, float], label: str, *, name: str = "p") -> str:
    return import_lines(root, ({"case_id": cid, "score": s} for cid, s in scores.items()), label, name=name)
