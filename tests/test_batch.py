"""run --batch and geval-spec batches, end to end against the local server's Files and Batch APIs.

A batch run must end where an online run ends (same answers, judgments and report), survive Ctrl-C and
SIGKILL while it waits (the batch id is stored first; the next run polls it instead of submitting again),
retry or keep the lines that failed inside a batch, stop with exit 3 on a batch that failed, cost the batch
price, and cut large runs into several batches.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import openai_batches
from conftest import cli, run_cli
from e2e_helpers import make_project
from openai_batches import BatchConfig
from openai_server import FakeOpenAI, ServerConfig
from geval_spec.store.batches import BatchRecord
from geval_spec.store.db import Store

POLL = "0.05"


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setenv("GEVAL_BATCH_POLL", POLL)


def serve(**batch) -> FakeOpenAI:
    return FakeOpenAI(ServerConfig(batch=BatchConfig(**batch))).start()


@pytest.fixture
def srv():
    server = serve(clock="polls", in_progress=2)
    yield server
    server.stop()


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def db_of(root: Path) -> Path:
    return root / ".geval" / "results.duckdb"


def judgments(root: Path, run_id: str) -> dict:
    with Store(db_of(root)) as store:
        return {j.case_id: j for j in store.judgments(run_id)}


def report(root: Path, run_id: str) -> dict:
    res = cli("report", run_id, "--format", "json", "--out", "-", "--exit-zero", cwd=root)
    assert res.code == 0, res.err
    return json.loads(res.out)


def query(root: Path, sql: str) -> list:
    """Read the store while another process may hold it (it lets go between its short sessions)."""
    for _ in range(1000):
        try:
            with duckdb.connect(str(db_of(root)), read_only=True) as con:
                return con.execute(sql).fetchall()
        except duckdb.Error:
            time.sleep(0.01)
    raise AssertionError("the store stayed locked")


def start_batch_run(root: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, GEVAL_BATCH_POLL=POLL)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-m", "geval_spec", "run", "demo", "--batch", *args], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def hashes_of(root: Path, *case_ids: str) -> frozenset[str]:
    """The request hashes of these cases (a batch line's custom_id)."""
    found = set()
    for case_id in case_ids:
        res = cli("render", "demo", "--case", case_id, "--format", "json", cwd=root)
        assert res.code == 0, res.err
        found |= {r["hash"] for r in json.loads(res.out) if r["case_id"] == case_id}
    assert len(found) == len(case_ids)
    return frozenset(found)


def project(root: Path, base_url: str, client: str = "openai-http") -> Path:
    """The end-to-end project, with fewer bootstrap draws (the reports are compared, not read)."""
    make_project(root, base_url, client=client)
    spec = root / "specs" / "demo.yaml"
    spec.write_text(spec.read_text() + "bootstrap: {draws: 200}\n")
    return root


@pytest.mark.parametrize("client", ["openai-http", "litellm"])
def test_a_batch_run_ends_like_an_online_run_and_an_online_rerun_sends_nothing(tmp_path, srv, client):
    online = project(tmp_path / "online", srv.base_url, client)
    res = cli("run", "demo", cwd=online)
    assert res.code == 0, res.err
    assert srv.state.total == 20
    batch = project(tmp_path / "batch", srv.base_url, client)
    res = cli("run", "demo", "--batch", cwd=batch)
    assert res.code == 0, res.err + res.out
    run_id = last_line(res.out)
    assert run_id == last_line(cli("run", "demo", cwd=online).out)  # the same run: --batch is not what is judged
    assert srv.state.total == 20 and len(srv.batch_api.batches) == 1  # nothing went online
    [created] = srv.batch_api.batches.values()
    assert "submitted" in res.err and created.id in res.err and "completed" in res.err
    assert "batch: 20 answer(s) came through the provider's batch API, costed at its batch price" in res.out
    got, want = judgments(batch, run_id), judgments(online, run_id)
    assert {k: (j.score, j.valid, j.distribution) for k, j in got.items()} == \
        {k: (j.score, j.valid, j.distribution) for k, j in want.items()}
    assert report(batch, run_id) == report(online, run_id)
    assert query(batch, "SELECT count(*), count(*) FILTER (WHERE batch) FROM answers") == [(20, 20)]
    assert query(batch, "SELECT batch_id, status, requests, finished_at IS NOT NULL FROM batches") == \
        [(created.id, "completed", 20, True)]
    for args in (("run", "demo"), ("run", "demo", "--limit", "5"), ("run", "demo", "--batch")):
        res = cli(*args, cwd=batch)  # online or batch again: everything is answered already
        assert res.code == 0, res.err
    assert srv.state.total == 20 and len(srv.batch_api.batches) == 1
    listed = cli("batches", cwd=batch)
    assert listed.code == 0 and "no open batches" in listed.out


def test_sigkill_while_waiting_then_batches_lists_it_and_the_next_run_collects_it(tmp_path):
    srv = serve(in_progress=3600)  # stays in progress until the test lets it finish
    try:
        root = project(tmp_path, srv.base_url)
        proc = start_batch_run(root)
        wait_for(lambda: db_of(root).exists() and query(root, "SELECT count(*) FROM batches")[0][0] == 1)
        wait_for(lambda: next(iter(srv.batch_api.batches.values())).polls >= 2)  # it is waiting
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        [batch_id] = srv.batch_api.batches
        listed = cli("batches", cwd=root)
        assert listed.code == 0 and batch_id in listed.out and "demo" in listed.out and "in_progress" in listed.out
        [entry] = json.loads(cli("batches", "--format", "json", cwd=root).out)
        assert entry["batch"] == batch_id and entry["spec"] == "demo" and entry["requests"] == 20
        assert entry["status"] == "in_progress" and entry["run"].startswith("run_") and entry["age_seconds"] >= 0
        srv.batch_api.config.in_progress = 0  # the provider finishes it while nobody waits
        res = cli("run", "demo", "--batch", cwd=root)
        assert res.code == 0, res.err + res.out
        assert list(srv.batch_api.batches) == [batch_id]  # polled again, not submitted again
        assert "submitted earlier" in res.err and srv.state.total == 0
        assert len(judgments(root, last_line(res.out))) == 20
        assert json.loads(cli("batches", "--format", "json", cwd=root).out) == []
    finally:
        srv.stop()


def test_ctrl_c_while_waiting_exits_130_and_the_batch_is_collected_later(tmp_path):
    srv = serve(in_progress=3600)
    try:
        root = project(tmp_path, srv.base_url)
        proc = start_batch_run(root)
        wait_for(lambda: len(srv.batch_api.batches) == 1 and next(iter(srv.batch_api.batches.values())).polls >= 3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        [batch_id] = srv.batch_api.batches
        assert "keep running at the provider" in err and batch_id in err and "Traceback" not in err
        assert [e["batch"] for e in json.loads(cli("batches", "--format", "json", cwd=root).out)] == [batch_id]
        assert query(root, "SELECT status FROM runs") == [("interrupted",)]
        srv.batch_api.config.in_progress = 0
        res = cli("run", "demo", "--batch", cwd=root)
        assert res.code == 0, res.err
        assert list(srv.batch_api.batches) == [batch_id] and srv.state.total == 0
        assert sum(j.valid for j in judgments(root, last_line(res.out)).values()) == 20
    finally:
        srv.stop()


@pytest.mark.parametrize("shape", ["response", "error"])
@pytest.mark.parametrize("mode", ["online", "invalid"])
def test_lines_that_fail_in_the_batch_are_retried_online_or_left_invalid(tmp_path, shape, mode):
    srv = serve(fail_fraction=0.2, error_shape=shape)
    try:
        root = project(tmp_path, srv.base_url)
        failing = hashes_of(root, "c003", "c011")
        srv.batch_api.config.fail_ids = failing
        res = cli("run", "demo", "--batch", "--batch-errors", mode, cwd=root)
        assert res.code == 0, res.err + res.out
        [batch] = srv.batch_api.batches.values()
        failed = {line["custom_id"] for line in batch.failures}
        assert failing <= failed and len(failed) < 10
        js = judgments(root, last_line(res.out))
        bad = {j.case_id for j in js.values() if not j.valid}
        if mode == "online":
            assert srv.state.total == len(failed) and not bad  # each failed line asked once more, online
            assert f"{len(failed)} request(s) failed in their batch: sending them online" in res.err
        else:
            assert srv.state.total == 0 and len(bad) == len(failed) and {"c003", "c011"} <= bad
            detail = "HTTP 500" if shape == "response" else "server_error"
            for case_id in bad:
                assert js[case_id].reason.startswith(f"request failed: batch {batch.id}: {detail}")
            res = cli("run", "demo", "--batch", cwd=root)  # a later run asks again for what failed
            assert res.code == 0 and srv.state.total == len(failed)
            assert all(j.valid for j in judgments(root, last_line(res.out)).values())
    finally:
        srv.stop()


def test_a_failed_line_followed_by_the_answer_in_the_same_batch_is_not_paid_for_again(tmp_path):
    """An output file may hold a request's failed line and then its answer: the failed line queued it to be sent
    online, and the answer after it did not take it off (the request was paid for twice)."""
    srv = serve()
    try:
        root = project(tmp_path, srv.base_url)
        srv.batch_api.config.fail_then_answer_ids = hashes_of(root, "c003", "c011")
        res = cli("run", "demo", "--batch", "--batch-errors", "online", cwd=root)
        assert res.code == 0, res.err + res.out
        assert srv.state.total == 0 and "sending them online" not in res.err
        assert all(j.valid for j in judgments(root, last_line(res.out)).values())
    finally:
        srv.stop()


def test_an_answer_line_repeated_in_the_output_file_is_counted_and_costed_once(tmp_path):
    """A provider's output file holding a request's answer twice counted it twice: "22 answer(s)" of 20 requests,
    and the progress past 100%."""
    srv = serve()
    try:
        root = project(tmp_path, srv.base_url)
        srv.batch_api.config.duplicate_ids = hashes_of(root, "c003", "c011")
        res = cli("run", "demo", "--batch", cwd=root)
        assert res.code == 0, res.err + res.out
        assert "batch: 20 answer(s) came through the provider's batch API" in res.out
        assert "demo: 20/20 cases (100%), 20 sent, 0 cached, 0 failed" in res.err and "22 sent" not in res.out
        [batch] = srv.batch_api.batches.values()
        assert len(batch.outputs) == 22 and query(root, "SELECT count(*) FROM answers") == [(20,)]
        assert all(j.valid for j in judgments(root, last_line(res.out)).values())
    finally:
        srv.stop()


def test_a_failed_batch_exits_3_naming_it_and_the_next_run_submits_what_is_unanswered(tmp_path, srv, monkeypatch):
    root = project(tmp_path, srv.base_url)
    parse = openai_batches.parse_input

    def invalid(data: bytes, endpoint: str):
        requests, errors = parse(data, endpoint)
        return requests, errors + [{"code": "invalid_value", "message": "Model 'judge-small' is not available "
                                    "in the Batch API.", "param": "body.model", "line": 4}]

    monkeypatch.setattr(openai_batches, "parse_input", invalid)
    res = cli("run", "demo", "--batch", cwd=root)
    assert res.code == 3, res.err + res.out
    [batch_id] = srv.batch_api.batches
    assert f"batch {batch_id} ended failed: line 4: invalid_value: Model 'judge-small' is not available" in res.err
    assert "run the same command again to submit what is still unanswered" in res.err
    assert query(root, "SELECT status, finished_at IS NOT NULL FROM batches") == [("failed", True)]
    assert "no open batches" in cli("batches", cwd=root).out
    monkeypatch.setattr(openai_batches, "parse_input", parse)
    [(run_id,)] = query(root, "SELECT run_id FROM batches")
    with Store(db_of(root)) as store:  # a stored batch the provider no longer knows (deleted, another account)
        store.add_batch(BatchRecord(batch_id="batch_gone", run_id=run_id, spec_name="demo", client="openai-http",
                                    api_base=srv.base_url, model="openai/judge-small", input_file_id="file-x",
                                    requests=20, status="in_progress"))
    res = cli("run", "demo", "--batch", cwd=root)
    assert res.code == 3 and "batch batch_gone ended failed: unknown to the provider: HTTP 404" in res.err
    assert len(srv.batch_api.batches) == 1  # nothing submitted while a batch ended badly
    res = cli("run", "demo", "--batch", cwd=root)
    assert res.code == 0, res.err
    assert len(srv.batch_api.batches) == 2 and srv.state.total == 0
    assert len(judgments(root, last_line(res.out))) == 20


def test_batch_answers_cost_the_batch_price(tmp_path, srv):
    costs = {}
    for mode in ("online", "batch"):
        root = project(tmp_path / mode, srv.base_url)
        spec = root / "specs" / "demo.yaml"
        spec.write_text(spec.read_text().replace("openai/judge-small", "openai/gpt-4.1-mini"))
        res = cli("run", "demo", *(("--batch",) if mode == "batch" else ()), cwd=root)
        assert res.code == 0, res.err
        with Store(db_of(root)) as store:
            costs[mode] = store.usage(last_line(res.out)).cost
        assert ("costed at its batch price" in res.out) == (mode == "batch")
    assert costs["online"] > 0 and costs["batch"] == pytest.approx(costs["online"] / 2)


@pytest.mark.parametrize("limit", ["requests", "bytes"])
def test_a_run_over_the_limits_is_cut_into_several_batches(tmp_path, srv, monkeypatch, limit):
    from geval_spec.runner import batch as batch_module

    if limit == "requests":
        monkeypatch.setattr(batch_module, "MAX_REQUESTS", 7)
    else:
        monkeypatch.setattr(batch_module, "MAX_BYTES", 2500)  # two requests' lines (about 1.2 kB each)
    root = project(tmp_path, srv.base_url)
    res = cli("run", "demo", "--batch", cwd=root)
    assert res.code == 0, res.err
    sizes = sorted((len(b.requests) for b in srv.batch_api.batches.values()), reverse=True)
    assert sizes == ([7, 7, 6] if limit == "requests" else [2] * 10)
    for b in srv.batch_api.batches.values():
        assert len(srv.batch_api.files[b.input_file_id].data) <= (2500 if limit == "bytes" else 10**6)
    assert query(root, "SELECT count(*), sum(requests) FROM batches WHERE status = 'completed'") == \
        [(len(sizes), 20)]
    assert sum(j.valid for j in judgments(root, last_line(res.out)).values()) == 20


def test_batches_without_a_store_and_bad_options(tmp_path, monkeypatch):
    root = make_project(tmp_path, "http://127.0.0.1:9/v1")
    res = cli("batches", cwd=root)
    assert res.code == 0 and "no open batches" in res.out
    assert cli("batches", "--format", "json", cwd=root).out.strip() == "[]"
    cassette = tmp_path / "c.jsonl"
    cassette.write_text("")
    res = cli("run", "demo", "--batch", "--replay", str(cassette), cwd=root)
    assert res.code == 2 and "--batch and --replay" in res.err
    monkeypatch.setenv("GEVAL_BATCH_POLL", "soon")
    res = run_cli("run", "demo", "--batch", cwd=root, env={"GEVAL_BATCH_POLL": "soon"})
    assert res.code == 2 and "GEVAL_BATCH_POLL" in res.err and "Traceback" not in res.err


def test_a_batch_line_naming_a_request_by_its_whole_hash_answers_it():
    """A batch submitted before schema 3 named each request by its whole SHA-256 as its custom_id: collected now,
    its lines answer the requests, which are named by the first 32 hex digits."""
    import hashlib

    from geval_spec.judge.clients.batch_api import read_lines
    from geval_spec.judge.types import HASH_CHARS

    whole = hashlib.sha256(b"one").hexdigest()
    body = {"id": "x", "choices": []}
    data = (json.dumps({"custom_id": whole, "response": {"status_code": 200, "body": body}}) + "\n"
            + json.dumps({"custom_id": "short", "error": {"code": "expired", "message": "m"}}) + "\n"
            + json.dumps({"custom_id": whole[:HASH_CHARS] + "-" + "0" * 31, "error": {"code": "x"}}) + "\n"
            + json.dumps({"custom_id": whole.upper(), "error": {"code": "x"}}) + "\n").encode()
    # only a whole SHA-256 in hex is cut: 32 digits and anything else after them name no request
    assert [(line.custom_id, line.status) for line in read_lines(data)] == [
        (whole[:HASH_CHARS], 200), ("short", None), (whole[:HASH_CHARS] + "-" + "0" * 31, None),
        (whole.upper(), None)]
