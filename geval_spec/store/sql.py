"""Small SQL helpers shared by the store's modules (none of which but :mod:`.db` imports DuckDB)."""

from __future__ import annotations

import json
import os
import re
import threading
from itertools import count
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

IN = "IN (SELECT unnest(?::VARCHAR[]))"  # a parameter holding a list of strings
TRANSPORT_FAILED = "NOT valid AND reason LIKE 'request failed:%'"  # judgments the next run asks for again

ROWS = "_geval_rows"  # the name a chunk of rows is scanned by (Store.insert)
# Store.insert's ``last`` for judgments: the case key stored with the run's case (rows' c0 run_id, c1 case_id)
KEY_OF_CASE = "(SELECT k.case_key FROM run_cases k WHERE k.run_id = r.c0 AND k.case_id = r.c1)"
_NUMPY_TYPES = {"DOUBLE": "float64", "BIGINT": "int64", "INTEGER": "int64", "BOOLEAN": "bool"}


def columns(rows: Sequence[tuple[Any, ...]], types: Sequence[str]) -> dict[str, Any]:
    """Rows as NumPy columns named c0, c1, ...: numbers and booleans typed, and where any value of such a column
    is None (NULL), a column n0, n1, ... that says which (:func:`column_sql` makes them NULL); text and anything
    else as Python objects, which DuckDB reads as they are.

    (A separate mask rather than NumPy's masked arrays, which DuckDB reads the same and as fast: importing
    ``numpy.ma`` took 10-14 ms of every run.)"""
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
        if any(missing):
            out[f"c{i}"] = np.array([0 if v is None else v for v in values], dtype=dtype)
            out[f"n{i}"] = np.array(missing, dtype=bool)
        else:
            out[f"c{i}"] = np.array(values, dtype=dtype)
    return out


def column_sql(i: int, chunk: Mapping[str, Any]) -> str:
    """Column ``i`` of a chunk made by :func:`columns` (scanned as ``r``), NULL where its mask says so."""
    return f"(CASE WHEN r.n{i} THEN NULL ELSE r.c{i} END)" if f"n{i}" in chunk else f"r.c{i}"


def select(chunk: Mapping[str, Any], types: Sequence[str], last: str | None) -> str:
    """The SELECT list that inserts a chunk made by :func:`columns`, each column cast to its table's type;
    ``last``: SQL for the last column instead of the chunk's (see :meth:`~geval_spec.store.db.Store.insert`)."""
    return ", ".join(f"{column_sql(i, chunk)}::{t}" if last is None or i < len(types) - 1 else f"{last}::{t}"
                     for i, t in enumerate(types))


def encoder(**options: Any) -> Callable[[Any], str]:
    """``json.JSONEncoder(**options).encode`` for values that hold no cycle (made by the store or decoded from
    JSON), with the C encoder made once, not per call (JSONEncoder.encode makes one each time, with a fresh
    memo of the values under way to detect cycles): 2.8 against 4.8 us for a judgment's distribution."""
    python = json.JSONEncoder(**options)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # (an interpreter without the C encoder)
        return python.encode
    c_encoder = make(None, python.default, json.encoder.encode_basestring_ascii if python.ensure_ascii else
                     json.encoder.encode_basestring, None, python.key_separator, python.item_separator,
                     python.sort_keys, python.skipkeys, python.allow_nan)

    def encode(value: Any) -> str:
        return "".join(c_encoder(value, 0))

    return encode


_ENCODE = encoder(ensure_ascii=False, sort_keys=True)


def dumps(value: Any) -> str | None:
    """``json.dumps(value, ensure_ascii=False, sort_keys=True)``; None stays None (NULL)."""
    return None if value is None else _ENCODE(value)


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


# One DuckDB database in memory per process, to which each session attaches the store's file and detaches it at
# its end. A connection to the file made a DuckDB database for every session: about 30 ms of CPU each time (its
# catalog, its built-in extensions), where attaching takes about 3 (BENCHMARKS.md, scale). Detaching checkpoints
# the file and lets it go, as closing a connection did: another process can open it at once.
_ENGINE_LOCK = threading.Lock()  # held for every statement on the engine's own connection (attach, detach)
_engine: Any = None
_attached: dict[str, list[Any]] = {}  # the file's real path -> [the engine, the file's name there, sessions open]
_names = count(1)


