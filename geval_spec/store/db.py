"""The results database: the only module that imports DuckDB.

The store (``.geval/results.duckdb`` by default) holds runs, their cases,
every request (by hash), every answer (the raw body as received, with usage,
cost and latency), failed attempts, judgments, TCVA verdicts and language
findings; :mod:`geval_spec.store.schema` has the tables and views.

A :class:`Store` is a short session: DuckDB lets one process write a file at a
time, so a run opens the store only to write a batch (its writer thread,
:mod:`geval_spec.store.gate`) and closes it again, and ``report``, ``audit``,
``compare``, a second run or a plain DuckDB reader get their turn in between.
Opening waits while another process holds the file.

Nothing paid for is lost on a crash: each response goes to the run's
:class:`~geval_spec.store.journal.Journal` the moment it arrives. Opening the
store replays the journals of runs whose process is gone, then removes them.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from contextlib import suppress
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from geval_spec.dataset.cases import Case
from geval_spec.errors import Problem, RefError, StoreError
from geval_spec.files import ReadError, check_regular
from geval_spec.judge.types import Recorded
from geval_spec.spec.load import ResolvedSpec
from geval_spec.store.batches import BatchTable
from geval_spec.store.journal import Journal, journal_dir, replay_journals
from geval_spec.store.records import Planned, ResponseRecord, RunInfo, RunJudge, RunKind, RunSettings, RunStatus, Usage, now
from geval_spec.store.judgments import JudgmentTables
from geval_spec.store.schema import SCHEMA_VERSION, create_or_migrate, not_ours, replace_views, views_current
from geval_spec.store.shards import ShardTables
from geval_spec.store.sql import IN as _IN, ROWS as _ROWS, RUN_COLUMNS as _RUN_COLUMNS
from geval_spec.store.sql import TRANSPORT_FAILED, duckdb_file, more_memory, out_of_memory
from geval_spec.store.sql import Connection as _Connection, Session, attach, attached
from geval_spec.store.sql import columns as _columns, dumps as _dumps, loads as _loads, select as _select

DEFAULT_WAIT = 120.0  # seconds to wait for another process to let go of the file
INSERT_CHUNK = 10_000  # rows per INSERT statement (see Store.insert)
# a run's cases up to this many are stored as list parameters while NumPy is not loaded: importing it (0.2 s) would
# cost the first request more than DuckDB's slower reading of lists (2,000 cases: 49 against 17 ms)
LIST_ROWS = 5_000
_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


ENGINE_NAMES = ("connect", "Error", "ConstraintException")  # all the store uses of DuckDB's module
def _duckdb() -> Any:
    """DuckDB's engine: its C++ extension module ``_duckdb`` when it stands alone, else the ``duckdb`` package.

    The package re-exports the extension and adds a Python layer (relations,
    expressions, and its version read through importlib.metadata) that the
    store does not use: importing the extension alone takes about 25 ms, the
    package about 170 (a cost every command that opens the store paid;
    BENCHMARKS.md). Releases whose extension is not a top-level ``_duckdb``
    (older ones ship it as ``duckdb.duckdb``), or lacks one of ENGINE_NAMES,
    get the package.
    """
    try:
        import _duckdb  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        pass
    else:
        if all(hasattr(_duckdb, name) for name in ENGINE_NAMES):
            return _duckdb
    import duckdb

    return duckdb


# DuckDB's words when another process holds the file: 'Could not set lock on file "...": Conflicting lock is held
# in ... (PID ...)'
_LOCKED = re.compile(r"(?i)could not set lock|conflicting lock")


def _connect(path: Path, wait: float) -> Session:
    """A session on the file, waiting (with growing pauses) while another process holds it."""
    try:  # a FIFO or a device would hang or never end
        if os.path.lexists(path) and not attached(path):  # (reading the header of a file this process holds would
            # drop its lock: closing any descriptor of a file ends a process's POSIX locks on it)
            check_regular(path, "results database")
            if not duckdb_file(path):  # DuckDB opens a CSV or JSON file as a database in memory: writes vanish
                raise StoreError(f"cannot open the results database {path}: not a DuckDB file")
    except ReadError as exc:
        raise StoreError(f"cannot open the results database {path}: {exc}") from None
    except OSError as exc:
        raise StoreError(f"cannot open the results database {path}: {exc.strerror or exc}") from None
    duckdb = _duckdb()
    deadline = time.monotonic() + wait
    pause = 0.01
    while True:
        try:  # never fetch or load DuckDB extensions (a SQLite or Postgres file would ask for one)
            return attach(path, lambda: duckdb.connect(":memory:", config=_CONFIG))
        except duckdb.Error as exc:
            text = str(exc)
            if not _LOCKED.search(text):  # (DuckDB asks for an extension to read a SQLite or other foreign file;
                # a damaged file's "checksum ... in block at location" is no lock, and waiting would not mend it)
                why = "not a DuckDB file" if "extension" in text.lower() else text.splitlines()[0]
                raise StoreError(f"cannot open the results database {path}: {why}") from None
            if time.monotonic() >= deadline:
                raise StoreError(f"the results database {path} has been in use by another process for {wait:g} s; "
                                 "try again when it is done") from None
            time.sleep(pause)
            pause = min(pause * 1.5, 0.25)


class Store(JudgmentTables, BatchTable, ShardTables):
    """A session with one DuckDB results file (keep it short: other processes wait meanwhile)."""

    def __init__(self, path: Path, wait: float = DEFAULT_WAIT, recover: bool = True,
                 memory_limit: str | None = None, vacuum: bool = True) -> None:
        self.path = Path(path)
        if os.sep == "/" and "\\" in str(self.path):  # DuckDB reads it as a folder separator: the file it wrote
            raise StoreError(f"cannot use {self.path} as a results database: DuckDB reads a backslash in a path as "
                             "a folder separator; name the file without one")  # was not the one checked
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = _Connection(_connect(self.path, wait), self)
        self.wait, self.memory_limit, self.vacuum = wait, memory_limit, vacuum
        try:
            self._configure(memory_limit)
            self._migrate()
            self.recovered = self._recover_journals() if recover else 0
        except BaseException:
            self.con.close()
            raise

    def _configure(self, memory_limit: str | None) -> None:
        """The session's memory limit (DuckDB's default is 80% of RAM; it spills to disk past a limit); what
        DuckDB's allocator frees given back in the background (else a run kept what its sessions freed: 412-433
        MB at 100,000 cases against 373-389 MB); for a run's sessions (``vacuum=False``), checkpoints that do not
        merge the row groups each session appended, which rewrote the tables' last row groups at every
        checkpoint (BENCHMARKS.md, scale; a later default session merges them once), and one DuckDB thread (a
        second held its own buffers: 355-358 against 392-394 MB at 100,000 cases, the same CPU). The settings are
        the process's DuckDB engine's: what a session does not set is reset to DuckDB's default."""
        self.con.execute("SET allocator_background_threads = true")
        if memory_limit is not None:
            self.con.limit(memory_limit)
        else:
            self.con.execute("RESET memory_limit")
        if not self.vacuum:
            self.con.execute("SET max_vacuum_tasks = 0")
            self.con.execute("SET threads = 1")
        else:
            self.con.execute("RESET max_vacuum_tasks")
            self.con.execute("RESET threads")

    @classmethod
    def open_existing(cls, path: Path, wait: float = DEFAULT_WAIT) -> "Store":
        """The results database at ``path``, which must exist already (analysis never creates one)."""
        if not path.exists():
            raise RefError(problems=[Problem(f"no results database at {path}",
                                             hint="run or import judgments first: geval-spec run REF")])
        return cls(path, wait)

    def close(self) -> None:
        """End the session: checkpoint the file (within the session's memory limit, raised as a statement needs:
        :class:`~geval_spec.store.sql.Connection`), then let it go."""
        try:
            self.con.execute("CHECKPOINT")
        except Exception:  # (another session of this process is writing: the last to end checkpoints)
            pass
        finally:
            self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- bulk helpers ------------------------------------------------------------------
    _TYPES: dict[str, list[str]] = {}  # table -> column types (the schema is the same for every file)

    def _types(self, table: str) -> list[str]:
        if table not in Store._TYPES:
            Store._TYPES[table] = [row[2] for row in self.con.execute(f"PRAGMA table_info('{table}')").fetchall()]
        return Store._TYPES[table]

    def insert(self, cursor: Any, table: str, rows: Iterable[tuple[Any, ...]], ignore: bool = False,
               lists: bool = False, last: str | None = None) -> None:
        """Insert many rows, INSERT_CHUNK to a statement, as NumPy columns that DuckDB scans (:func:`.sql.columns`).

        List parameters (``unnest(?::VARCHAR[])``) cost DuckDB twice as much for response bodies, executemany 20x;
        in chunks, as 100,000 cases in one statement took 160 MB on the way in (BENCHMARKS.md, scale); ``rows``
        may be a generator, whose rows are then made a chunk at a time. ``lists``: as list parameters all the
        same, which need no NumPy (a run's creation, before its first request). ``last``: SQL for the table's
        last column in place of the rows' (which is then ignored), over the rows' columns ``r.c0``, ``r.c1``, ...
        (:data:`.sql.KEY_OF_CASE`)."""
        types = self._types(table)
        verb = "INSERT OR IGNORE INTO" if ignore else "INSERT INTO"
        it = iter(rows)
        while chunk := list(islice(it, INSERT_CHUNK)):
            if lists and last is None:
                cursor.execute(f"{verb} {table} SELECT {', '.join(f'unnest(?::{t}[])' for t in types)}",
                               [list(column) for column in zip(*chunk)])
                continue
            scanned = _columns(chunk, types)
            cursor.register(_ROWS, scanned)
            select = _select(scanned, types, last)
            cursor.execute(f"{verb} {table} SELECT {select} FROM {_ROWS} r")  # a failure aborts the transaction,
            cursor.unregister(_ROWS)  # which then refuses even this; its cursor is closed with it

    def insert_new(self, work: Callable[[Any, bool], None]) -> None:
        """Run ``work(cursor, ignore)`` in a transaction: with plain INSERTs first, and again with INSERT OR IGNORE
        only when a key refuses a row (the first transaction is rolled back).

        A plain INSERT costs DuckDB about 40% less than INSERT OR IGNORE for a batch of response bodies
        (BENCHMARKS.md, scale), and duplicates are rare (a journal replayed, two runs sharing a request).
        """
        try:
            self.transaction(lambda c: work(c, False))
        except _duckdb().ConstraintException:  # a row already stored, or twice in the batch
            self.transaction(lambda c: work(c, True))

    def transaction(self, work: Callable[[Any], None]) -> None:
        """Run ``work(cursor)`` in a transaction.

        A session opened with a memory limit can need more than it: DuckDB holds the key indexes a statement
        touches in memory, and they grow with the store (BENCHMARKS.md: a store of 470,000 answers). Such a
        transaction is not written; the file is connected to again with twice the limit (for the rest of the
        session) and the transaction done again, until it fits: the run goes on, and takes the memory only when
        the store needs it.
        """
        self._with_memory(lambda: self._transaction(work))

    def _with_memory(self, work: Callable[[], None]) -> None:
        """Run ``work`` (one transaction), connected again with twice the memory limit each time it runs out."""
        while True:
            try:
                work()
                return
            except Exception as exc:
                if self.memory_limit is None or not out_of_memory(exc):
                    raise
                larger = more_memory(self.memory_limit, exc)
            with suppress(Exception):  # (a commit that ran out of memory invalidates DuckDB's instance of the file,
                self.con.close()       # nothing of it written): connect again, with the larger limit
            self.con = _Connection(_connect(self.path, self.wait), self)
            self._configure(larger)

    def _transaction(self, work: Callable[[Any], None]) -> None:
        c = self.con.cursor()
        try:
            c.execute("BEGIN")
            work(c)
            c.execute("COMMIT")
        except BaseException:
            try:
                c.execute("ROLLBACK")
            except Exception:
                pass
            raise
        finally:
            c.close()

    # -- schema and recovery -----------------------------------------------------------
    def _migrate(self) -> None:
        c = self.con
        duckdb = _duckdb()
        try:
            row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except duckdb.IOException as exc:  # a file cut short or damaged: not "another program's database"
            raise StoreError(f"cannot read the results database {self.path}: {str(exc).splitlines()[0]} (the file "
                             "is damaged or cut short)") from None
        except duckdb.Error:  # no table meta (a new file), or one of another shape (another program's)
            row = None
        if row is None and (foreign := not_ours(c)) is not None:
            raise StoreError(f"{self.path} is a DuckDB database but not a geval-spec results database: {foreign}; "
                             "give --db a new file or a store geval-spec made")
        found = int(row[0]) if row is not None else None
        if found is not None and found > SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by a newer geval-spec (schema {found}, "
                             f"this one knows {SCHEMA_VERSION}); upgrade geval-spec")
        if found != SCHEMA_VERSION:  # (one transaction: rolled back whole when it runs out of memory)
            self._with_memory(lambda: create_or_migrate(self.con, found))
        elif not views_current(c):
            replace_views(c)

    @property
    def journal_dir(self) -> Path:
        return journal_dir(self.path)

    def journal(self, run_id: str) -> Journal:
        return Journal(self.journal_dir / f"{run_id}.jsonl")

    def _recover_journals(self) -> int:
        """Replay the journals of runs whose process is gone; mark those runs interrupted."""
        recovered, gone = replay_journals(self.journal_dir, self.write_planned, self.write_responses)
        running = [r[0] for r in self.con.execute("SELECT run_id FROM runs WHERE status = 'running' AND kind = 'run'")
                   .fetchall()]
        dead = [run_id for run_id in running
                if run_id in gone or not (self.journal_dir / f"{run_id}.jsonl").exists()]
        if dead:
            self.con.execute(f"UPDATE runs SET status = 'interrupted' WHERE run_id {_IN}", [dead])
        return recovered

    # -- runs ----------------------------------------------------------------------
    def create_run(self, info: RunInfo, cases: Sequence[Case],
                   splits: Mapping[str, str | None] | None = None, case_keys: Mapping[str, str] | None = None) -> None:
        def work(c: Any) -> None:
            c.execute(f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}, pid) VALUES ({', '.join('?' * 23)})", [
                info.run_id, info.kind, info.spec_name, info.spec_version, info.spec_ref, info.spec_file,
                info.judging_fp, info.analysis_fp, info.resolved.dumps(),
                _dumps([j.to_json() for j in info.judges]), info.method, info.data_path, info.data_sha256,
                info.tool_version, info.git_commit, _dumps(info.settings.to_json()), info.source_file,
                info.source_sha256, info.started_at or now(), info.ended_at, info.status, info.error, os.getpid()])
            c.execute("DELETE FROM meta WHERE key = ?", [f"gate:{info.run_id}"])  # a gate of an earlier run of the id
            self.insert(c, "run_cases", (  # a generator: 100,000 cases' rows made at once were 15-20 MB more
                (info.run_id, case.id, case.row - 1, case.group, case.system, case.category, _dumps(list(case.human)),
                 (splits or {}).get(case.id), (case_keys or {}).get(case.id))
                for case in cases), lists=len(cases) <= LIST_ROWS and "numpy" not in sys.modules)

        self.transaction(work)

    def write_planned(self, chunks: Sequence[Planned]) -> None:
        """Store planned requests (:class:`~geval_spec.store.records.Planned`) in one transaction; a request or a
        run's request already stored is kept as it is."""
        if not chunks:
            return
        planned = Planned.merged(chunks)

        def work(c: Any, ignore: bool) -> None:
            self.insert(c, "requests", planned.requests, ignore=ignore)
            self.insert(c, "run_requests", planned.links, ignore=ignore)

        self.insert_new(work)

    def finished(self, run_id: str) -> bool:
        """The run exists, completed, with a judgment for every case and none left unanswered by a transport
        failure (nothing to redo). (Runs made before a fix could lack the judgment of a case whose prompt repeated
        an earlier chunk's: such a run is redone, reusing what it has.)"""
        run = self.get_run(run_id)
        if run is None or run.status != "completed":
            return False
        row = self.con.execute(
            f"SELECT (SELECT count(*) FROM judgments WHERE run_id = $1 AND {TRANSPORT_FAILED}), "
            "(SELECT count(*) FROM run_cases c WHERE c.run_id = $1 AND NOT EXISTS "
            " (SELECT 1 FROM judgments j WHERE j.run_id = $1 AND j.case_id = c.case_id))", [run_id]).fetchone()
        return not row[0] and not row[1]

    def set_aside(self, run_id: str) -> str | None:
        """Rename an earlier record of this run (stopped midway, or with failed requests) out of the way.

        Returns the name it now has (its judgments can then be reused), or None when there was none.
        """
        if self.get_run(run_id) is None:
            return None
        aside = f"{run_id}_earlier"
        self.delete_run(aside)

        def work(c: Any) -> None:
            for table in ("runs", "run_cases", "run_requests", "judgments", "verdicts", "findings"):
                c.execute(f"UPDATE {table} SET run_id = ? WHERE run_id = ?", [aside, run_id])
            c.execute("DELETE FROM meta WHERE key = ?", [f"gate:{run_id}"])  # (the run is judged again)

        self.transaction(work)
        return aside

    def delete_run(self, run_id: str) -> None:
        """Drop a run's own rows (answers are shared by hash and kept), and its saved gate."""
        def work(c: Any) -> None:
            for table in ("runs", "run_cases", "run_requests", "judgments", "verdicts", "findings"):
                c.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
            c.execute("DELETE FROM meta WHERE key = ?", [f"gate:{run_id}"])

        self.transaction(work)

    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        self.con.execute("UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE run_id = ?",
                         [status, now(), error, run_id])

    def _run_from_row(self, row: tuple[Any, ...]) -> RunInfo:
        d = dict(zip(_RUN_COLUMNS, row))
        kind: RunKind = "import" if d["kind"] == "import" else "run"
        status: RunStatus = d["status"] if d["status"] in ("running", "completed", "failed", "interrupted") \
            else "failed"
        return RunInfo(run_id=d["run_id"], kind=kind, spec_name=d["spec_name"], spec_version=d["spec_version"],
                       spec_ref=d["spec_ref"], spec_file=d["spec_file"], judging_fp=d["judging_fp"],
                       analysis_fp=d["analysis_fp"], resolved=ResolvedSpec.from_json(_loads(d["spec_json"])),
                       judges=tuple(RunJudge.from_json(j) for j in _loads(d["judges_json"]) or ()),
                       method=d["method"], data_path=d["data_path"], data_sha256=d["data_sha256"],
                       tool_version=d["tool_version"], git_commit=d["git_commit"],
                       settings=RunSettings.from_json(_loads(d["options_json"])), source_file=d["source_file"],
                       source_sha256=d["source_sha256"], started_at=d["started_at"], ended_at=d["ended_at"],
                       status=status, error=d["error"])

    def get_run(self, run_id: str) -> RunInfo | None:
        row = self.con.execute(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return None if row is None else self._run_from_row(row)

    def find_runs(self, spec_name: str | None = None, judging_fp: str | None = None, status: str | None = None,
                  kind: str | None = None) -> list[RunInfo]:
        where, args = [], []
        for col, value in (("spec_name", spec_name), ("judging_fp", judging_fp), ("status", status),
                           ("kind", kind)):
            if value is not None:
                where.append(f"{col} = ?")
                args.append(value)
        sql = f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC, run_id DESC"
        return [self._run_from_row(r) for r in self.con.execute(sql, args).fetchall()]

    def run_case_ids(self, run_id: str) -> list[str]:
        rows = self.con.execute("SELECT case_id FROM run_cases WHERE run_id = ? ORDER BY position", [run_id])
        return [r[0] for r in rows.fetchall()]

    # -- requests and responses --------------------------------------------------------
    def answered(self, hashes: Iterable[str]) -> set[str]:
        """Hashes that already have an answer (never sent again)."""
        wanted = list(hashes)
        if not wanted:
            return set()
        rows = self.con.execute(f"SELECT request_hash FROM answers WHERE request_hash {_IN}", [wanted]).fetchall()
        return {r[0] for r in rows}

    def ok_responses(self, hashes: Iterable[str]) -> dict[str, Recorded]:
        """Request hash -> its stored answer."""
        wanted = list(hashes)
        if not wanted:
            return {}
        rows = self.con.execute("SELECT request_hash, body_json, prompt_tokens, completion_tokens, cost, latency_ms, "
                                f"cached_tokens, reasoning_tokens FROM answers WHERE request_hash {_IN}",
                                [wanted]).fetchall()
        return {h: Recorded(request_hash=h, response=json.loads(body), prompt_tokens=pt, completion_tokens=ct,
                            cost=cost, latency_ms=lat, cached_tokens=cached, reasoning_tokens=reasoning)
                for h, body, pt, ct, cost, lat, cached, reasoning in rows}

    def last_errors(self, hashes: Iterable[str]) -> dict[str, str]:
        wanted = list(hashes)
        if not wanted:
            return {}
        rows = self.con.execute(f"SELECT request_hash, error FROM failures WHERE request_hash {_IN} "
                                "ORDER BY received_at", [wanted]).fetchall()
        return {h: e for h, e in rows}

    def write_responses(self, records: Sequence[ResponseRecord]) -> int:
        """Insert answers and failures in one transaction; the answers' key keeps a second answer out."""
        if not records:
            return 0
        answers = [(r.request_hash, r.run_id, r.attempt, r.body, r.prompt_tokens, r.completion_tokens,
                    r.cached_tokens, r.reasoning_tokens, r.cost, r.latency_ms, r.received_at, r.batch)
                   for r in records if r.ok]
        failures = [(r.request_hash, r.run_id, r.attempt, r.status, r.kind, r.error, r.received_at)
                    for r in records if not r.ok]

        def work(c: Any, ignore: bool = True) -> None:
            self.insert(c, "answers", answers, ignore=ignore)
            self.insert(c, "failures", failures, ignore=ignore)

        self.insert_new(work)
        return len(records)

    def has_answers(self, models: Sequence[str]) -> bool:
        """Whether any request to these models has an answer (if not, no request of a run can be cached)."""
        row = self.con.execute("SELECT EXISTS (SELECT 1 FROM answers a JOIN requests q ON q.request_hash = "
                               f"a.request_hash WHERE q.model {_IN})", [list(models)]).fetchone()
        return bool(row[0])

    def usage(self, run_id: str) -> Usage:
        received, pt, ct, cost, priced, cached, reasoning = self.con.execute(
            "SELECT count(*), sum(prompt_tokens), sum(completion_tokens), sum(cost), count(cost), "
            "sum(cached_tokens), sum(reasoning_tokens) FROM answers WHERE run_id = ?", [run_id]).fetchone()
        failed = self.con.execute("SELECT count(*) FROM failures WHERE run_id = ?", [run_id]).fetchone()[0]
        by_model = self.con.execute(
            "SELECT q.model, sum(a.cached_tokens) FROM answers a JOIN requests q USING (request_hash) "
            "WHERE a.run_id = ? AND a.cached_tokens > 0 GROUP BY q.model ORDER BY q.model", [run_id]).fetchall()
        return Usage(received=received, failed_attempts=failed, prompt_tokens=pt or 0, completion_tokens=ct or 0,
                     cost=(cost or 0.0) if priced == received else None, cached_tokens=cached or 0,
                     reasoning_tokens=reasoning or 0, cached_by_model=tuple((m, int(n)) for m, n in by_model))

    def export_responses(self, run_id: str) -> list[Recorded]:
        """Every answered request of a run, with the body that was sent, in the run's order."""
        rows = self.con.execute(
            "SELECT rr.request_hash, q.body_json, min(rr.position) AS pos FROM run_requests rr "
            "JOIN requests q ON q.request_hash = rr.request_hash WHERE rr.run_id = ? "
            "GROUP BY rr.request_hash, q.body_json ORDER BY pos, rr.request_hash", [run_id]).fetchall()
        answers = self.ok_responses([r[0] for r in rows])
        return [replace(answers[h], request=json.loads(body)) for h, body, _ in rows if h in answers]

    def typical_output_tokens(self, judging_fp: str, runs: int = 5) -> float | None:
        """Mean completion tokens per choice in the newest runs of this judging fingerprint."""
        ids = [r.run_id for r in self.find_runs(judging_fp=judging_fp, kind="run")[:runs]]
        if not ids:
            return None
        row = self.con.execute(
            "SELECT avg(a.completion_tokens / greatest(q.n, 1)) FROM answers a JOIN requests q "
            f"ON q.request_hash = a.request_hash WHERE a.run_id {_IN}", [ids]).fetchone()
        return None if row is None or row[0] is None or math.isnan(row[0]) else float(row[0])
