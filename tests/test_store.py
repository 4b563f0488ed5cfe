"""The store: journal recovery, schema versions, a locked database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cli

from geval_spec.errors import StoreError
from geval_spec.store.db import Store
from geval_spec.store.gate import StoreGate
from geval_spec.store.records import ResponseRecord
from geval_spec.store.schema import SCHEMA_VERSION


def record(h: str, ok: bool = True, attempt: int = 0) -> ResponseRecord:
    return ResponseRecord(request_hash=h, run_id="run_x", attempt=attempt, ok=ok, status=200 if ok else 500,
                          kind=None if ok else "server", error=None if ok else "boom",
                          body='{"choices": [{"message": {"content": "%s"}}]}' % h if ok else None, prompt_tokens=3,
                          completion_tokens=2, cost=0.001, latency_ms=5.0)


def test_journal_is_replayed_when_the_store_opens(tmp_path):
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        journal = store.journal("run_x")
        for h in ("a", "b", "c"):
            journal.write(record(h))
    with Store(db) as store:  # the run is alive (it holds its journal): its journal is left alone
        assert store.recovered == 0 and store.answered(["a"]) == set()
    journal.close()  # the process "died" here: the journal file is still there, the responses are not in the DB
    (db.with_name(db.name + ".journal") / "run_x.jsonl").open("a").write('{"request_hash": "cut sh')
    with Store(db) as store:
        assert store.recovered == 3
        assert store.answered(["a", "b", "c", "d"]) == {"a", "b", "c"}
        assert not list(store.journal_dir.glob("*.jsonl"))


def planned_request(h: str, case_id: str, body: str = '{"messages":[],"model":"m"}'):
    """A planned request whose body_text is canonical JSON, as make_request makes it."""
    from geval_spec.judge.types import Request

    return Request(hash=h, case_id=case_id, judge="j", sample=0, n=1, purpose="judge", body={"model": "m"},
                   body_text=body)


def test_planned_requests_in_the_journal_reach_the_store_with_their_answers(tmp_path):
    """A run journals each chunk's requests before sending them and stores them in its next session: killed
    before that session, its journal gives the store the requests and the run's links to them, with the answers.
    A chunk cut short by the kill is left out, and rows stored already are kept as they are."""
    from geval_spec.store.records import Planned

    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.write_planned([Planned.of("run_x", [planned_request("a", "c1", '{"model":"m","stored":"first"}')],
                                        0)])
        journal = store.journal("run_x")
        journal.write_planned(Planned.of("run_x", [planned_request("a", "c1"), planned_request("b", "c2"),
                                                   planned_request("b", "c3")], 0))
        journal.write(record("a"))
        journal.write_planned(Planned.of("run_x", [planned_request("c", "c4", '{"model":"m","text":"\\n"}')],
                                         3))
        journal.write(record("c"))
    journal.close()
    folder = db.with_name(db.name + ".journal")
    with (folder / "run_x.planned").open("a") as fh:
        fh.write('{"requests": [["d", "m", "{}", 0, 1, "t"]], "li')  # cut short by the kill
    # the responses' file holds responses only: releases before planned files read every line of it as one
    lines = (folder / "run_x.jsonl").read_bytes().split(b"\n")
    assert [line[:16] for line in lines[::2] if line] == [b'{"request_hash":'] * 2  # a header, its body, ...
    with Store(db) as store:
        assert store.recovered == 2
        assert store.answered(["a", "b", "c"]) == {"a", "c"}
        assert store.con.execute("SELECT request_hash, body_json FROM requests ORDER BY 1").fetchall() == [
            ("a", '{"model":"m","stored":"first"}'), ("b", '{"messages":[],"model":"m"}'),
            ("c", '{"model":"m","text":"\\n"}')]
        assert store.con.execute("SELECT request_hash, case_id, position FROM run_requests ORDER BY 1").fetchall() \
            == [("a", "c1", 0), ("b", "c2", 1), ("c", "c4", 3)]
        assert not list(store.journal_dir.iterdir())


def test_a_planned_file_left_without_its_journal_is_replayed(tmp_path):
    """A release before planned files replays and removes the journal but leaves ``<run>.planned``: the next
    store to open stores its requests and removes it. A live run's planned file (its journal there) stays."""
    from geval_spec.store.records import Planned

    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        old = store.journal("run_old")
        old.write_planned(Planned.of("run_old", [planned_request("a", "c1")], 0))
        old.close()
        (store.journal_dir / "run_old.jsonl").unlink()
        live = store.journal("run_live")
        live.write_planned(Planned.of("run_live", [planned_request("b", "c1")], 0))
    with Store(db) as store:
        assert store.con.execute("SELECT request_hash FROM requests").fetchall() == [("a",)]
        assert sorted(p.name for p in store.journal_dir.iterdir()) == ["run_live.jsonl", "run_live.planned"]
    live.discard()
    assert not list(store.journal_dir.iterdir())


def test_a_journal_is_replayed_a_batch_at_a_time(tmp_path, monkeypatch):
    """A long run's journal is hundreds of MB: replay writes it in batches (memory stays bounded), all of it."""
    from geval_spec.store import journal as journalmod
    from geval_spec.store.records import Planned

    monkeypatch.setattr(journalmod, "REPLAY_BATCH", 2)
    monkeypatch.setattr(journalmod, "REPLAY_CHUNKS", 2)
    folder = tmp_path / "j"
    journal = journalmod.Journal(folder / "run_x.jsonl")
    for i in range(5):
        journal.write_planned(Planned.of("run_x", [planned_request(f"h{i}", f"c{i}")], i))
        journal.write(record(f"h{i}"))
    journal.close()
    planned_sizes, response_sizes = [], []
    recovered, gone = journalmod.replay_journals(
        folder, lambda chunks: planned_sizes.append(len(chunks)),
        lambda batch: response_sizes.append(len(batch)) or len(batch))
    assert (recovered, gone, planned_sizes, response_sizes) == (5, {"run_x"}, [2, 2, 1], [2, 2, 1])
    assert not list(folder.iterdir())


