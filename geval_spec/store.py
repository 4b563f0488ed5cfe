"""The only module that talks to DuckDB: data files in, every result out.

The results database (``.geval/results.duckdb`` by default) holds runs, their
cases, every request (by hash), every response (raw body, logprobs, usage,
cost, latency, error), judgments and TCVA verdicts. Its schema is versioned
in ``meta``.

Nothing paid for is lost on a crash: each response is appended to a journal
file (``<db>.journal/<run>.jsonl``, one ``write`` per response, so it survives
a killed process) the moment it arrives, and a writer thread commits
responses to DuckDB in small transactions. Opening the store replays any
journal left by a killed run, then removes it.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from .errors import DataError, StoreError

SCHEMA_VERSION = 1

DDL = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
  run_id VARCHAR PRIMARY KEY, kind VARCHAR, spec_name VARCHAR, spec_version INTEGER, spec_ref VARCHAR,
  spec_file VARCHAR, judging_fp VARCHAR, analysis_fp VARCHAR, spec_json VARCHAR, judges_json VARCHAR,
  method VARCHAR, data_path VARCHAR, data_sha256 VARCHAR, tool_version VARCHAR, git_commit VARCHAR,
  options_json VARCHAR, source_file VARCHAR, source_sha256 VARCHAR, started_at VARCHAR, ended_at VARCHAR,
  status VARCHAR, error VARCHAR, pid INTEGER);
CREATE TABLE IF NOT EXISTS run_cases (
  run_id VARCHAR, case_id VARCHAR, position INTEGER, group_id VARCHAR, system_id VARCHAR, category VARCHAR,
  human_json VARCHAR, PRIMARY KEY (run_id, case_id));
CREATE TABLE IF NOT EXISTS requests (
  request_hash VARCHAR PRIMARY KEY, model VARCHAR, body_json VARCHAR, sample INTEGER, n INTEGER,
  created_at VARCHAR);
CREATE TABLE IF NOT EXISTS run_requests (
  run_id VARCHAR, request_hash VARCHAR, case_id VARCHAR, judge VARCHAR, purpose VARCHAR, sample INTEGER,
  position INTEGER, PRIMARY KEY (run_id, request_hash, judge, purpose));
CREATE TABLE IF NOT EXISTS responses (
  request_hash VARCHAR, run_id VARCHAR, attempt INTEGER, ok BOOLEAN, status INTEGER, kind VARCHAR,
  error VARCHAR, body_json VARCHAR, prompt_tokens INTEGER, completion_tokens INTEGER, cost DOUBLE,
  latency_ms DOUBLE, received_at VARCHAR, PRIMARY KEY (request_hash, run_id, attempt));
CREATE TABLE IF NOT EXISTS judgments (
  run_id VARCHAR, case_id VARCHAR, judge VARCHAR, method VARCHAR, score DOUBLE, valid BOOLEAN,
  reason VARCHAR, distribution_json VARCHAR, valid_mass DOUBLE, samples_json VARCHAR, spread DOUBLE,
  details_json VARCHAR, PRIMARY KEY (run_id, case_id, judge));
CREATE TABLE IF NOT EXISTS verdicts (
  run_id VARCHAR, case_id VARCHAR, judge VARCHAR, idx INTEGER, statement VARCHAR, verdict VARCHAR,
  reason VARCHAR, support VARCHAR, PRIMARY KEY (run_id, case_id, judge, idx));
CREATE TABLE IF NOT EXISTS findings (
  run_id VARCHAR, case_id VARCHAR, idx INTEGER, kind VARCHAR, message VARCHAR, start_pos INTEGER,
  end_pos INTEGER, text VARCHAR, PRIMARY KEY (run_id, case_id, idx));
"""


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
            rel = con.execute("SELECT * FROM read_csv(?, header = true, auto_detect = true)", [p])
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


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_run_id() -> str:
    return "run_" + datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S") + secrets.token_hex(3)


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    kind: str  # "run" | "import"
    spec_name: str
    spec_version: int
    spec_ref: str
    spec_file: str
    judging_fp: str
    analysis_fp: str
    spec_json: dict
    judges: list
    method: str
    data_path: str
    data_sha256: str
    tool_version: str
    git_commit: str | None
    options: dict
    source_file: str | None = None
    source_sha256: str | None = None
    started_at: str = ""
    ended_at: str | None = None
    status: str = "running"
    error: str | None = None


