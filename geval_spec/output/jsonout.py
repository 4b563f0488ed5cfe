"""A result as JSON: its serialisation, indented, keys in declared order, no NaN."""

from __future__ import annotations

import json

from pydantic import BaseModel


def to_json(result: BaseModel) -> str:
    return json.dumps(result.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False,
                      allow_nan=False) + "\n"
