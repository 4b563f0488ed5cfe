"""The results database: the only module that imports DuckDB.

The store (``.geval/results.duckdb`` by default) holds runs, their cases,
every request (by hash), every response (raw body, logprobs, usage, cost,
latency, error), judgments, TCVA verdicts and language findings. Its schema
is versioned in ``meta``.

Nothing paid for is lost on a crash: each response goes to the run's
:class:`~geval_spec.store.journal.Journal` the moment it arrives, and a
writer thread (:class:`ResponseWriter`) commits responses to DuckDB in small
transactions. Opening the store replays any journal left by a killed run,
then removes it.
"""

from __future__ import annotations

import json
import math
import os
import queue
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from geval_spec.dataset.cases import Case
from geval_spec.errors import Problem, RefError, StoreError
from geval_spec.judge.types import Details, Judgment, Recorded, Request, Verdict
from geval_spec.plugins import Finding
from geval_spec.spec.load import ResolvedSpec
from geval_spec.store.journal import Journal, read_journal
from geval_spec.store.records import ResponseRecord, RunInfo, RunJudge, RunKind, RunSettings, RunStatus, Usage, now

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


def _duckdb() -> Any:
    import duckdb

    return duckdb


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


_RUN_COLUMNS = ("run_id", "kind", "spec_name", "spec_version", "spec_ref", "spec_file", "judging_fp", "analysis_fp",
                "spec_json", "judges_json", "method", "data_path", "data_sha256", "tool_version", "git_commit",
                "options_json", "source_file", "source_sha256", "started_at", "ended_at", "status", "error")
_IN = "IN (SELECT unnest(?::VARCHAR[]))"