def test_a_journal_of_responses_alone_still_replays(tmp_path):
    """Journals written before planned requests were journaled hold responses only."""
    from geval_spec.store.journal import iter_planned, iter_responses, planned_path

    path = tmp_path / "old.jsonl"
    body = '{"choices": []}'
    path.write_text('{"request_hash": "a", "run_id": "run_x", "attempt": 0, "ok": true, "status": 200, '
                    '"kind": null, "error": null, "prompt_tokens": 1, "completion_tokens": 1, "cost": null, '
                    f'"latency_ms": 1.0, "received_at": "t", "body_bytes": {len(body)}}}\n{body}\n')
    planned, responses = list(iter_planned(planned_path(path))), list(iter_responses(path))
    assert planned == [] and [(r.request_hash, r.body) for r in responses] == [("a", body)]


def test_a_second_success_for_a_hash_is_not_stored(tmp_path):
    with Store(tmp_path / "r.duckdb") as store:
        store.write_responses([record("a"), record("a", attempt=1), record("b", ok=False)])
        store.write_responses([record("a", attempt=2)])
        assert store.con.execute("SELECT count(*), min(attempt) FROM answers WHERE request_hash = 'a'").fetchone() \
            == (1, 0)
        assert store.last_errors(["b"]) == {"b": "boom"}


def test_rows_go_in_chunks_and_all_arrive(tmp_path, monkeypatch):
    """Large inserts are cut into INSERT_CHUNK rows a statement (bounded memory); no row is lost at the seams,
    and a duplicate across two chunks is still refused once."""
    from geval_spec.store import db as dbmod

    monkeypatch.setattr(dbmod, "INSERT_CHUNK", 3)
    with Store(tmp_path / "r.duckdb") as store:
        store.write_responses([record(f"h{i}") for i in range(10)] + [record("h1", attempt=1)])
        rows = store.con.execute("SELECT request_hash, attempt FROM answers ORDER BY request_hash").fetchall()
        assert rows == sorted((f"h{i}", 0) for i in range(10))


@pytest.mark.parametrize("chunk", [2, 10_000])
def test_rows_arrive_exactly_with_their_nulls_and_types(tmp_path, monkeypatch, chunk):
    """Each column goes in as a NumPy array: numbers typed with a mask for NULL, text as objects. Whatever the
    mix of NULLs, integers, fractions and text in a chunk, every value comes back as it went in."""
    from geval_spec.store import db as dbmod

    monkeypatch.setattr(dbmod, "INSERT_CHUNK", chunk)
    rows = [(f"h{i}", "run", i % 3, None if i % 4 == 0 else f"body é {i}\x00", None if i % 2 else i * 1000,
             None if i % 5 == 0 else 7, None, 2**31 - 1 if i == 1 else None, None if i == 2 else (1 if i % 3 else 0.25),
             [None, 1.5, 12.0][i % 3], "2026-12-02T00:00:00Z", None if i == 3 else bool(i % 2))
            for i in range(7)]
    with Store(tmp_path / "r.duckdb") as store:
        store.transaction(lambda c: store.insert(c, "answers", rows))
        assert store.con.execute("SELECT * FROM answers ORDER BY request_hash").fetchall() == \
            [tuple(float(v) if i in (8, 9) and v is not None else v for i, v in enumerate(r)) for r in rows]
        assert store.con.execute("SELECT max(reasoning_tokens) FROM answers").fetchone() == (2**31 - 1,)


def test_gate_thread_commits_everything_in_short_sessions(tmp_path):
    db = tmp_path / "r.duckdb"
    Store(db).close()
    gate = StoreGate(db, interval=0.05)
    for i in range(300):
        gate.add_response(record(f"h{i}"))
    gate.flush()
    with Store(db, wait=5) as store:  # another connection gets in between the gate's sessions
        assert len(store.answered([f"h{i}" for i in range(300)])) == 300
    gate.close()


def test_after_a_failed_session_the_gate_writes_nothing_more(tmp_path, monkeypatch):
    """A session that fails loses its planned requests and their findings (the journal keeps the requests); a later
    session must not store judgments, which would then lack their case's findings (a rerun reuses them as they
    are). The run gets the error at its next call."""
    from geval_spec.judge.types import Judgment
    from geval_spec.store import gate as gatemod
    from geval_spec.store.records import Planned

    db = tmp_path / "r.duckdb"
    Store(db).close()
    real = gatemod.Store.write_planned
    calls = []

    def failing(self, chunks):
        calls.append(len(chunks))
        if len(calls) == 1:
            raise OSError("disk full")
        real(self, chunks)

    monkeypatch.setattr(gatemod.Store, "write_planned", failing)
    gate = StoreGate(db, interval=0.01)
    gate.add_planned("run_x", Planned.of("run_x", [planned_request("a", "c1")], 0), {})
    gate.nudge()
    deadline = time.monotonic() + 10
    while gate._error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    gate._judgments["run_x"] = ([Judgment.invalid("c1", "j", "logprobs", "x")], {})  # queued meanwhile
    with gate._cond:
        gate._cond.notify()
    with pytest.raises(StoreError, match="disk full"):
        gate.close()
    with Store(db) as store:
        assert store.con.execute("SELECT count(*) FROM judgments").fetchone() == (0,)
    assert calls == [1]


def test_newer_schema_is_refused(tmp_path):
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer geval-spec"):
        Store(db)


def test_locked_database_is_a_clear_error(tmp_path):
    db = tmp_path / "r.duckdb"
    Store(db).close()
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb,time; c=duckdb.connect({str(db)!r}); "
                               "print('ready', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="in use by another process"):
            Store(db, wait=0.5)
    finally:
        holder.kill()
        holder.wait()


def test_a_damaged_database_is_an_error_at_once_not_a_wait_for_a_lock(tmp_path):
    """DuckDB names a damaged block ("computed checksum ... in block at location ..."): "block" holds "lock", and
    such a file was waited on for --wait seconds (120 by default) and then said to be in use by another process."""
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.con.execute("INSERT INTO meta VALUES ('filler', repeat('x', 100000))")
    raw = bytearray(db.read_bytes())
    raw[12288 + 100] ^= 0xFF  # a byte of the first block after the file's headers
    db.write_bytes(bytes(raw))
    start = time.monotonic()
    with pytest.raises(StoreError) as caught:
        Store(db, wait=30)
    assert time.monotonic() - start < 10
    assert "in use" not in str(caught.value) and "checksum" in str(caught.value).lower()


