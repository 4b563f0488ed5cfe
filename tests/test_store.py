"""The store: journal recovery, schema versions, a locked database."""

from __future__ import annotations

import subprocess
import sys

import pytest

from geval_spec.errors import StoreError
from geval_spec.store.db import ResponseWriter, Store
from geval_spec.store.records import ResponseRecord


def record(h: str, ok: bool = True, attempt: int = 0) -> ResponseRecord:
    return ResponseRecord(request_hash=h, run_id="run_x", attempt=attempt, ok=ok, status=200 if ok else 500,
                          kind=None if ok else "server", error=None if ok else "boom",
                          body={"choices": [{"message": {"content": h}}]} if ok else None, prompt_tokens=3,
                          completion_tokens=2, cost=0.001, latency_ms=5.0)


def test_journal_is_replayed_when_the_store_opens(tmp_path):
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        journal = store.journal("run_x")
        for h in ("a", "b", "c"):
            journal.write(record(h))
    # the process "died" here: the journal file is still there, the responses are not in the DB
    (db.with_name(db.name + ".journal") / "run_x.jsonl").open("a").write('{"request_hash": "cut sh')
    with Store(db) as store:
        assert store.recovered == 3
        assert store.answered(["a", "b", "c", "d"]) == {"a", "b", "c"}
        assert not list(store.journal_dir.glob("*.jsonl"))


def test_a_second_success_for_a_hash_is_not_stored(tmp_path):
    with Store(tmp_path / "r.duckdb") as store:
        assert store.write_responses([record("a"), record("a", attempt=1), record("b", ok=False)]) == 2
        assert store.write_responses([record("a", attempt=2)]) == 0
        assert store.last_errors(["b"]) == {"b": "boom"}


def test_writer_thread_commits_everything(tmp_path):
    with Store(tmp_path / "r.duckdb") as store:
        writer = ResponseWriter(store)
        for i in range(300):
            writer.put(record(f"h{i}"))
        writer.close()
        assert len(store.answered([f"h{i}" for i in range(300)])) == 300


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
        with pytest.raises(StoreError, match="in use by another geval-spec process"):
            Store(db)
    finally:
        holder.kill()
        holder.wait()
