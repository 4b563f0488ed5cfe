"""A result as JSON: its serialisation, indented, keys in declared order, no NaN."""

from __future__ import annotations

import json

from pydantic import BaseModel

from geval_spec.redact import unseen_escaped


def to_json(result: BaseModel) -> str:
    """The JSON text, with what JSON leaves as it is but a terminal acts on or shows reordered (DEL, C1 controls,
    bidirectional marks) as \\u escapes: the same strings, nothing unseen when printed."""
    text = json.dumps(result.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False, allow_nan=False)
    return unseen_escaped(text) + "\n"