@pytest.mark.parametrize("meta", ["CREATE TABLE meta (key INTEGER, value INTEGER)",
                                  "CREATE VIEW meta AS SELECT 'x'::INTEGER AS key, 'y' AS value"])
def test_another_programs_meta_table_is_another_programs_database(tmp_path, meta):
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute(meta)
    con.close()
    with pytest.raises(StoreError, match="not a geval-spec results database"):
        Store(db)


def test_a_database_cut_short_is_said_to_be_damaged_not_another_programs(tmp_path):
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.con.execute("INSERT INTO meta VALUES ('filler', repeat('x', 300000))")
    raw = db.read_bytes()
    db.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(StoreError) as caught:
        Store(db)
    assert "damaged or cut short" in str(caught.value) and "not a geval-spec" not in str(caught.value)


V1 = """
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, kind VARCHAR, spec_name VARCHAR, spec_version INTEGER,
  spec_ref VARCHAR, spec_file VARCHAR, judging_fp VARCHAR, analysis_fp VARCHAR, spec_json VARCHAR,
  judges_json VARCHAR, method VARCHAR, data_path VARCHAR, data_sha256 VARCHAR, tool_version VARCHAR,
  git_commit VARCHAR, options_json VARCHAR, source_file VARCHAR, source_sha256 VARCHAR, started_at VARCHAR,
  ended_at VARCHAR, status VARCHAR, error VARCHAR, pid INTEGER);
CREATE TABLE run_cases (run_id VARCHAR, case_id VARCHAR, position INTEGER, group_id VARCHAR, system_id VARCHAR,
  category VARCHAR, human_json VARCHAR, PRIMARY KEY (run_id, case_id));
CREATE TABLE responses (request_hash VARCHAR, run_id VARCHAR, attempt INTEGER, ok BOOLEAN, status INTEGER,
  kind VARCHAR, error VARCHAR, body_json VARCHAR, prompt_tokens INTEGER, completion_tokens INTEGER, cost DOUBLE,
  latency_ms DOUBLE, received_at VARCHAR, PRIMARY KEY (request_hash, run_id, attempt));
INSERT INTO responses VALUES
  ('a', 'run_1', 0, false, 500, 'server', 'boom', NULL, NULL, NULL, NULL, NULL, '2026-01-01T00:00:00Z'),
  ('a', 'run_1', 1, true, 200, NULL, NULL, '{"first": 1}', 3, 2, 0.1, 5.0, '2026-01-01T00:00:01Z'),
  ('a', 'run_2', 0, true, 200, NULL, NULL, '{"second": 1}', 3, 2, 0.1, 5.0, '2026-01-01T00:00:02Z');
"""


def test_a_version_1_store_is_migrated_keeping_the_first_answer(tmp_path):
    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as con:
        for stmt in V1.split(";"):
            if stmt.strip():
                con.execute(stmt)
    with Store(db) as store:
        version = store.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)
        assert store.ok_responses(["a"])["a"].response == {"first": 1}
        assert store.last_errors(["a"]) == {"a": "boom"}
        assert store.con.execute("SELECT count(*) FROM responses").fetchone() == (2,)  # the view: 1 answer, 1 failure
        columns = [row[1] for row in store.con.execute("PRAGMA table_info('run_cases')").fetchall()]
        assert columns[-2:] == ["split", "case_key"]


def test_a_version_2_store_names_its_requests_by_128_bits_and_keeps_their_answers(tmp_path):
    """Schema 3 names a request by the first 32 hex digits of its SHA-256, where version 2 kept all 64 (their key
    indexes are what a run's sessions load): a version 2 store is migrated in place, and a request hashed now finds
    the answer and the failure stored under the whole hash."""
    import hashlib

    from geval_spec.judge.types import HASH_CHARS
    from geval_spec.store.records import Planned
    from geval_spec.store.schema import HASHED

    full, other = hashlib.sha256(b"one").hexdigest(), hashlib.sha256(b"two").hexdigest()
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.write_planned([Planned.of("run_x", [planned_request(full, "c1"), planned_request(other, "c2")], 0)])
        store.write_responses([record(full), record(other, ok=False)])
        store.con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        assert store.con.execute("SELECT count(*) FROM answers WHERE length(request_hash) = 64").fetchone() == (1,)
    with Store(db) as store:
        assert store.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("3",)
        for table in HASHED:
            hashes = {row[0] for row in store.con.execute(f"SELECT request_hash FROM {table}").fetchall()}
            assert hashes <= {full[:HASH_CHARS], other[:HASH_CHARS]} and hashes, table
        assert store.ok_responses([full[:HASH_CHARS]])[full[:HASH_CHARS]].response["choices"][0]["message"] \
            == {"content": full}
        assert store.last_errors([other[:HASH_CHARS]]) == {other[:HASH_CHARS]: "boom"}


def _version_2_store(db, hashes):
    """A store at schema 2 whose requests, answers and run's links name ``hashes`` as given (whole SHA-256s)."""
    from geval_spec.store.records import Planned

    with Store(db) as store:
        store.write_planned([Planned.of("run_x", [planned_request(h, f"c{i}", '{"model": "m", "text": "%s"}' % (
            "x" * 2000)) for i, h in enumerate(hashes)], 0)])
        store.write_responses([record(h) for h in hashes])
        store.con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def test_a_version_2_store_is_migrated_within_a_runs_memory_limit(tmp_path):
    """A run opens its store with a memory limit (128 MB): a migration that needs more is connected again with twice
    the limit, as a session's transaction is (with an UPDATE of the key columns, a store of 100,000 requests could
    not be opened by run at all: exit 70), and the store is migrated whole."""
    import hashlib

    from geval_spec.judge.types import HASH_CHARS

    hashes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3000)]
    db = tmp_path / "r.duckdb"
    _version_2_store(db, hashes)
    with Store(db, memory_limit="4MB") as store:
        assert store.memory_limit != "4MB"  # it ran out, and was given more
        assert store.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("3",)
        for table in ("requests", "answers", "run_requests"):
            assert sorted(r[0] for r in store.con.execute(f"SELECT request_hash FROM {table}").fetchall()) == \
                sorted(h[:HASH_CHARS] for h in hashes), table
        assert len(store.ok_responses([h[:HASH_CHARS] for h in hashes])) == 3000


