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


# the runs table's columns but pid, in order
RUN_COLUMNS = ("run_id", "kind", "spec_name", "spec_version", "spec_ref", "spec_file", "judging_fp", "analysis_fp",
               "spec_json", "judges_json", "method", "data_path", "data_sha256", "tool_version", "git_commit",
               "options_json", "source_file", "source_sha256", "started_at", "ended_at", "status", "error")
