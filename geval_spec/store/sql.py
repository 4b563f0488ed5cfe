"""Small SQL helpers shared by the store's modules (none of which but :mod:`.db` imports DuckDB)."""

from __future__ import annotations

import json
from typing import Any

IN = "IN (SELECT unnest(?::VARCHAR[]))"  # a parameter holding a list of strings
TRANSPORT_FAILED = "NOT valid AND reason LIKE 'request failed:%'"  # judgments the next run asks for again


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)