def test_two_stored_hashes_with_the_same_first_digits_stop_the_migration_with_a_message(tmp_path):
    """Two requests of a version 2 store whose hashes share their first 32 digits (a store edited by hand) would be
    one request in version 3: the store is left as it is, and the message names them (it was an internal error)."""
    base = "ab" * 16
    db = tmp_path / "r.duckdb"
    _version_2_store(db, [base + "0" * 32, base + "1" * 32])
    with pytest.raises(StoreError, match=f"holds requests {base}0+ and {base}1+, whose first 32 digits"):
        Store(db)
    with duckdb.connect(str(db)) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
        assert con.execute("SELECT count(*) FROM answers").fetchone() == (2,)


def test_a_commit_that_runs_out_of_memory_is_not_run_again():
    """Outside a transaction a statement that runs out of memory is run again with more; a COMMIT is the end of
    one, and run again it only said "no transaction is active", hiding why the transaction failed."""
    from geval_spec.store.sql import Connection

    class Raw:
        def __init__(self):
            self.sql = []

        def execute(self, sql, params=None):
            self.sql.append(sql)
            if sql == "COMMIT":
                raise RuntimeError("Out of Memory Error: could not allocate block")
            return self

    class Owner:
        memory_limit = "8MB"

    raw = Raw()
    con = Connection(raw, Owner())
    con.execute("BEGIN")
    with pytest.raises(RuntimeError, match="Out of Memory"):
        con.execute("COMMIT")
    assert raw.sql == ["BEGIN", "COMMIT"]


def test_a_journal_and_planned_file_written_with_whole_hashes_replay_under_the_short_ones(tmp_path):
    """A run killed under a release before schema 3 journalled its requests by their whole SHA-256: the store that
    replays the journal keys them as requests are keyed now, so that the next run finds their answers."""
    import hashlib

    from geval_spec.judge.types import HASH_CHARS
    from geval_spec.store.records import Planned

    full = hashlib.sha256(b"one").hexdigest()
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        journal = store.journal("run_x")
        journal.write_planned(Planned.of("run_x", [planned_request(full, "c1")], 0))
        journal.write(record(full))
    journal.close()
    with Store(db) as store:
        assert store.recovered == 1
        assert store.answered([full[:HASH_CHARS]]) == {full[:HASH_CHARS]}
        assert store.con.execute("SELECT request_hash FROM requests").fetchall() == [(full[:HASH_CHARS],)]
        assert store.con.execute("SELECT request_hash FROM run_requests").fetchall() == [(full[:HASH_CHARS],)]


@pytest.mark.parametrize("name, value, said", [
    ("GEVAL_STORE_MEMORY", "abc", "is not an amount of memory"),
    ("GEVAL_STORE_MEMORY", "-5MB", "is not an amount of memory"),
    ("GEVAL_STORE_MEMORY", "1KB", "is less than the 4MB"),  # (a new store's schema needed 2 MiB: exit 70)
    ("GEVAL_STORE_MEMORY", "3.9MB", "is less than the 4MB"),
    ("GEVAL_STORE_INTERVAL", "x", "is not a number of seconds"),
    ("GEVAL_STORE_INTERVAL", "-1", "is not a number of seconds"),
    ("GEVAL_STORE_INTERVAL", "nan", "is not a number of seconds"),
])
def test_store_settings_from_the_environment_are_checked(monkeypatch, tmp_path, name, value, said):
    """A bad GEVAL_STORE_* value is an input error before anything is sent, not a crash in the writer thread."""
    from geval_spec.errors import InputError
    from geval_spec.store.gate import store_settings

    monkeypatch.setenv(name, value)
    with pytest.raises(InputError, match=said):
        StoreGate(tmp_path / "r.duckdb")
    monkeypatch.delenv(name)
    assert store_settings() == (2.0, "128MB")
    monkeypatch.setenv("GEVAL_STORE_MEMORY", "1GB")
    monkeypatch.setenv("GEVAL_STORE_INTERVAL", "0.5")
    assert store_settings() == (0.5, "1GB")


def test_judgments_added_to_a_run_keep_the_first_of_a_case(tmp_path):
    """Judgments are added with a plain INSERT first; a case judged again (or twice in one batch) keeps its first
    judgment, and the rest of the batch still arrives."""
    from geval_spec.judge.types import Judgment

    def judged(case_id: str, reason: str) -> Judgment:
        return Judgment.invalid(case_id, "j", "logprobs", reason)

    with Store(tmp_path / "r.duckdb") as store:
        store.save_judgments("run_x", [judged("a", "first"), judged("b", "first")], replace_all=False)
        store.save_judgments("run_x", [judged("a", "second"), judged("c", "first"), judged("c", "second")],
                             replace_all=False)
        rows = store.con.execute("SELECT case_id, reason FROM judgments ORDER BY case_id").fetchall()
        assert rows == [("a", "first"), ("b", "first"), ("c", "first")]


def test_judgments_a_run_adds_take_their_case_keys_from_the_runs_cases(tmp_path):
    """A run hands its judgments to the gate without its cases' reuse keys (held for the whole run they were 26 MB
    at 100,000 cases): each judgment takes the key stored with its case by the run's creation, also when a key
    refuses a row of the batch and it is written again with INSERT OR IGNORE, and NULL where the run has no such
    case."""
    from geval_spec.judge.types import Judgment

    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        for run, case, key in (("run_x", "a", "key-a"), ("run_x", "b", "key-b"), ("run_y", "a", "other")):
            store.con.execute("INSERT INTO run_cases (run_id, case_id, position, case_key) VALUES (?, ?, 0, ?)",
                              [run, case, key])
    gate = StoreGate(db, interval=0)
    gate.add_judgments("run_x", [Judgment.invalid(c, "j", "logprobs", "first") for c in ("a", "z")])
    gate.flush()
    gate.add_judgments("run_x", [Judgment.invalid(c, "j", "logprobs", "again") for c in ("a", "b")])
    gate.close()
    with Store(db) as store:
        rows = store.con.execute("SELECT case_id, reason, case_key FROM judgments ORDER BY case_id").fetchall()
    assert rows == [("a", "first", "key-a"), ("b", "again", "key-b"), ("z", "first", None)]


