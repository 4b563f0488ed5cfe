"""Small SQL helpers shared by the store's modules (none of which but :mod:`.db` imports DuckDB)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

IN = "IN (SELECT unnest(?::VARCHAR[]))"  # a parameter holding a list of strings
TRANSPORT_FAILED = "NOT valid AND reason LIKE 'request failed:%'"  # judgments the next run asks for again

ROWS = "_geval_rows"  # the name a chunk of rows is scanned by (Store.insert)
# Store.insert's ``last`` for judgments: the case key stored with the run's case (rows' c0 run_id, c1 case_id)
KEY_OF_CASE = "(SELECT k.case_key FROM run_cases k WHERE k.run_id = r.c0 AND k.case_id = r.c1)"
_NUMPY_TYPES = {"DOUBLE": "float64", "BIGINT": "int64", "INTEGER": "int64", "BOOLEAN": "bool"}


def columns(rows: Sequence[tuple[Any, ...]], types: Sequence[str]) -> dict[str, Any]:
    """Rows as NumPy columns named c0, c1, ...: numbers and booleans typed, with a mask where a value is None
    (NULL); text and anything else as Python objects, which DuckDB reads as they are."""
    import numpy as np

    out: dict[str, Any] = {}
    for i, (values, kind) in enumerate(zip(zip(*rows), types)):
        dtype = _NUMPY_TYPES.get(kind)
        if dtype is None:
            column = np.empty(len(values), dtype=object)
            column[:] = values
            out[f"c{i}"] = column
            continue
        missing = [v is None for v in values]
        data = np.array([0 if v is None else v for v in values], dtype=dtype) if any(missing) else \
            np.array(values, dtype=dtype)
        out[f"c{i}"] = np.ma.masked_array(data, mask=missing) if any(missing) else data
    return out


_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True)  # json.dumps builds one per call with these options


def dumps(value: Any) -> str | None:
    """``json.dumps(value, ensure_ascii=False, sort_keys=True)``; None stays None (NULL)."""
    return None if value is None else _ENCODER.encode(value)


def duckdb_file(path: Path) -> bool:
    """Whether the file is empty (DuckDB makes a new store of it) or starts as a DuckDB file does (``DUCK`` after
    the header's checksum). DuckDB itself opens a CSV or JSON file as a database in memory, where writes vanish."""
    with open(path, "rb") as fh:
        head = fh.read(12)
    return not head or head[8:12] == b"DUCK"


def loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


# the runs table's columns but pid, in order
RUN_COLUMNS = ("run_id", "kind", "spec_name", "spec_version", "spec_ref", "spec_file", "judging_fp", "analysis_fp",
               "spec_json", "judges_json", "method", "data_path", "data_sha256", "tool_version", "git_commit",
               "options_json", "source_file", "source_sha256", "started_at", "ended_at", "status", "error")


# DuckDB's words when a statement needs more memory than the session's limit (its OutOfMemoryException, or a
# failed commit that says why)
_OUT_OF_MEMORY = re.compile(r"could not allocate|failed to pin|out of memory", re.IGNORECASE)
MEMORY_AMOUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*$", re.IGNORECASE)
_UNIT = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_MEMORY_CEILING = 64e9
MEMORY_FLOOR = 4e6  # bytes: a session's own needs (a new store's schema took 2 MiB at once)


def memory_bytes(amount: str) -> float | None:
    """The bytes of a DuckDB memory setting such as ``128MB`` (None when it is not one)."""
    found = MEMORY_AMOUNT.match(amount)
    return None if found is None else float(found.group(1)) * _UNIT[found.group(2).upper()]


def out_of_memory(exc: BaseException) -> bool:
    """Whether DuckDB refused ``exc``'s statement for want of memory (within the session's limit)."""
    return type(exc).__name__ == "OutOfMemoryException" or bool(_OUT_OF_MEMORY.search(str(exc)))


def more_memory(limit: str, exc: BaseException) -> str:
    """Twice ``limit`` (a DuckDB memory setting such as ``128MB``), after ``exc`` said it was too little. Past
    64 GB, ``exc`` is raised: a session needing that much is not short of a limit."""
    found = MEMORY_AMOUNT.match(limit)
    number = float(found.group(1)) * 2 if found else 0.0
    if found is None or number * _UNIT[found.group(2).upper()] > _MEMORY_CEILING:
        raise exc
    return f"{number:g}{found.group(2)}"


class Connection:
    """The store's DuckDB connection. A statement outside a transaction that runs out of memory (a read on a store
    grown past the session's limit: an answer lookup, the reuse of judgments) is run again with twice the limit,
    as :meth:`~geval_spec.store.db.Store.transaction` does for writes; the session keeps the larger limit."""

    def __init__(self, raw: Any, store: Any) -> None:  # (store: the Store whose memory_limit it keeps)
        self.raw = raw
        self.store = store
        self.in_transaction = False  # BEGIN ... COMMIT through execute (the schema's migration)

    def execute(self, sql: str, params: Any = None) -> Any:
        word = sql.lstrip()[:8].upper()
        if word.startswith("BEGIN"):
            self.in_transaction = True
        elif word.startswith(("COMMIT", "ROLLBACK")):
            self.in_transaction = False
        while True:
            try:
                return self.raw.execute(sql) if params is None else self.raw.execute(sql, params)
            except Exception as exc:
                limit = self.store.memory_limit
                if limit is None or self.in_transaction or not out_of_memory(exc):
                    raise
                self.limit(more_memory(limit, exc))

    def limit(self, memory: str) -> None:
        """DuckDB's memory limit for the rest of the session (the store's ``memory_limit``); twice that, and so on,
        when DuckDB already holds more than it (it refuses such a limit: "could not free up enough memory")."""
        while True:
            try:
                self.raw.execute(f"SET memory_limit = '{memory}'")
                break
            except Exception as exc:
                if not out_of_memory(exc):
                    raise
                memory = more_memory(memory, exc)
        self.store.memory_limit = memory

    def cursor(self) -> Any:
        return self.raw.cursor()

    def close(self) -> None:
        self.raw.close()