_RUN_COLUMNS = ("run_id", "kind", "spec_name", "spec_version", "spec_ref", "spec_file", "judging_fp", "analysis_fp",
                "spec_json", "judges_json", "method", "data_path", "data_sha256", "tool_version", "git_commit",
                "options_json", "source_file", "source_sha256", "started_at", "ended_at", "status", "error")


@dataclass(frozen=True)
class ResponseRecord:
    request_hash: str
    run_id: str
    attempt: int
    ok: bool
    status: int | None
    kind: str | None
    error: str | None
    body: dict | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency_ms: float | None
    received_at: str = field(default_factory=now)

    def row(self) -> tuple:
        return (self.request_hash, self.run_id, self.attempt, self.ok, self.status, self.kind, self.error,
                _dumps(self.body), self.prompt_tokens, self.completion_tokens, self.cost, self.latency_ms,
                self.received_at)

    def to_json(self) -> str:
        return json.dumps({"request_hash": self.request_hash, "run_id": self.run_id, "attempt": self.attempt,
                           "ok": self.ok, "status": self.status, "kind": self.kind, "error": self.error,
                           "body": self.body, "prompt_tokens": self.prompt_tokens,
                           "completion_tokens": self.completion_tokens, "cost": self.cost,
                           "latency_ms": self.latency_ms, "received_at": self.received_at},
                          ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> "ResponseRecord":
        d = json.loads(line)
        return cls(**d)


class Journal:
    """Append-only file of received responses; survives a killed process."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def write(self, record: ResponseRecord) -> None:
        os.write(self._fd, (record.to_json() + "\n").encode("utf-8"))

    def discard(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        duckdb = _duckdb()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(str(self.path))
        except duckdb.Error as exc:
            text = str(exc)
            if "lock" in text.lower():
                raise StoreError(f"the results database {self.path} is in use by another geval-spec process; "
                                 "wait for it to finish") from None
            raise StoreError(f"cannot open the results database {self.path}: {text.splitlines()[0]}") from None
        self._migrate()
        self.recovered = self._recover_journals()

    # -- bulk helpers ------------------------------------------------------------------
    def _types(self, table: str) -> list[str]:
        cache = self.__dict__.setdefault("_type_cache", {})
        if table not in cache:
            cache[table] = [row[2] for row in self.con.execute(f"PRAGMA table_info('{table}')").fetchall()]
        return cache[table]

    def insert(self, cursor, table: str, rows: Sequence[tuple], ignore: bool = False) -> None:
        """Insert many rows in one statement (columns passed as typed lists; executemany is 20x slower)."""
        if not rows:
            return
        types = self._types(table)
        columns = [list(col) for col in zip(*rows)]
        select = ", ".join(f"unnest(?::{t}[])" for t in types)
        verb = "INSERT OR IGNORE INTO" if ignore else "INSERT INTO"
        cursor.execute(f"{verb} {table} SELECT {select}", columns)

    # -- schema --------------------------------------------------------------------
    def _migrate(self) -> None:
        c = self.con
        c.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by a newer geval-spec (schema {row[0]}, "
                             f"this one knows {SCHEMA_VERSION}); upgrade geval-spec")
        c.execute("BEGIN")
        for stmt in DDL.split(";"):
            if stmt.strip():
                c.execute(stmt)
        if row is None:
            c.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        c.execute("COMMIT")

    @property
    def journal_dir(self) -> Path:
        return self.path.with_name(self.path.name + ".journal")

    def journal(self, run_id: str) -> Journal:
        return Journal(self.journal_dir / f"{run_id}.jsonl")

    def _recover_journals(self) -> int:
        recovered = 0
        if self.journal_dir.is_dir():
            recovered = self._replay_journals()
        self.con.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'running' AND pid <> ?",
                         [os.getpid()])
        return recovered

    def _replay_journals(self) -> int:
        recovered = 0
        for path in sorted(self.journal_dir.glob("*.jsonl")):
            records = []
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    records.append(ResponseRecord.from_json(line))
                except (ValueError, TypeError):
                    continue  # a line cut short by the kill
            recovered += self.write_responses(records)
            path.unlink()
        return recovered

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- runs ----------------------------------------------------------------------
    def create_run(self, info: RunInfo, cases: Sequence[Any], requests: Sequence[Any]) -> None:
        c = self.con.cursor()
        c.execute("BEGIN")
        c.execute(f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}, pid) VALUES ({', '.join('?' * 23)})", [
            info.run_id, info.kind, info.spec_name, info.spec_version, info.spec_ref, info.spec_file, info.judging_fp,
            info.analysis_fp, _dumps(info.spec_json), _dumps(info.judges), info.method, info.data_path,
            info.data_sha256, info.tool_version, info.git_commit, _dumps(info.options), info.source_file,
            info.source_sha256, info.started_at or now(), info.ended_at, info.status, info.error, os.getpid()])
        self.insert(c, "run_cases", [
            (info.run_id, case.id, i, case.group, case.system, case.category, _dumps(list(case.human)))
            for i, case in enumerate(cases)])
        self._insert_requests(c, info.run_id, requests, 0)
        c.execute("COMMIT")
        c.close()

    def _insert_requests(self, c, run_id: str, requests: Sequence[Any], start: int) -> None:
        stamp = now()
        seen: dict[str, Any] = {}
        for r in requests:
            seen.setdefault(r.hash, r)
        self.insert(c, "requests", [(r.hash, r.body["model"], _dumps(r.body), r.sample, r.n, stamp)
                                    for r in seen.values()], ignore=True)
        keyed: dict[tuple, tuple] = {}
        for i, r in enumerate(requests):
            keyed.setdefault((r.hash, r.judge, r.purpose), (run_id, r.hash, r.case_id, r.judge, r.purpose, r.sample,
                                                            start + i))
        self.insert(c, "run_requests", list(keyed.values()), ignore=True)

    def add_requests(self, run_id: str, requests: Sequence[Any], start: int = 0) -> None:
        if not requests:
            return
        c = self.con.cursor()
        c.execute("BEGIN")
        self._insert_requests(c, run_id, requests, start)
        c.execute("COMMIT")
        c.close()

    def delete_run(self, run_id: str) -> None:
        """Drop a run's own rows (responses are shared by hash and kept)."""
        c = self.con.cursor()
        c.execute("BEGIN")
        for table in ("runs", "run_cases", "run_requests", "judgments", "verdicts", "findings"):
            c.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        c.execute("COMMIT")
        c.close()

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        self.con.execute("UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE run_id = ?",
                         [status, now(), error, run_id])

    def _run_from_row(self, row: tuple) -> RunInfo:
        d = dict(zip(_RUN_COLUMNS, row))
        return RunInfo(run_id=d["run_id"], kind=d["kind"], spec_name=d["spec_name"], spec_version=d["spec_version"],
                       spec_ref=d["spec_ref"], spec_file=d["spec_file"], judging_fp=d["judging_fp"],
                       analysis_fp=d["analysis_fp"], spec_json=_loads(d["spec_json"]), judges=_loads(d["judges_json"]),
                       method=d["method"], data_path=d["data_path"], data_sha256=d["data_sha256"],
                       tool_version=d["tool_version"], git_commit=d["git_commit"],
                       options=_loads(d["options_json"]) or {}, source_file=d["source_file"],
                       source_sha256=d["source_sha256"], started_at=d["started_at"], ended_at=d["ended_at"],
                       status=d["status"], error=d["error"])

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
        """Hashes that already have a successful response (never sent again)."""
        hashes = list(hashes)
        if not hashes:
            return set()
        rows = self.con.execute("SELECT DISTINCT request_hash FROM responses WHERE ok AND request_hash IN "
                                "(SELECT unnest(?::VARCHAR[]))", [hashes]).fetchall()
        return {r[0] for r in rows}

    def ok_responses(self, hashes: Iterable[str]) -> dict[str, dict]:
        """request hash -> the stored successful response row (newest first wins)."""
        hashes = list(hashes)
        if not hashes:
            return {}
        rows = self.con.execute("SELECT request_hash, body_json, prompt_tokens, completion_tokens, cost, latency_ms "
                                "FROM responses WHERE ok AND request_hash IN (SELECT unnest(?::VARCHAR[])) "
                                "ORDER BY received_at", [hashes]).fetchall()
        out = {}
        for h, body, pt, ct, cost, lat in rows:
            out.setdefault(h, {"body": json.loads(body), "prompt_tokens": pt, "completion_tokens": ct,
                               "cost": cost, "latency_ms": lat})
        return out

    def last_errors(self, hashes: Iterable[str]) -> dict[str, str]:
        hashes = list(hashes)
        if not hashes:
            return {}
        rows = self.con.execute("SELECT request_hash, error FROM responses WHERE NOT ok AND request_hash IN "
                                "(SELECT unnest(?::VARCHAR[])) ORDER BY received_at", [hashes]).fetchall()
        return {h: e for h, e in rows}

    def write_responses(self, records: Sequence[ResponseRecord], cursor=None) -> int:
        """Insert responses in one transaction; a second success for a hash is kept out."""
        if not records:
            return 0
        c = cursor or self.con.cursor()
        c.execute("BEGIN")
        written = 0
        ok_hashes = [r.request_hash for r in records if r.ok]
        have: set[str] = set()
        if ok_hashes:
            have = {r[0] for r in c.execute("SELECT DISTINCT request_hash FROM responses WHERE ok AND request_hash IN "
                                            "(SELECT unnest(?::VARCHAR[]))", [ok_hashes]).fetchall()}
        rows = []
        for r in records:
            if r.ok:
                if r.request_hash in have:
                    continue
                have.add(r.request_hash)
            rows.append(r.row())
        if rows:
            self.insert(c, "responses", rows, ignore=True)
            written = len(rows)
        c.execute("COMMIT")
        if cursor is None:
            c.close()
        return written

    def usage(self, run_id: str) -> dict[str, Any]:
        row = self.con.execute(
            "SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok), sum(prompt_tokens), "
            "sum(completion_tokens), sum(cost), count(cost) FILTER (WHERE ok) FROM responses WHERE run_id = ?",
            [run_id]).fetchone()
        return {"received": row[0], "failed_attempts": row[1], "prompt_tokens": row[2] or 0,
                "completion_tokens": row[3] or 0, "cost": row[4], "priced": row[5]}

    def export_responses(self, run_id: str) -> list[tuple[str, dict, dict]]:
        """(hash, request body, response row) of every answered request of a run."""
        rows = self.con.execute(
            "SELECT rr.request_hash, q.body_json, min(rr.position) AS pos FROM run_requests rr "
            "JOIN requests q ON q.request_hash = rr.request_hash WHERE rr.run_id = ? "
            "GROUP BY rr.request_hash, q.body_json ORDER BY pos", [run_id]).fetchall()
        answers = self.ok_responses([r[0] for r in rows])
        return [(h, json.loads(body), answers[h]) for h, body, _ in rows if h in answers]

    # -- judgments ---------------------------------------------------------------------
    def save_judgments(self, run_id: str, judgments: Sequence[Any]) -> None:
        c = self.con.cursor()
        c.execute("BEGIN")
        c.execute("DELETE FROM judgments WHERE run_id = ?", [run_id])
        c.execute("DELETE FROM verdicts WHERE run_id = ?", [run_id])
        rows, vrows = [], []
        for j in judgments:
            dist = None if j.distribution is None else {str(k): v for k, v in j.distribution.items()}
            details = dict(j.details)
            if j.verdicts is not None:
                details["statements"] = len(j.verdicts)  # parsed verdicts, possibly none
            rows.append((run_id, j.case_id, j.judge, j.method, j.score, j.valid, j.reason, _dumps(dist), j.valid_mass,
                         _dumps(None if j.samples is None else list(j.samples)), j.spread,
                         _dumps(details) if details else None))
            for i, v in enumerate(j.verdicts or ()):
                vrows.append((run_id, j.case_id, j.judge, i, v.statement, v.verdict, v.reason, v.support))
        self.insert(c, "judgments", rows)
        self.insert(c, "verdicts", vrows)
        c.execute("COMMIT")
        c.close()

    def judgments(self, run_id: str) -> list[Any]:
        from .scoring import Judgment, Verdict

        vmap: dict[tuple[str, str], list[Verdict]] = {}
        for case_id, judge, statement, verdict, reason, support in self.con.execute(
                "SELECT case_id, judge, statement, verdict, reason, support FROM verdicts WHERE run_id = ? "
                "ORDER BY case_id, judge, idx", [run_id]).fetchall():
            vmap.setdefault((case_id, judge), []).append(Verdict(statement, verdict, reason or "", support or ""))
        out = []
        for row in self.con.execute(
                "SELECT j.case_id, j.judge, j.method, j.score, j.valid, j.reason, j.distribution_json, j.valid_mass, "
                "j.samples_json, j.spread, j.details_json FROM judgments j LEFT JOIN run_cases c "
                "ON c.run_id = j.run_id AND c.case_id = j.case_id WHERE j.run_id = ? ORDER BY c.position, j.judge",
                [run_id]).fetchall():
            case_id, judge, method, score, valid, reason, dist, mass, samples, spread, details = row
            dist_v = _loads(dist)
            out.append(Judgment(
                case_id=case_id, judge=judge, method=method, score=score, valid=bool(valid), reason=reason,
                distribution=None if dist_v is None else {int(k): v for k, v in dist_v.items()}, valid_mass=mass,
                samples=None if samples is None else tuple(_loads(samples)), spread=spread,
                verdicts=tuple(vmap.get((case_id, judge), ())) if "statements" in (_loads(details) or {}) else None,
                details=_loads(details) or {}))
        return out

    def save_findings(self, run_id: str, findings: dict[str, list[Any]]) -> None:
        rows = [(run_id, case_id, i, f.kind, f.message, f.start, f.end, f.text)
                for case_id, items in findings.items() for i, f in enumerate(items)]
        if not rows:
            return
        c = self.con.cursor()
        c.execute("BEGIN")
        c.execute("DELETE FROM findings WHERE run_id = ?", [run_id])
        self.insert(c, "findings", rows)
        c.execute("COMMIT")
        c.close()

    def findings(self, run_id: str) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for case_id, kind, message, start, end, text in self.con.execute(
                "SELECT case_id, kind, message, start_pos, end_pos, text FROM findings WHERE run_id = ? "
                "ORDER BY case_id, idx", [run_id]).fetchall():
            out.setdefault(case_id, []).append({"kind": kind, "message": message, "start": start, "end": end,
                                                "text": text})
        return out

    def request_count(self, run_id: str) -> int:
        return self.con.execute("SELECT count(*) FROM run_requests WHERE run_id = ?", [run_id]).fetchone()[0]


class ResponseWriter:
    """Commits responses from a queue in a background thread (group commit).

    Under load, everything waiting in the queue goes into one transaction;
    when idle, each response is committed as it arrives.
    """

    def __init__(self, store: Store, max_batch: int = 500):
        self.store = store
        self.max_batch = max_batch
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._cursor = store.con.cursor()
        self._thread = threading.Thread(target=self._loop, name="geval-writer", daemon=True)
        self._thread.start()

    def put(self, record: ResponseRecord) -> None:
        if self._error is not None:
            raise StoreError(f"cannot store responses: {self._error}")
        self._queue.put(record)

    def _loop(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            batch = []
            if item is None:
                stop = True
            else:
                batch.append(item)
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            if batch:
                try:
                    self.store.write_responses(batch, cursor=self._cursor)
                except BaseException as exc:  # surfaced to the run on the next put/close
                    self._error = exc
                    try:
                        self._cursor.execute("ROLLBACK")
                    except Exception:
                        pass

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
            self._cursor.close()
        if self._error is not None:
            raise StoreError(f"cannot store responses: {self._error}")