def test_judgments_read_without_distributions_are_otherwise_the_same(tmp_path):
    """Analysis reads judgments without their logprob distributions (no report uses them; parsing them was about
    a third of reading a run's judgments): everything else reads back as stored, also the details it does use."""
    from geval_spec.judge.types import Details, Judgment

    stored = [Judgment(case_id=f"c{i}", judge="j", method="logprobs", score=2.5 + i, valid=True,
                       distribution={2: 0.5, 3: 0.5}, valid_mass=0.9,
                       details=Details(written_score=3, ambiguous_mass=0.01 * i)) for i in range(3)]
    with Store(tmp_path / "r.duckdb") as store:
        store.save_judgments("run_x", stored, replace_all=False)
        assert store.judgments("run_x") == stored
        without = store.judgments("run_x", distributions=False)
    assert [j.distribution for j in without] == [None, None, None]
    assert without == [replace(j, distribution=None) for j in stored]


def test_judgments_read_back_share_their_names_and_hold_no_instance_dict(tmp_path):
    """The gate after a run holds every judgment (100,000 at a time): each is a slotted object, and its judge,
    method and reason are one string each however many judgments name them (DuckDB makes one a row), read a
    few thousand rows at a time (a list of every row and the objects made of them were held at once)."""
    from geval_spec.judge.types import Judgment
    from geval_spec.store import judgments as module

    stored = [Judgment(case_id=f"c{i}", judge="judge", method="logprobs", score=None, valid=False,
                       reason="no score") for i in range(7)]
    module.FETCH_ROWS, saved = 3, module.FETCH_ROWS
    try:
        with Store(tmp_path / "r.duckdb") as store:
            store.save_judgments("run_x", stored, replace_all=False)
            back = store.judgments("run_x", lean=True)
    finally:
        module.FETCH_ROWS = saved
    assert back == stored and not hasattr(back[0], "__dict__")
    for name in ("judge", "method", "reason"):
        assert len({id(getattr(j, name)) for j in back}) == 1, name


def test_a_nudge_starts_a_session_before_the_interval(tmp_path):
    db = tmp_path / "r.duckdb"
    Store(db).close()
    gate = StoreGate(db, interval=600)
    gate.add_response(record("first"))
    gate.flush()  # the first session; the next is 600 s away
    gate.add_response(record("early"))
    gate.nudge()
    deadline = time.monotonic() + 20
    seen: set[str] = set()
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
        with Store(db, wait=5) as store:
            seen = store.answered(["early"])
    gate.close()
    assert seen == {"early"}


def test_the_store_takes_duckdbs_engine_module_alone_and_the_package_where_it_cannot(monkeypatch, tmp_path):
    """DuckDB's extension module without the package's Python layer; the package when the extension is not a
    top-level module (DuckDB 1.x) or lacks what the store uses. Either way a store opens and refuses a duplicate."""
    import importlib.util
    import types

    from geval_spec.store import db as store_db

    assert store_db._duckdb().__name__ == ("_duckdb" if importlib.util.find_spec("_duckdb") else "duckdb")
    monkeypatch.setitem(sys.modules, "_duckdb", None)  # import _duckdb raises ImportError
    assert store_db._duckdb().__name__ == "duckdb"
    monkeypatch.setitem(sys.modules, "_duckdb", types.ModuleType("_duckdb"))  # present, without connect
    package = store_db._duckdb()
    assert package.__name__ == "duckdb"
    with Store(tmp_path / "r.duckdb") as store:
        store.con.execute("CREATE TABLE t (k VARCHAR PRIMARY KEY)")
        store.con.execute("INSERT INTO t VALUES ('a')")
        with pytest.raises(package.ConstraintException):
            store.con.execute("INSERT INTO t VALUES ('a')")


def _big_body(i: int) -> ResponseRecord:
    return ResponseRecord(request_hash=f"{i:064x}", run_id="run_x", attempt=0, ok=True, status=200, kind=None,
                          error=None, body='{"choices": [{"message": {"content": "%s"}}]}' % ("x" * 3000),
                          prompt_tokens=3, completion_tokens=2, cost=0.001, latency_ms=5.0)


def test_a_session_that_needs_more_memory_than_its_limit_gets_it_for_that_session(tmp_path):
    """A large store's key indexes can need more than the session's limit; the transaction is done again with a
    larger limit instead of failing the run (a run's store session on a store of 470,000 answers failed one time in
    three at 128 MB)."""
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.write_responses([_big_body(i) for i in range(3000)])
    with Store(db, memory_limit="4MB") as store:
        store.write_responses([_big_body(i) for i in range(3000, 6000)])
        assert store.memory_limit not in ("4MB", None)  # raised, for this session only
        assert store.con.execute("SELECT count(*) FROM answers").fetchone()[0] == 6000
    with Store(db, memory_limit="4MB") as store:
        assert store.memory_limit == "4MB"
        with pytest.raises(duckdb.ConstraintException):  # other errors still surface
            store.transaction(lambda c: c.execute("INSERT INTO answers (request_hash) VALUES (?)", [f"{1:064x}"]))


@pytest.mark.parametrize("kind", ["file", "link to nothing"])
def test_a_file_where_the_journals_go_is_an_input_error_for_a_run_only(tmp_path, kind):
    """``<db>.journal`` as a file crashed a run with FileExistsError (exit 70). Readers (report, batches) that
    write no journal go on as before."""
    from e2e_helpers import make_project

    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=3)
    (root / ".geval").mkdir()
    journals = root / ".geval" / "results.duckdb.journal"
    if kind == "file":
        journals.write_text("x")
    else:
        journals.symlink_to(tmp_path / "nowhere")
    res = cli("run", "demo", cwd=root)
    assert res.code == 2 and "in the way of the results database's journals" in res.err, res.err
    with Store(root / ".geval" / "results.duckdb") as store:  # a reader opens it
        assert store.find_runs() == []
    assert journals.is_symlink() or journals.read_text() == "x"


def test_a_limit_below_what_duckdb_holds_already_is_raised_until_it_fits(tmp_path):
    """DuckDB refuses a memory limit below what it holds ("could not free up enough memory"): exit 70 for
    GEVAL_STORE_MEMORY=1MB on a store DuckDB had read into more than that. The limit doubles until it fits."""
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.write_responses([_big_body(i) for i in range(300)])
        store.con.execute("SELECT count(*), max(length(body_json)) FROM answers").fetchone()
        held = store.con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0]
        assert held > 1024
        store.con.limit("1KB")
        assert store.memory_limit not in ("1KB", None)
        assert store.con.execute("SELECT count(*) FROM answers").fetchone() == (300,)
    with Store(db, memory_limit="4MB") as store:
        assert store.con.execute("SELECT count(*) FROM answers").fetchone() == (300,)