class Session:
    """A session's connection to a store file: a cursor of the process's DuckDB engine whose default database is
    the file, attached while any session of this process is open on it (the gate's thread and the main thread may
    overlap). The store's SQL names its tables without a database, as on a connection to the file itself."""

    def __init__(self, engine: Any, key: str, name: str) -> None:
        self.engine, self.key, self.name = engine, key, name
        self._cursor = self.cursor()

    def execute(self, sql: str, params: Any = None) -> Any:
        return self._cursor.execute(sql) if params is None else self._cursor.execute(sql, params)

    def cursor(self) -> Any:
        """A new cursor on the file (a transaction's own)."""
        with _ENGINE_LOCK:  # (made from the engine's own connection, which threads share)
            c = self.engine.cursor()
        c.execute(f"USE {self.name}")
        return c

    def close(self) -> None:
        try:
            self._cursor.close()
        finally:
            release(self.engine, self.key, self.name)


def attach(path: Path, new_engine: Callable[[], Any]) -> Session:
    """A session on the file: attached now (or already, by another open session of this process) to the engine,
    which ``new_engine`` makes when there is none (:func:`geval_spec.store.db._connect`: DuckDB in memory)."""
    global _engine
    key = os.path.realpath(path)
    with _ENGINE_LOCK:
        entry = _attached.get(key)
        if entry is None:
            if _engine is None:
                _engine = new_engine()
            if os.path.isfile(key) and os.path.getsize(key) == 0:  # (a connection made a store of an empty file;
                os.unlink(key)                                     # attaching refuses it: it holds nothing)
            name = f"geval_store_{next(_names)}"
            quoted = key.replace("'", "''")
            _engine.execute(f"ATTACH '{quoted}' AS {name}")
            entry = _attached[key] = [_engine, name, 0]
            try:  # where DuckDB spills past the memory limit: beside the file, as for a connection to it (the
                _engine.execute(f"SET temp_directory = '{quoted}.tmp'")  # engine's own default is .tmp in the
            except Exception:                                            # current folder)
                pass
        entry[2] += 1
        engine, name = entry[0], entry[1]
    try:
        return Session(engine, key, name)
    except BaseException:
        release(engine, key, name)
        raise


def attached(path: Path) -> bool:
    """Whether a session of this process holds the file now."""
    with _ENGINE_LOCK:
        return os.path.realpath(path) in _attached


def release(engine: Any, key: str, name: str) -> None:
    """A session on the file ended: detach it when it was the last (DuckDB checkpoints it then). If detaching
    fails (a commit that ran out of memory can leave the file's database unusable), the engine is dropped: the
    next session gets a new one."""
    global _engine
    with _ENGINE_LOCK:
        entry = _attached.get(key)
        if entry is None or entry[1] != name:
            return
        entry[2] -= 1
        if entry[2] > 0:
            return
        del _attached[key]
        try:
            engine.execute(f"DETACH {name}")
        except Exception as exc:
            if str(exc).startswith("IO Error: Detached database"):  # detached, its checkpoint failed: the WAL
                return                                                # keeps what it did not write (replayed next)
            if engine is _engine:
                _engine = None
            if not any(other[0] is engine for other in _attached.values()):  # nothing else is attached to it: its
                try:                                                          # files go with it now
                    engine.close()
                except Exception:
                    pass
            raise


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
        inside = self.in_transaction  # (a COMMIT that runs out of memory is not run again: its transaction is gone)
        if word.startswith("BEGIN"):
            self.in_transaction = True
        elif word.startswith(("COMMIT", "ROLLBACK")):
            self.in_transaction = False
        while True:
            try:
                return self.raw.execute(sql) if params is None else self.raw.execute(sql, params)
            except Exception as exc:
                limit = self.store.memory_limit
                if limit is None or inside or self.in_transaction or not out_of_memory(exc):
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
