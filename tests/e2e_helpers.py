"""A throw-away project wired to the local fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

SPEC = """name: {name}
version: 1
task: Judge whether a summary is consistent with its source.
criterion: {{name: Consistency, description: The summary states only facts the source supports.}}
steps:
  - Read the source.
  - Check each statement of the summary.
rubric:
  scale: {{min: 1, max: 5}}
  anchors:
    1: {{description: contradicts the source}}
    2: {{description: several unsupported claims}}
    3: {{description: speculative details}}
    4: {{description: a harmless nuance}}
    5: {{description: fully supported}}
scoring:
  method: {method}
{scoring_extra}judge:
  model: openai/judge-small
  temperature: {temperature}
  max_tokens: 200
  seed: 7
  top_logprobs: 5
  api_base: {api_base}
  client: {client}
  timeout: {timeout}
  max_retries: {max_retries}
data:
  path: data/cases.jsonl
  id: id
  group: doc
  fields: {{source: src, candidate: cand}}
  human: human
split: {{by: group, fractions: {{dev: 0.5, test: 0.5}}, seed: 1}}
calibration: {{split: all, level: dataset, threshold: -1, min_validity: 0}}
"""


def make_project(root: Path, api_base: str, *, n: int = 20, name: str = "demo", method: str = "logprobs",
                 client: str = "litellm", scoring_extra: str = "", temperature: float = 0, timeout: float = 10,
                 max_retries: int = 4) -> Path:
    specs = root / "specs"
    (specs / "data").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        score = 1 + (i * 7) % 5
        rows.append({"id": f"c{i:03d}", "doc": f"d{i // 2}", "src": f"Source text number {i}.",
                     "cand": f"Summary {i} [[score={score}]]", "human": score + (0.5 if i % 3 == 0 else 0)})
    (specs / "data" / "cases.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (specs / f"{name}.yaml").write_text(SPEC.format(name=name, method=method, api_base=api_base, client=client,
                                                    scoring_extra=scoring_extra, temperature=temperature,
                                                    timeout=timeout, max_retries=max_retries))
    return root