def test_a_gate_session_that_runs_out_of_memory_is_done_again_with_more(tmp_path, monkeypatch):
    """Reads run out of memory too (an answer lookup on a large store): the gate does the session again with twice
    the limit, and keeps it for the run's later sessions."""
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.write_responses([_big_body(i) for i in range(3000)])
    monkeypatch.setenv("GEVAL_STORE_MEMORY", "4MB")
    gate = StoreGate(db, interval=0)
    try:
        gate.add_response(_big_body(3000))
        found = gate.call(lambda s: s.ok_responses([f"{i:064x}" for i in range(3001)]))
        assert len(found) == 3001
        assert gate.memory_limit not in ("4MB", None)
    finally:
        gate.close()


def test_rows_stored_as_lists_are_the_rows_stored_as_numpy_columns_and_need_no_numpy(tmp_path):
    """A run's creation stores its cases as list parameters while NumPy is not loaded (its import would hold up the
    first request): the same rows as NumPy's columns give, NULLs, numbers and booleans included, without NumPy."""
    rows = [("run_x", f"c{i}", "j", "logprobs", None if i % 3 == 0 else i / 7, i % 2 == 0, None if i % 2 else "r",
             None, None, None, None, "{}", None) for i in range(25)]
    script = f"""
import sys
from pathlib import Path
from geval_spec.store.db import Store
with Store(Path({str(tmp_path / "lists.duckdb")!r})) as store:
    store.transaction(lambda c: store.insert(c, "judgments", {rows!r}, lists=True))
assert "numpy" not in sys.modules, "NumPy was imported"
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with Store(tmp_path / "columns.duckdb") as store:
        store.transaction(lambda c: store.insert(c, "judgments", rows))
    read = []
    for name in ("lists", "columns"):
        con = duckdb.connect(str(tmp_path / f"{name}.duckdb"), read_only=True)
        read.append(con.execute("SELECT * FROM judgments ORDER BY case_id").fetchall())
        con.close()
    assert read[0] == read[1] and len(read[0]) == 25 and read[0][0][4] is None and read[0][1][5] is False


def test_a_runs_sessions_leave_the_row_groups_they_appended_apart(tmp_path):
    """A run's sessions (the gate's) checkpoint without merging the row groups each appended: merging rewrote the
    tables' last row groups at every session, work and memory that grew with the store. After a memory-limit retry
    (a new connection) too; a session with the default merges them. Every session's allocator gives freed memory
    back in the background (a run's RSS at 100,000 cases: 412-433 MB without, 373-389 MB with), and a run's
    sessions use one DuckDB thread (392-394 MB with two, 355-358 MB with one, the same CPU)."""
    def row_groups(db) -> int:
        con = duckdb.connect(str(db), read_only=True)
        try:
            return con.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('answers')").fetchone()[0]
        finally:
            con.close()

    db = tmp_path / "r.duckdb"
    for start in range(0, 8000, 2000):
        with Store(db, recover=False, memory_limit="4MB", vacuum=False) as store:
            store.write_responses([_big_body(i) for i in range(start, start + 2000)])
            assert store.memory_limit != "4MB"  # (the transaction was done again on a new connection)
            assert store.con.execute("SELECT current_setting('max_vacuum_tasks')").fetchone()[0] == 0
            assert store.con.execute("SELECT current_setting('allocator_background_threads')").fetchone()[0] is True
            assert store.con.execute("SELECT current_setting('threads')").fetchone()[0] == 1
    assert row_groups(db) == 4
    with Store(db) as store:
        store.write_responses([_big_body(8000)])
        assert store.con.execute("SELECT current_setting('threads')").fetchone()[0] > 1 or os.cpu_count() == 1
    assert row_groups(db) < 4


def test_more_memory_doubles_a_limit_and_gives_up_past_64_gb():
    from geval_spec.store.sql import more_memory

    boom = RuntimeError("Out of Memory Error")
    assert more_memory("128MB", boom) == "256MB" and more_memory(" 1.5 GiB", boom) == "3GiB"
    with pytest.raises(RuntimeError):
        more_memory("40GB", boom)


def test_a_read_that_runs_out_of_memory_is_run_again_with_more(tmp_path):
    """Reads outside the store thread (the run's own sessions: the dry run's lookups, the reuse of judgments) ran out
    of memory on a large store and ended in exit 70; they now take the doubled limit too."""
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        store.write_responses([_big_body(i) for i in range(3000)])
    with Store(db, memory_limit="4MB") as store:
        hashes = [f"{i:064x}" for i in range(3000)]
        assert len(store.ok_responses(hashes)) == 3000 and len(store.answered(hashes)) == 3000
        assert store.memory_limit not in ("4MB", None)


def test_a_session_attaches_the_file_and_lets_it_go_when_it_ends(tmp_path):
    """A session attaches the file to the process's DuckDB engine (no new database per session) and detaches it at
    its end: another process opens the file at once and reads what the session wrote; the spill folder is the
    file's own, as for a connection to it. Two sessions of one process on one file overlap (the gate's thread and
    the main thread); the file is let go when the last ends."""
    from geval_spec.store import sql

    db = tmp_path / "it's.duckdb"  # (a quote in the path)
    reader = [sys.executable, "-c", f"import duckdb; print(duckdb.connect({str(db)!r}).execute("
              "'SELECT count(*) FROM answers').fetchone()[0])"]
    first = Store(db)
    second = Store(db)
    assert first.con.execute("SELECT current_setting('temp_directory')").fetchone()[0] == f"{db.resolve()}.tmp"
    second.write_responses([_big_body(1)])
    second.close()
    assert first.con.execute("SELECT count(*) FROM answers").fetchone() == (1,)
    held = subprocess.run(reader, capture_output=True, text=True)
    assert held.returncode != 0 and "lock" in held.stderr.lower()
    first.close()
    assert not sql._attached
    assert subprocess.run(reader, capture_output=True, text=True, check=True).stdout.strip() == "1"
    with Store(db) as again:  # attached anew to the same engine
        assert again.con.execute("SELECT count(*) FROM answers").fetchone() == (1,)


def test_an_empty_file_at_the_stores_path_becomes_a_store(tmp_path):
    """DuckDB made a store of an empty file when connecting, and refuses one when attaching: it holds nothing."""
    db = tmp_path / "r.duckdb"
    db.write_bytes(b"")
    with Store(db) as store:
        store.write_responses([_big_body(2)])
    with Store(db) as store:
        assert store.con.execute("SELECT count(*) FROM answers").fetchone() == (1,)


def _journal_of(db, hashes):
    with Store(db) as store:
        journal = store.journal("run_x")
        for h in hashes:
            journal.write(record(h))
    journal.close()  # the process "died": the journal stays
    return db.with_name(db.name + ".journal") / "run_x.jsonl"


def test_a_journal_record_with_a_field_of_another_type_is_skipped_and_the_rest_replayed(tmp_path):
    """A damaged record ("attempt": "abc", "cost": "free") went into the store's insert: exit 70 at every command,
    and the journal's other paid answers never came back."""
    import json as _json

    db = tmp_path / "r.duckdb"
    path = _journal_of(db, ["a", "b", "c", "d"])
    lines = path.read_bytes().split(b"\n")
    headers = [i for i, line in enumerate(lines) if line.startswith(b'{"request_hash"')]
    for i, (key, value) in zip(headers[1:3], (("attempt", "abc"), ("cost", "free"))):
        header = _json.loads(lines[i])
        header[key] = value
        lines[i] = _json.dumps(header).encode()
    path.write_bytes(b"\n".join(lines))
    with Store(db) as store:
        assert store.answered(["a", "b", "c", "d"]) == {"a", "d"} and store.recovered == 2
        assert not path.exists()


