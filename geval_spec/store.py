"""The only module that talks to DuckDB.

DuckDB reads the users' data files (JSON, JSONL, CSV, Parquet) and holds every
result geval-spec produces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import DataError


def _duckdb():
    import duckdb

    return duckdb


_READER = None


def _reader():
    """One in-memory connection for reading data files (connecting costs ~15 ms)."""
    global _READER
    if _READER is None:
        _READER = _duckdb().connect(":memory:")
    return _READER


def read_records(path: Path, fmt: str) -> tuple[list[dict[str, Any]], list[str]]:
    """All records of a data file as plain dicts, and the top-level column names.

    JSON is read as raw objects (``read_json_objects``) and decoded here, so
    nested values keep their exact shape and types whatever DuckDB would infer.
    """
    duckdb = _duckdb()
    con = _reader().cursor()
    p = str(path)
    try:
        if fmt in ("json", "jsonl"):
            fmt_arg = "newline_delimited" if fmt == "jsonl" else "auto"
            rows = con.execute("SELECT json FROM read_json_objects(?, format = ?)", [p, fmt_arg]).fetchall()
            records = []
            for (raw,) in rows:
                value = json.loads(raw)
                if not isinstance(value, dict):
                    raise DataError(f"every record must be a JSON object, found {type(value).__name__}")
                records.append(value)
            columns = list(dict.fromkeys(k for r in records[:100] for k in r))
            return records, columns
        if fmt == "csv":
            rel = con.execute("SELECT * FROM read_csv(?, header = true, auto_detect = true, all_varchar = false)", [p])
        elif fmt == "parquet":
            rel = con.execute("SELECT * FROM read_parquet(?)", [p])
        else:
            raise DataError(f"unknown data format {fmt!r}")
        columns = [d[0] for d in rel.description]
        records = [dict(zip(columns, row)) for row in rel.fetchall()]
        return records, columns
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"cannot read as {fmt}: {first}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read as {fmt}: {exc}") from None
    finally:
        con.close()