class Store:
    """One DuckDB results file, opened for reading and writing by this process."""

    def __init__(self, path: Path) -> None:
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
        self._type_cache: dict[str, list[str]] = {}
        self._migrate()
        self.recovered = self._recover_journals()

    # -- bulk helpers ------------------------------------------------------------------
    def _types(self, table: str) -> list[str]:
        if table not in self._type_cache:
            self._type_cache[table] = [row[2] for row in
                                       self.con.execute(f"PRAGMA table_info('{table}')").fetchall()]
        return self._type_cache[table]

    def insert(self, cursor: Any, table: str, rows: Sequence[tuple[Any, ...]], ignore: bool = False) -> None:
        """Insert many rows in one statement (columns passed as typed lists; executemany is 20x slower)."""
        if not rows:
            return
        types = self._types(table)
        columns = [list(col) for col in zip(*rows)]
        select = ", ".join(f"unnest(?::{t}[])" for t in types)
        verb = "INSERT OR IGNORE INTO" if ignore else "INSERT INTO"
        cursor.execute(f"{verb} {table} SELECT {select}", columns)

    def _transaction(self, work: Any) -> None:
        c = self.con.cursor()
        try:
            c.execute("BEGIN")
            work(c)
            c.execute("COMMIT")
        finally:
            c.close()

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
            for path in sorted(self.journal_dir.glob("*.jsonl")):
                recovered += self.write_responses(read_journal(path))
                path.unlink()
        self.con.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'running' AND pid <> ?",
                         [os.getpid()])
        return recovered

    @classmethod
    def open_existing(cls, path: Path) -> "Store":
        """The results database at ``path``, which must exist already (analysis never creates one)."""
        if not path.exists():
            raise RefError(problems=[Problem(f"no results database at {path}",
                                             hint="run or import judgments first: geval-spec run REF")])
        return cls(path)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ----------------------------------------------------------------------
    def create_run(self, info: RunInfo, cases: Sequence[Case], requests: Sequence[Request]) -> None:
        def work(c: Any) -> None:
            c.execute(f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}, pid) VALUES ({', '.join('?' * 23)})", [
                info.run_id, info.kind, info.spec_name, info.spec_version, info.spec_ref, info.spec_file,
                info.judging_fp, info.analysis_fp, info.resolved.dumps(),
                _dumps([j.to_json() for j in info.judges]), info.method, info.data_path, info.data_sha256,
                info.tool_version, info.git_commit, _dumps(info.settings.to_json()), info.source_file,
                info.source_sha256, info.started_at or now(), info.ended_at, info.status, info.error, os.getpid()])
            self.insert(c, "run_cases", [
                (info.run_id, case.id, i, case.group, case.system, case.category, _dumps(list(case.human)))
                for i, case in enumerate(cases)])
            self._insert_requests(c, info.run_id, requests, 0)

        self._transaction(work)

    def _insert_requests(self, c: Any, run_id: str, requests: Sequence[Request], start: int) -> None:
        stamp = now()
        seen: dict[str, Request] = {}
        for r in requests:
            seen.setdefault(r.hash, r)
        self.insert(c, "requests", [(r.hash, r.model, _dumps(r.body), r.sample, r.n, stamp)
                                    for r in seen.values()], ignore=True)
        keyed: dict[tuple[str, str, str], tuple[Any, ...]] = {}
        for i, r in enumerate(requests):
            keyed.setdefault((r.hash, r.judge, r.purpose), (run_id, r.hash, r.case_id, r.judge, r.purpose,
                                                            r.sample, start + i))
        self.insert(c, "run_requests", list(keyed.values()), ignore=True)

    def add_requests(self, run_id: str, requests: Sequence[Request], start: int = 0) -> None:
        if requests:
            self._transaction(lambda c: self._insert_requests(c, run_id, requests, start))

    def delete_run(self, run_id: str) -> None:
        """Drop a run's own rows (responses are shared by hash and kept)."""
        def work(c: Any) -> None:
            for table in ("runs", "run_cases", "run_requests", "judgments", "verdicts", "findings"):
                c.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])

        self._transaction(work)

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
        """Hashes that already have a successful response (never sent again)."""
        wanted = list(hashes)
        if not wanted:
            return set()
        rows = self.con.execute(f"SELECT DISTINCT request_hash FROM responses WHERE ok AND request_hash {_IN}",
                                [wanted]).fetchall()
        return {r[0] for r in rows}

    def ok_responses(self, hashes: Iterable[str]) -> dict[str, Recorded]:
        """Request hash -> its stored successful response (the first received wins)."""
        wanted = list(hashes)
        if not wanted:
            return {}
        rows = self.con.execute("SELECT request_hash, body_json, prompt_tokens, completion_tokens, cost, latency_ms "
                                f"FROM responses WHERE ok AND request_hash {_IN} ORDER BY received_at",
                                [wanted]).fetchall()
        out: dict[str, Recorded] = {}
        for h, body, pt, ct, cost, lat in rows:
            if h not in out:
                out[h] = Recorded(request_hash=h, response=json.loads(body), prompt_tokens=pt,
                                  completion_tokens=ct, cost=cost, latency_ms=lat)
        return out

    def last_errors(self, hashes: Iterable[str]) -> dict[str, str]:
        wanted = list(hashes)
        if not wanted:
            return {}
        rows = self.con.execute(f"SELECT request_hash, error FROM responses WHERE NOT ok AND request_hash {_IN} "
                                "ORDER BY received_at", [wanted]).fetchall()
        return {h: e for h, e in rows}

    def write_responses(self, records: Sequence[ResponseRecord], cursor: Any = None) -> int:
        """Insert responses in one transaction; a second success for a hash is kept out."""
        if not records:
            return 0
        c = cursor or self.con.cursor()
        c.execute("BEGIN")
        ok_hashes = [r.request_hash for r in records if r.ok]
        have: set[str] = set()
        if ok_hashes:
            have = {r[0] for r in c.execute(f"SELECT DISTINCT request_hash FROM responses WHERE ok AND "
                                            f"request_hash {_IN}", [ok_hashes]).fetchall()}
        rows = []
        for r in records:
            if r.ok:
                if r.request_hash in have:
                    continue
                have.add(r.request_hash)
            rows.append((r.request_hash, r.run_id, r.attempt, r.ok, r.status, r.kind, r.error, _dumps(r.body),
                         r.prompt_tokens, r.completion_tokens, r.cost, r.latency_ms, r.received_at))
        self.insert(c, "responses", rows, ignore=True)
        c.execute("COMMIT")
        if cursor is None:
            c.close()
        return len(rows)

    def usage(self, run_id: str) -> Usage:
        row = self.con.execute(
            "SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok), sum(prompt_tokens), "
            "sum(completion_tokens), sum(cost), count(cost) FILTER (WHERE ok) FROM responses WHERE run_id = ?",
            [run_id]).fetchone()
        received, failed, pt, ct, cost, priced = row
        return Usage(received=received, failed_attempts=failed, prompt_tokens=pt or 0, completion_tokens=ct or 0,
                     cost=(cost or 0.0) if priced == received else None)

    def export_responses(self, run_id: str) -> list[Recorded]:
        """Every answered request of a run, with the body that was sent, in the run's order."""
        rows = self.con.execute(
            "SELECT rr.request_hash, q.body_json, min(rr.position) AS pos FROM run_requests rr "
            "JOIN requests q ON q.request_hash = rr.request_hash WHERE rr.run_id = ? "
            "GROUP BY rr.request_hash, q.body_json ORDER BY pos", [run_id]).fetchall()
        answers = self.ok_responses([r[0] for r in rows])
        out = []
        for h, body, _ in rows:
            if h in answers:
                a = answers[h]
                out.append(Recorded(request_hash=h, response=a.response, prompt_tokens=a.prompt_tokens,
                                    completion_tokens=a.completion_tokens, cost=a.cost, latency_ms=a.latency_ms,
                                    request=json.loads(body)))
        return out

    def typical_output_tokens(self, judging_fp: str, runs: int = 5) -> float | None:
        """Mean completion tokens per choice in the newest runs of this judging fingerprint."""
        ids = [r.run_id for r in self.find_runs(judging_fp=judging_fp, kind="run")[:runs]]
        if not ids:
            return None
        row = self.con.execute(
            "SELECT avg(r.completion_tokens / greatest(q.n, 1)) FROM responses r JOIN requests q "
            f"ON q.request_hash = r.request_hash WHERE r.ok AND r.run_id {_IN}", [ids]).fetchone()
        return None if row is None or row[0] is None or math.isnan(row[0]) else float(row[0])

    # -- judgments ---------------------------------------------------------------------
    def save_judgments(self, run_id: str, judgments: Sequence[Judgment]) -> None:
        rows, vrows = [], []
        for j in judgments:
            dist = None if j.distribution is None else {str(k): v for k, v in j.distribution.items()}
            details = j.details if j.verdicts is None else replace(j.details, statements=len(j.verdicts))
            rows.append((run_id, j.case_id, j.judge, j.method, j.score, j.valid, j.reason, _dumps(dist), j.valid_mass,
                         _dumps(None if j.samples is None else list(j.samples)), j.spread,
                         _dumps(details.to_json())))
            for i, v in enumerate(j.verdicts or ()):
                vrows.append((run_id, j.case_id, j.judge, i, v.statement, v.verdict, v.reason, v.support))

        def work(c: Any) -> None:
            c.execute("DELETE FROM judgments WHERE run_id = ?", [run_id])
            c.execute("DELETE FROM verdicts WHERE run_id = ?", [run_id])
            self.insert(c, "judgments", rows)
            self.insert(c, "verdicts", vrows)

        self._transaction(work)

    def judgments(self, run_id: str) -> list[Judgment]:
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
            case_id, judge, method, score, valid, reason, dist, mass, samples, spread, details_json = row
            dist_v = _loads(dist)
            details = Details.from_json(_loads(details_json))
            out.append(Judgment(
                case_id=case_id, judge=judge, method=method, score=score, valid=bool(valid), reason=reason,
                distribution=None if dist_v is None else {int(k): v for k, v in dist_v.items()}, valid_mass=mass,
                samples=None if samples is None else tuple(_loads(samples)), spread=spread,
                verdicts=tuple(vmap.get((case_id, judge), ())) if details.statements is not None else None,
                details=details))
        return out

    def save_findings(self, run_id: str, findings: dict[str, tuple[Finding, ...]]) -> None:
        rows = [(run_id, case_id, i, f.kind, f.message, f.start, f.end, f.text)
                for case_id, items in findings.items() for i, f in enumerate(items)]
        if not rows:
            return

        def work(c: Any) -> None:
            c.execute("DELETE FROM findings WHERE run_id = ?", [run_id])
            self.insert(c, "findings", rows)

        self._transaction(work)

    def findings(self, run_id: str) -> dict[str, tuple[Finding, ...]]:
        out: dict[str, list[Finding]] = {}
        for case_id, kind, message, start, end, text in self.con.execute(
                "SELECT case_id, kind, message, start_pos, end_pos, text FROM findings WHERE run_id = ? "
                "ORDER BY case_id, idx", [run_id]).fetchall():
            out.setdefault(case_id, []).append(Finding(kind, message, start, end, text))
        return {k: tuple(v) for k, v in out.items()}


class ResponseWriter:
    """Commits responses from a queue in a background thread (group commit).

    Under load, everything waiting in the queue goes into one transaction;
    when idle, each response is committed as it arrives.
    """

    def __init__(self, store: Store, max_batch: int = 500) -> None:
        self.store = store
        self.max_batch = max_batch
        self._queue: queue.Queue[ResponseRecord | None] = queue.Queue()
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
            batch: list[ResponseRecord] = []
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