def test_a_journal_body_length_past_the_files_end_is_not_read_into_memory(tmp_path):
    import json as _json

    db = tmp_path / "r.duckdb"
    path = _journal_of(db, ["a", "b"])
    lines = path.read_bytes().split(b"\n")
    header = _json.loads(lines[2])
    header["body_bytes"] = 10**17
    lines[2] = _json.dumps(header).encode()
    path.write_bytes(b"\n".join(lines))
    with Store(db) as store:  # (a MemoryError, exit 70, at every command)
        assert store.answered(["a", "b"]) == {"a"}


@pytest.mark.parametrize("damage", ["garbage line", "header not json", "length too short", "length too long",
                                    "length past the end", "header a list", "body bytes a string"])
def test_a_journal_damaged_in_its_middle_replays_the_records_after_the_damage(tmp_path, damage):
    """A record whose framing is damaged mid-file stopped the replay there, and the journal was then removed: the
    answers after it, paid for, were lost. Now only the damaged record is: reading goes on at the next line."""
    import json as _json

    db = tmp_path / "r.duckdb"
    path = _journal_of(db, ["a", "b", "c", "d"])
    lines = path.read_bytes().split(b"\n")
    headers = [i for i, line in enumerate(lines) if line.startswith(b'{"request_hash"')]
    i = headers[1]  # record b
    header = _json.loads(lines[i])
    if damage == "garbage line":
        lines.insert(i, b"\x00\xffgarbage{")
    elif damage == "header not json":
        lines[i] = lines[i][:-5]
    elif damage in ("length too short", "length too long", "length past the end", "body bytes a string"):
        header["body_bytes"] = {"length too short": header["body_bytes"] - 3,
                                "length too long": header["body_bytes"] + 3,
                                "length past the end": 10**12, "body bytes a string": "12"}[damage]
        lines[i] = _json.dumps(header).encode()
    else:
        lines[i] = b"[" + lines[i] + b"]"
    path.write_bytes(b"\n".join(lines))
    with Store(db) as store:
        answered = store.answered(["a", "b", "c", "d"])
        assert answered == ({"a", "b", "c", "d"} if damage == "garbage line" else {"a", "c", "d"}), damage
        assert not path.exists()


def test_a_journals_last_record_cut_short_by_a_kill_ends_the_replay_without_reading_past_it(tmp_path):
    """The usual damage: a kill mid-write, in the last body or the last header. The records before it are
    replayed; the cut record is left out."""
    for n, where in enumerate(("body", "header")):
        db = tmp_path / f"r{n}.duckdb"
        path = _journal_of(db, ["a", "b", "c"])
        data = path.read_bytes()
        path.write_bytes(data[:len(data) - 5] if where == "body" else data[:data.rindex(b'{"request_hash"') + 20])
        with Store(db) as store:
            assert store.answered(["a", "b", "c"]) == {"a", "b"} and store.recovered == 2
            assert not path.exists()


def test_a_damaged_planned_line_mid_file_is_skipped_and_the_chunks_after_it_are_read(tmp_path):
    from geval_spec.store.journal import iter_planned

    path = tmp_path / "x.planned"
    line = '{"requests": [["h%d", "m", "{}", 0, 1, "t"]], "links": [["run_x", "h%d", "c", "j", "judge", 0, 0]]}\n'
    path.write_text(line % (1, 1) + "not json\n" + "[1, 2]\n" + line % (2, 2) + line[:20])
    assert [c.requests[0][0] for c in iter_planned(path)] == ["h1", "h2"]


def test_a_planned_chunk_with_numbers_past_the_stores_columns_is_left_out(tmp_path):
    from geval_spec.store.records import Planned

    with pytest.raises(ValueError):
        Planned.from_json({"requests": [], "links": [["r", "h", "c", "j", "judge", 10**30, 0]]})
    with pytest.raises(ValueError):
        Planned.from_json({"requests": [["h", "m", "{}", 0, 2**40, "t"]], "links": []})
    db = tmp_path / "r.duckdb"
    _journal_of(db, ["a"])
    folder = db.with_name(db.name + ".journal")
    (folder / "run_x.planned").write_text('{"requests": [], "links": [["run_x", "a", "c", "j", "judge", '
                                          + str(2**40) + ', 0]]}\n')
    with Store(db) as store:
        assert store.answered(["a"]) == {"a"}


