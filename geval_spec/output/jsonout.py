"""A result as JSON: its serialisation, indented, keys in declared order, no NaN."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel

# what JSON leaves as it is but a terminal acts on or shows reordered: DEL, C1 controls, bidirectional marks
_UNSEEN = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def to_json(result: BaseModel) -> str:
    """The JSON text, with the characters above as \\u escapes (the same strings, nothing unseen when printed)."""
    text = json.dumps(result.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False, allow_nan=False)
    return _UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