@pytest.mark.parametrize("kind", ["folder", "fifo", "link"])
def test_entries_of_the_journal_folder_that_are_no_regular_files_are_left_alone(tmp_path, kind):
    """A folder named x.jsonl stopped every command (IsADirectoryError, exit 70); a FIFO or a link to /dev/zero
    hung it."""
    db = tmp_path / "r.duckdb"
    _journal_of(db, ["a"])
    folder = db.with_name(db.name + ".journal")
    for name in ("x.jsonl", "y.planned", "run_x.planned"):
        target = folder / name
        if kind == "folder":
            target.mkdir()
        elif kind == "fifo":
            os.mkfifo(target)
        else:
            target.symlink_to("/dev/zero")
    with Store(db) as store:
        assert store.answered(["a"]) == {"a"}
    assert (folder / "x.jsonl").exists() or (folder / "x.jsonl").is_symlink()


_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
_VALUE = st.recursive(_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.one_of(st.text(max_size=4), st.integers(), st.booleans(),
                                                           st.floats(allow_nan=False), st.none()), inner,
                                                 max_size=3)), max_leaves=10)


@settings(max_examples=400, deadline=None)
@given(_VALUE, st.booleans(), st.booleans())
def test_the_encoder_made_once_writes_what_json_dumps_writes(value, ascii, sort):
    """sql.encoder (the store's JSON and the journal's headers) makes the C encoder once, not per call: the text
    is json.dumps's for any value without a cycle (NaN and infinities, keys of every kind, surrogates), and what
    json.dumps refuses (keys of types that cannot be sorted together) it refuses too."""
    import json

    from geval_spec.store.sql import dumps, encoder

    def both(encode, dump):
        try:
            expected = dump()
        except TypeError:
            with pytest.raises(TypeError):
                encode()
        else:
            assert encode() == expected

    both(lambda: encoder(ensure_ascii=ascii, sort_keys=sort)(value),
         lambda: json.dumps(value, ensure_ascii=ascii, sort_keys=sort))
    both(lambda: dumps(value), lambda: None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True))


_BODY_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
              st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=5),
                                            inner, max_size=3)), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=4), _BODY_VALUE, max_size=4), min_size=1, max_size=4))
def test_a_planned_chunk_reads_back_with_its_bodies_as_they_were(tmp_path_factory, bodies):
    """The planned journal splices each body's canonical JSON into its line as a JSON object (not escaped into a
    string again), under a key older releases do not read: read back, every body is the same text, the line is
    one line, and a line of the earlier form (bodies as strings) still reads."""
    import json

    from geval_spec.spec.fingerprint import canonical
    from geval_spec.store.journal import Journal, iter_planned
    from geval_spec.store.records import Planned

    requests = [planned_request(f"h{i}", f"c{i}", canonical(body)) for i, body in enumerate(bodies)]
    chunk = Planned.of("run_x", requests, 0)
    folder = tmp_path_factory.mktemp("planned")
    journal = Journal(folder / "run_x.jsonl")
    journal.write_planned(chunk)
    journal.close()
    raw = (folder / "run_x.planned").read_bytes()
    assert raw.count(b"\n") == 1
    assert [c.requests for c in iter_planned(folder / "run_x.planned")] == [chunk.requests]
    line = json.loads(raw)
    assert line["requests_json"][0][2] == bodies[0]  # a JSON object, not a string
    assert "requests" not in line  # (a release before these lines reads "requests": it skips this line, rather
    # than store an object body as its Python text)
    # a line as releases before 2026-12-03 wrote it: the requests under "requests", each body a string
    earlier = {"requests": [list(r) for r in chunk.requests], "links": [list(r) for r in chunk.links]}
    (folder / "old.planned").write_text(json.dumps(earlier, ensure_ascii=False) + "\n", encoding="utf-8")
    assert [c.requests for c in iter_planned(folder / "old.planned")] == [chunk.requests]


_SCANNED_TYPES = ("BIGINT", "DOUBLE", "BOOLEAN", "VARCHAR")
_SCAN_CON: list = []


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.none() | st.integers(-2**62, 2**62), st.none() | st.floats(allow_nan=False),
                          st.none() | st.booleans(), st.none() | st.text(max_size=5)), min_size=1, max_size=12))
def test_rows_scanned_as_columns_come_back_as_they_were_with_their_nulls(rows):
    """The store's bulk insert scans rows as NumPy columns (sql.columns) with a mask column where a number or a
    boolean is None, which column_sql makes NULL: every value, and every NULL, comes back as it went in."""
    from geval_spec.store.sql import columns, select

    if not _SCAN_CON:  # (one engine for every example: connecting took most of the test's time)
        _SCAN_CON.append(duckdb.connect(":memory:"))
    con = _SCAN_CON[0]
    con.execute("CREATE OR REPLACE TABLE t (a BIGINT, b DOUBLE, c BOOLEAN, d VARCHAR)")
    scanned = columns(rows, _SCANNED_TYPES)
    con.register("r", scanned)
    con.execute(f"INSERT INTO t SELECT {select(scanned, _SCANNED_TYPES, None)} FROM r r")
    con.unregister("r")
    assert con.execute("SELECT * FROM t ORDER BY rowid").fetchall() == [tuple(row) for row in rows]
    for i in range(len(_SCANNED_TYPES) - 1):
        assert (f"n{i}" in scanned) == any(row[i] is None for row in rows)


_maybe_text = st.none() | st.text(max_size=3)
_maybe_number = st.none() | st.floats(allow_nan=False, width=32)


@settings(max_examples=300, deadline=None)
@given(st.builds(
    lambda *a: a, st.none() | st.integers(1, 5), st.none() | st.tuples(st.text(max_size=3)), _maybe_number,
    st.none() | st.integers(0, 3), st.none() | st.tuples(st.text(max_size=3)), _maybe_number, _maybe_number,
    st.booleans(), _maybe_text, st.none() | st.booleans(), _maybe_text, _maybe_text, _maybe_text,
    st.none() | st.integers(0, 3), st.booleans()))
def test_a_judgments_details_are_stored_as_they_were(values):
    """Details.to_json reads a plain judgment's details from the instance's own dict (the fast path): the same
    JSON object, with its keys in the same order, as reading every field by name, for every kind of details."""
    from geval_spec.judge.types import Details

    details = Details(*values)
    new, before = details.to_json(), details.json_by_field()
    assert new == before and list(new or ()) == list(before or ())
    assert Details.from_json(new) == Details.from_json(before)
    assert details == replace(details) and replace(details).to_json() == new
