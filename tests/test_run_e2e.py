"""End to end: `run` through litellm (and the direct client) against a real local HTTP server."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from conftest import cli, run_cli
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig, candidate_of
from geval_spec.store.db import Store


@pytest.fixture
def server():
    srv = FakeOpenAI(ServerConfig()).start()
    yield srv
    srv.stop()


def judgments(root: Path, run_id: str):
    with Store(root / ".geval" / "results.duckdb") as store:
        return {j.case_id: j for j in store.judgments(run_id)}


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@pytest.mark.parametrize("client", ["litellm", "openai-http"])
def test_run_scores_every_case_and_a_rerun_sends_nothing(tmp_path, server, client):
    root = make_project(tmp_path, server.base_url, client=client)
    res = cli("run", "demo", "--concurrency", "4", cwd=root)
    assert res.code == 0, res.err + res.out
    run_id = last_line(res.out)
    assert run_id.startswith("run_")
    assert server.state.total == 20
    js = judgments(root, run_id)
    assert len(js) == 20 and all(j.valid and j.method == "logprobs" for j in js.values())
    # the server puts 0.7 on the marked score, 0.2 one below, 0.1 one above (clipped to the scale)
    j = js["c001"]  # marker score 3: 0.7*3 + 0.2*2 + 0.1*4
    assert j.score == pytest.approx(2.9, abs=1e-9) and j.valid_mass == pytest.approx(1.0)
    assert j.distribution[3] == pytest.approx(0.7)
    res2 = cli("run", "demo", cwd=root)
    assert res2.code == 0 and server.state.total == 20  # nothing sent twice
    assert "20 cases reused from earlier runs" in res2.out
    js2 = judgments(root, last_line(res2.out))
    assert {k: v.score for k, v in js2.items()} == {k: v.score for k, v in js.items()}
    # a rerun that sends nothing imports no client (aiohttp: a tenth of a second; litellm: seconds)
    res3 = run_cli("run", "demo", cwd=root, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert res3.code == 0 and server.state.total == 20, res3.err
    imported = {line.rsplit("|", 1)[-1].strip() for line in res3.err.splitlines() if line.startswith("import time:")}
    assert "geval_spec.runner.run" in imported and not {"aiohttp", "litellm"} & imported
    # nor NumPy: its gate is the one the run saved (about 0.9 s of a 2.1 s rerun at 100,000 cases)
    assert "numpy" not in imported and _gate_line(res3.out) == _gate_line(res.out)


def test_a_run_that_reuses_judgments_exports_and_shows_their_answers(tmp_path, server):
    """Cases whose judgments a run reuses (from a run of some of them, or a run stopped midway and resumed) keep
    the requests that made them: the run's cassette replays it whole, and case_results shows their reasoning.
    The cassette held only the answers the run itself received, and replaying it stopped at the first reused case."""
    root = make_project(tmp_path, server.base_url, client="openai-http")
    assert cli("run", "demo", "--limit", "6", cwd=root).code in (0, 1)
    res = cli("run", "demo", cwd=root)
    assert res.code == 0 and "6 cases reused from earlier runs" in res.out, res.out + res.err
    run_id = last_line(res.out)
    cassette = tmp_path / "c.jsonl"
    out = cli("export", run_id, "--cassette", str(cassette), cwd=root)
    assert out.code == 0 and "wrote 20 recorded responses" in out.out, out.out + out.err
    replayed = cli("run", "demo", "--replay", str(cassette), "--db", str(tmp_path / "fresh.duckdb"), cwd=root)
    assert replayed.code == 0, replayed.err
    with Store(root / ".geval" / "results.duckdb") as store:
        missing = store.con.execute("SELECT count(*) FROM case_results WHERE run_id = ? AND reasoning IS NULL",
                                    [run_id]).fetchone()[0]
    assert missing == 0


def _gate_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("gate "))


def test_an_unchanged_rerun_reads_the_gate_its_run_saved(tmp_path, server, monkeypatch):
    """Only a run found finished reads its saved gate, and only one saved by the same code; --junit works from it."""
    from geval_spec.cli import run_commands

    root = make_project(tmp_path, server.base_url, n=8, client="openai-http")
    first = cli("run", "demo", cwd=root)
    run_id = last_line(first.out)
    key = f"gate:{run_id}"
    with Store(root / ".geval" / "results.duckdb") as store:
        saved = json.loads(json.loads(store.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()[0])
                           ["gate"])
        assert saved["summary"] == _gate_line(first.out) and saved["passed"] is True
        saved["summary"] = "gate passed: as saved"
        store.con.execute("UPDATE meta SET value = ? WHERE key = ?", [json.dumps(
            {"key": run_commands.gate_key(), "gate": json.dumps(saved)}), key])
    again = cli("run", "demo", "--junit", "j.xml", cwd=root)
    assert again.code == 0 and "gate passed: as saved" in again.out  # read, not judged again
    assert "<testsuite" in (root / "j.xml").read_text()
    monkeypatch.setattr(run_commands, "gate_key", lambda: "other code")
    judged = cli("run", "demo", cwd=root)
    assert judged.code == 0 and _gate_line(judged.out) == _gate_line(first.out)  # other code: judged again
    with Store(root / ".geval" / "results.duckdb") as store:
        assert json.loads(store.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()[0])["key"] \
            == "other code"
        store.delete_run(run_id)
        assert store.con.execute("SELECT count(*) FROM meta WHERE key = ?", [key]).fetchone()[0] == 0


def test_dry_run_sends_nothing(tmp_path, server):
    root = make_project(tmp_path, server.base_url)
    res = cli("run", "demo", "--dry-run", cwd=root)
    assert res.code == 0, res.err
    assert server.state.total == 0
    assert "nothing was sent" in res.out and "20 to send" in res.out and "static prefix" in res.out
    assert not (root / ".geval" / "results.duckdb").exists()


def test_split_and_limit(tmp_path, server):
    root = make_project(tmp_path, server.base_url)
    res = cli("run", "demo", "--split", "dev", "--limit", "3", cwd=root)
    assert res.code == 0, res.err
    assert server.state.total == 3 and "3 cases" in res.out


def test_a_ref_names_the_spec_s_whole_run_only(tmp_path, server):
    """`report REF` took the newest run of the spec's judging, even one of --limit 5 (5 of 20 cases, with no word
    of the rest) or of --model in place of the spec's judge; a --split dev run judged a gate set on all cases on the
    dev cases alone; compare of two runs by other judges said "metadata only"."""
    root = make_project(tmp_path, server.base_url, n=20, client="openai-http")
    split = cli("run", "demo", "--split", "dev", cwd=root)
    assert split.code == 0 and "gate not judged: this run covers split dev, the gate is judged on all" in split.out
    assert "(a run of --split dev: demo names whole runs)" in split.out
    limited = cli("run", "demo", "--limit", "5", cwd=root)
    assert limited.code == 0 and "gate passed" in limited.out  # the limit is the user's sample: its gate is judged
    res = run_cli("report", "demo", "--exit-zero", cwd=root)
    assert res.code == 2 and "no whole run of demo" in res.err and "--limit 5, --split dev" in res.err, res.err
    assert last_line(limited.out) in res.err and "Traceback" not in res.err  # the newest, to name instead
    assert cli("report", last_line(limited.out), "--exit-zero", cwd=root).code == 0  # by its id, as before
    whole = cli("run", "demo", cwd=root)
    assert "(or: geval-spec report demo)" in whole.out
    other = cli("run", "demo", "--model", "openai/judge-large", cwd=root)
    assert other.code == 0 and "(a run of --model openai/judge-large: demo names whole runs)" in other.out
    report = json.loads(cli("report", "demo", "--format", "json", "--out", "-", "--exit-zero", cwd=root).out)
    assert report["run"]["id"] == last_line(whole.out) and report["cases"]["n"] == 20
    compared = json.loads(cli("compare", last_line(whole.out), last_line(other.out), "--format", "json", "--out",
                              "-", cwd=root).out)
    assert compared["change"]["class"] == "judging", compared["change"]


def test_a_ref_whose_only_run_is_in_progress_says_so(tmp_path, server):
    """`report REF` while its run was in progress said "no stored run" and hinted `run REF`, which then failed with
    "in progress in another process"."""
    root = make_project(tmp_path, server.base_url, n=4, client="openai-http")
    run_id = last_line(cli("run", "demo", cwd=root).out)
    with Store(root / ".geval" / "results.duckdb") as store:
        store.con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", [run_id])
        journal = store.journal(run_id)  # held, as a live run holds its journal
    try:
        res = run_cli("report", "demo", "--exit-zero", cwd=root)
    finally:
        journal.discard()
    assert res.code == 2 and f"the run of demo ({run_id}) is still in progress" in res.err, res.err
    assert "wait for it to end, then: geval-spec report demo" in res.err and "geval-spec run demo" not in res.err


def test_faults_end_valid_or_invalid_with_reason(tmp_path):
    cfg = ServerConfig(fault_rate=0.3, timeout_sleep=1.5, retry_after="0", retry_after_ms="20", seed=3)
    with FakeOpenAI(cfg) as srv:
        root = make_project(tmp_path, srv.base_url, n=40, timeout=0.5, max_retries=3)
        res = cli("run", "demo", "--concurrency", "8", "--backoff", "0.01", cwd=root)
        assert res.code == 0, res.err + res.out
        assert set(srv.state.faults) == {"429", "500", "timeout", "malformed"}
        js = judgments(root, last_line(res.out))
        assert len(js) == 40
        for j in js.values():
            assert j.valid or (j.reason and j.reason.startswith("request failed"))
        # every case that was answered in the end was answered exactly once
        assert all(v == 1 for v in srv.state.ok_by_hash.values())


def test_retry_budget_spent_exits_3(tmp_path):
    with FakeOpenAI(ServerConfig(fail_always=500)) as srv:
        root = make_project(tmp_path, srv.base_url, n=5, client="openai-http")
        res = run_cli("run", "demo", "--retry-budget", "3", "--backoff", "0.01", cwd=root)
        assert res.code == 3, res.err
        assert "retry budget (3 retries) is spent" in res.err and "Traceback" not in res.err


@pytest.mark.parametrize("client", ["litellm", "openai-http"])
def test_an_outage_exits_3_not_as_a_failed_gate(tmp_path, client):
    """A judge that fails every request is an outage (exit 3), not a quality verdict (exit 1)."""
    with FakeOpenAI(ServerConfig(fail_always=500)) as srv:
        root = make_project(tmp_path, srv.base_url, n=3, client=client, max_retries=1)
        res = run_cli("run", "demo", "--backoff", "0.01", cwd=root)
        assert res.code == 3, res.err
        assert "the judge could not be used: 3 of 3 cases got no answer" in res.err
        assert "forced failure" in res.err and "gate" not in res.out + res.err and "Traceback" not in res.err
        with Store(root / ".geval" / "results.duckdb") as store:
            run = store.find_runs()[0]
            assert run.status == "failed" and len(store.judgments(run.run_id)) == 3


def test_some_failures_within_budget_are_invalid_not_fatal(tmp_path):
    def judge(body, i):
        from openai_server import candidate_of, default_judge

        if "Summary 3 " in candidate_of(body):
            raise RuntimeError("this case always fails")
        return default_judge(body, i)

    with FakeOpenAI(ServerConfig(judge=judge)) as srv:
        root = make_project(tmp_path, srv.base_url, n=6, client="openai-http", max_retries=1)
        res = run_cli("run", "demo", "--backoff", "0.01", cwd=root)
        assert res.code == 0, res.err
        assert "5 valid, 1 invalid" in res.out and "request failed: HTTP 500" in res.out


def test_unreachable_judge_exits_3(tmp_path):
    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=4, client="openai-http")
    res = run_cli("run", "demo", "--backoff", "0.01", cwd=root)
    assert res.code == 3 and "cannot reach the judge" in res.err


def test_missing_logprobs_names_model_and_fallback(tmp_path):
    with FakeOpenAI(ServerConfig(logprobs=False)) as srv:
        root = make_project(tmp_path, srv.base_url, n=6)
        res = run_cli("run", "demo", cwd=root)
        assert res.code == 3
        assert "openai/judge-small" in res.err and "scoring.fallback" in res.err
        assert srv.state.total <= 6


def test_fallback_samples_is_recorded(tmp_path):
    with FakeOpenAI(ServerConfig(logprobs=False)) as srv:
        root = make_project(tmp_path, srv.base_url, n=6, scoring_extra="  fallback: samples\n  samples: 3\n",
                            temperature=1)
        res = cli("run", "demo", cwd=root)
        assert res.code == 0, res.err
        js = judgments(root, last_line(res.out))
        assert all(j.method == "samples" and j.details.fallback_from == "logprobs" for j in js.values())
        assert all(j.samples is not None and len(j.samples) == 3 for j in js.values())
        before = srv.state.total
        assert cli("run", "demo", cwd=root).code == 0 and srv.state.total == before


def test_a_run_stopped_during_its_fallback_does_not_pay_the_fallback_answers_again(tmp_path):
    """No logprobs, fallback direct: a run stopped after its fallback answers arrived (but before its judgments were
    stored) resumes without sending them again, as it does with the first requests."""
    with FakeOpenAI(ServerConfig(logprobs=False)) as srv:
        root = make_project(tmp_path, srv.base_url, n=6, scoring_extra="  fallback: direct\n", client="openai-http")
        res = cli("run", "demo", cwd=root)
        assert res.code == 0, res.err
        expected = {c: j.score for c, j in judgments(root, last_line(res.out)).items()}
        with Store(root / ".geval" / "results.duckdb") as store:  # as if killed before the judgments were stored
            store.con.execute("DELETE FROM judgments")
            store.con.execute("UPDATE runs SET status = 'interrupted'")
        before = srv.state.total
        res = cli("run", "demo", cwd=root)
        assert res.code == 0, res.err
        assert srv.state.total == before
        assert {c: j.score for c, j in judgments(root, last_line(res.out)).items()} == expected


@pytest.mark.parametrize("supports_n", [True, False])
def test_samples_method(tmp_path, server, supports_n):
    extra = "  samples: 4\n"
    root = make_project(tmp_path, server.base_url, n=5, method="samples", scoring_extra=extra, temperature=1)
    spec = root / "specs" / "demo.yaml"
    if not supports_n:
        spec.write_text(spec.read_text().replace("  timeout:", "  supports_n: false\n  timeout:"))
    res = cli("run", "demo", cwd=root)
    assert res.code == 0, res.err
    assert server.state.total == (5 if supports_n else 20)
    for j in judgments(root, last_line(res.out)).values():
        assert j.method == "samples" and len(j.samples) == 4 and j.spread is not None
        assert j.score == pytest.approx(sum(j.samples) / 4)


def test_direct_and_invalid_output_is_kept(tmp_path):
    def judge(body, i):
        from openai_server import candidate_of

        cand = candidate_of(body)
        if "Summary 3 " in cand:
            return {"content": "I think it is a 4."}
        if "Summary 4 " in cand:
            return {"content": json.dumps({"reasoning": "r", "errors": [], "score": 9})}
        score = int(cand.split("[[score=")[1][0])
        return {"content": "```json\n" + json.dumps({"reasoning": "r", "errors": ["e"], "score": score}) + "\n```"}

    with FakeOpenAI(ServerConfig(judge=judge)) as srv:
        root = make_project(tmp_path, srv.base_url, n=6, method="direct")
        res = cli("run", "demo", cwd=root)
        assert res.code == 0, res.err
        js = judgments(root, last_line(res.out))
        assert js["c003"].valid is False and js["c003"].reason == "no JSON object in the output"
        assert js["c004"].valid is False and js["c004"].reason == "score 9 is outside 1..5"
        assert js["c000"].valid and js["c000"].score == 1.0 and js["c000"].details.errors == ("e",)
        assert "validity 66.7%" in res.out


def test_generated_steps_once(tmp_path, server):
    root = make_project(tmp_path, server.base_url, n=5)
    spec = root / "specs" / "demo.yaml"
    text = spec.read_text()
    spec.write_text(text.replace("steps:\n  - Read the source.\n  - Check each statement of the summary.\n",
                                 "steps: {generate: true, count: 3}\n"))
    res = cli("run", "demo", cwd=root)
    assert res.code == 0, res.err
    steps_calls = [b for b in server.state.bodies if b["messages"][0]["content"].startswith("You design")]
    assert len(steps_calls) == 1 and server.state.total == 1 + 5
    lock = root / "specs" / "demo.lock.yaml"
    assert lock.exists() and "Generated step 3." in lock.read_text()
    judge_calls = [b for b in server.state.bodies if not b["messages"][0]["content"].startswith("You design")]
    assert all("3. Generated step 3." in b["messages"][0]["content"] for b in judge_calls)
    res2 = cli("run", "demo", cwd=root)
    assert res2.code == 0 and server.state.total == 6
    assert cli("validate", "demo", cwd=root).code == 0
    # changing the task makes the lock stale: validate warns, the next run regenerates
    spec.write_text(spec.read_text().replace("Judge whether a summary", "Judge whether the summary"))
    val = cli("validate", "demo", cwd=root)
    assert val.code == 0 and "were written for another task" in val.err
    res3 = cli("run", "demo", cwd=root)
    assert res3.code == 0
    assert len([b for b in server.state.bodies if b["messages"][0]["content"].startswith("You design")]) == 2


def test_export_and_replay_without_network(tmp_path, server):
    root = make_project(tmp_path, server.base_url, n=8)
    run_id = last_line(cli("run", "demo", cwd=root).out)
    cassette = tmp_path / "demo.cassette.jsonl"
    res = cli("export", run_id, "--cassette", str(cassette), cwd=root)
    assert res.code == 0 and "8 recorded responses" in res.out
    server.stop()
    res2 = cli("run", "demo", "--replay", str(cassette), "--db", str(tmp_path / "fresh.duckdb"), cwd=root)
    assert res2.code == 0, res2.err
    assert "8 replayed from" in res2.out and "nothing sent" in res2.out and "a replay pays nothing" in res2.out
    assert "8 replayed, 0 cached" in res2.err and " sent," not in res2.err  # progress said "8 sent"
    # the next step names the store the run went to (`report RUN` alone looked in .geval/ and failed)
    assert f"next: geval-spec report {last_line(res2.out)} --db fresh.duckdb  (or: geval-spec report demo --db " \
           "fresh.duckdb)" in res2.out
    with Store(tmp_path / "fresh.duckdb") as store:
        replayed = {j.case_id: j.score for j in store.judgments(last_line(res2.out))}
    assert replayed == {k: v.score for k, v in judgments(root, run_id).items()}
    # a case the cassette does not hold is an error naming it
    data = root / "specs" / "data" / "cases.jsonl"
    data.write_text(data.read_text() + json.dumps({"id": "extra", "doc": "dx", "src": "s", "cand": "new one",
                                                   "human": 3}) + "\n")
    res3 = run_cli("run", "demo", "--replay", str(cassette), "--db", str(tmp_path / "fresh2.duckdb"), cwd=root)
    assert res3.code == 2 and "no recorded response for case 'extra'" in res3.err


def test_token_counts_the_store_cannot_hold_are_unknown(tmp_path, server):
    """A cassette line (or an answer) with prompt_tokens 10**30 failed every write of the run, then every command
    (exit 70) until its journal was deleted by hand; such a count, or a negative one, is unknown now."""
    from geval_spec.store.records import ResponseRecord

    root = make_project(tmp_path, server.base_url, n=4)
    run_id = last_line(cli("run", "demo", cwd=root).out)
    cassette = tmp_path / "c.jsonl"
    assert cli("export", run_id, "--cassette", str(cassette), cwd=root).code == 0
    lines = cassette.read_text().splitlines()
    evil = [json.loads(line) for line in lines]
    for item, count in zip([x for x in evil if "hash" in x], (10**30, -5, 2**31, 7)):
        item["prompt_tokens"] = count
    cassette.write_text("\n".join(json.dumps(x) for x in evil) + "\n")
    res = run_cli("run", "demo", "--replay", str(cassette), "--db", "fresh.duckdb", cwd=root)
    assert res.code == 0, res.err
    with Store(root / "fresh.duckdb") as store:
        counts = sorted(r[0] for r in store.con.execute("SELECT prompt_tokens FROM answers").fetchall()
                        if r[0] is not None)
    assert counts == [7]
    assert run_cli("report", "demo", "--db", "fresh.duckdb", "--exit-zero", cwd=root).code == 0
    # a journal written by a release that kept any whole number replays too
    record = ResponseRecord.of({"request_hash": "h", "run_id": "r", "attempt": 0, "ok": True, "status": 200,
                                "kind": None, "error": None, "prompt_tokens": 10**30, "completion_tokens": 3,
                                "cost": None, "latency_ms": 1.0, "cached_tokens": True}, "{}")
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (None, 3, None)


def test_expected_score_api():
    from geval_spec import expected_score

    assert round(expected_score({4: -0.2, 5: -0.9}, range(1, 6)), 2) == 4.33
    assert expected_score({"1": 0.0}, range(1, 4)) == 1.0
    with pytest.raises(ValueError):
        expected_score({7: 0.0}, range(1, 6))
    assert math.isclose(expected_score({2: math.log(0.5), 3: math.log(0.5)}, range(1, 6)), 2.5)


def test_api_keys_are_never_stored(tmp_path, server, monkeypatch):
    secret = "sk-test-do-not-store-4f1c2e"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    root = make_project(tmp_path, server.base_url, n=4, client="litellm")
    res = cli("run", "demo", cwd=root)
    assert res.code == 0, res.err
    cassette = tmp_path / "c.jsonl"
    assert cli("export", res.out.strip().splitlines()[-1], "--cassette", str(cassette), cwd=root).code == 0
    for path in [*(root / ".geval").rglob("*"), cassette]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def _duplicate_prompt(root: Path, first: int, second: int) -> None:
    """Give case ``second`` the same fields as case ``first``: their prompts, and so their requests, are identical."""
    path = root / "specs" / "data" / "cases.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[second].update(src=rows[first]["src"], cand=rows[first]["cand"])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_prompt_repeated_in_a_later_chunk_is_sent_once_and_judges_both_cases(tmp_path, server):
    """Cases 0 and 150 render the same prompt; 150 is planned in a later chunk, after 0's answer is in. Once lost:
    the second case waited for an answer that had come already."""
    root = make_project(tmp_path, server.base_url, n=160, client="openai-http")
    _duplicate_prompt(root, 0, 150)
    res = cli("run", "demo", "--concurrency", "4", cwd=root)
    assert res.code == 0, res.err + res.out
    js = judgments(root, last_line(res.out))
    assert len(js) == 160 and all(j.valid for j in js.values())
    assert js["c150"].score == js["c000"].score
    assert server.state.total == 159  # the repeated prompt went out once


def test_a_repeated_prompt_whose_request_failed_fails_both_cases(tmp_path):
    with FakeOpenAI(ServerConfig(fail_always=500)) as srv:
        root = make_project(tmp_path, srv.base_url, n=160, client="openai-http", max_retries=0)
        _duplicate_prompt(root, 0, 150)
        cli("run", "demo", "--concurrency", "4", "--backoff", "0.01", cwd=root)
        with Store(root / ".geval" / "results.duckdb") as store:
            run_id = store.con.execute("SELECT run_id FROM runs").fetchone()[0]
            js = {j.case_id: j for j in store.judgments(run_id)}
    assert len(js) == 160 and not any(j.valid for j in js.values())
    assert js["c150"].reason == js["c000"].reason and js["c150"].reason.startswith("request failed")


def test_a_completed_run_missing_a_judgment_is_redone_from_what_it_has(tmp_path, server):
    """A store written before the repeated-prompt fix can hold a completed run without one case's judgment: the
    next run fills it in from the stored answer, sending nothing."""
    root = make_project(tmp_path, server.base_url, n=20, client="openai-http")
    run_id = last_line(cli("run", "demo", cwd=root).out)
    with Store(root / ".geval" / "results.duckdb") as store:
        store.con.execute("DELETE FROM judgments WHERE run_id = ? AND case_id = 'c007'", [run_id])
    sent = server.state.total
    res = cli("run", "demo", cwd=root)
    assert res.code == 0 and last_line(res.out) == run_id
    assert "19 cases reused" in res.out and server.state.total == sent
    assert len(judgments(root, run_id)) == 20


def test_a_repeated_prompt_falling_back_is_sent_once_on_the_fallback_too(tmp_path):
    """No logprobs: both cases of a repeated prompt fall back to samples; the fallback request is one request."""
    with FakeOpenAI(ServerConfig(logprobs=False)) as srv:
        root = make_project(tmp_path, srv.base_url, n=8, scoring_extra="  fallback: samples\n  samples: 3\n",
                            temperature=1)
        _duplicate_prompt(root, 0, 5)
        res = cli("run", "demo", cwd=root)
        assert res.code == 0, res.err
        js = judgments(root, last_line(res.out))
        assert len(js) == 8 and js["c005"].samples == js["c000"].samples
        assert srv.state.total == 7 + 7  # 7 distinct prompts, each asked once for logprobs and once for samples


def test_case_results_gives_the_judge_s_reasoning_also_in_a_store_with_the_older_view(tmp_path, server):
    """docs/results.md: case_results holds the judge's reasoning where the output contract has one. The view read
    it from the judgment's details, which do not keep it: NULL for every case. A store made before reads the new
    view too (views are replaced when their definition changes)."""
    root = make_project(tmp_path, server.base_url, n=6, method="direct", client="openai-http")
    res = cli("run", "demo", cwd=root)
    assert res.code in (0, 1), res.err
    run_id = last_line(res.out)
    db = root / ".geval" / "results.duckdb"

    def reasons():
        with Store(db) as store:
            return store.con.execute("SELECT case_id, reasoning FROM case_results WHERE run_id = ? AND valid "
                                     "ORDER BY position", [run_id]).fetchall()

    rows = reasons()
    assert len(rows) == 6 and all(isinstance(r, str) and r for _, r in rows)
    with Store(db) as store:  # as a store made by the previous release: its view, no record of it
        store.con.execute("CREATE OR REPLACE VIEW case_results AS SELECT c.run_id, c.case_id, c.position, "
                          "j.valid, NULL AS reasoning FROM run_cases c JOIN judgments j USING (run_id, case_id)")
        store.con.execute("DELETE FROM meta WHERE key = 'views'")
    assert reasons() == rows
    with Store(db) as store:  # an answer whose content is not bare JSON (fenced, prose): NULL, not an error
        h = store.con.execute("SELECT request_hash FROM run_requests WHERE run_id = ? ORDER BY position LIMIT 1",
                              [run_id]).fetchone()[0]
        body = json.dumps({"choices": [{"message": {"content": "```json\n{\"score\": 3}\n```"}}]})
        store.con.execute("UPDATE answers SET body_json = ? WHERE request_hash = ?", [body, h])
        everything = store.con.execute("SELECT * FROM case_results WHERE run_id = ?", [run_id]).fetchall()
    assert len(everything) == 6 and [r[1] is None for r in reasons()] == [True] + [False] * 5


def test_every_query_in_docs_results_runs_on_a_run_s_store(tmp_path, server):
    """The documented queries once compared scales that differ and named a case no example has."""
    root = make_project(tmp_path, server.base_url, n=6, client="openai-http")
    run_id = last_line(cli("run", "demo", cwd=root).out)
    text = (Path(__file__).resolve().parent.parent / "docs" / "results.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```sql")[1:]]
    statements = [s for b in blocks for s in b.split(";") if s.strip()]
    assert len(statements) >= 5
    with Store(root / ".geval" / "results.duckdb") as store:
        for sql in statements:
            rows = store.con.execute(sql.replace("run_...", run_id).replace("CASE_ID", "c000")).fetchall()
            assert rows or "NOT valid" in sql, sql  # (every case of this run is valid)


def test_a_run_holds_the_chunk_it_plans_not_every_case(tmp_path, server, monkeypatch):
    """Cases leave memory once planned: at each chunk only the cases not yet planned are alive, and their texts
    are in the JSON Lines file, not in memory: only the chunk being planned has its texts. What the run returns
    for its gate has no texts."""
    import gc

    from geval_spec.dataset.cases import Case, Fields, OnDisk
    from geval_spec.runner import engine, run
    from geval_spec.spec.load import load_spec
    from geval_spec.spec.project import Project

    root = make_project(tmp_path, server.base_url, n=40, client="openai-http")
    monkeypatch.setattr(engine, "FIRST_CHUNK", 5)
    monkeypatch.setattr(engine, "CHUNK", 5)
    made: set[int] = set()
    read = run.read_cases

    def reading(parsed, **options):
        dataset = read(parsed, **options)
        made.update(id(c) for c in dataset.cases)
        return dataset

    held: list[int] = []
    texts: list[int] = []
    copies: list[int] = []
    plan = engine.Engine._plan

    async def planning(self, chunk):
        gc.collect()
        alive = [o for o in gc.get_objects() if type(o) is Case]
        held.append(sum(1 for o in alive if id(o) in made and type(o.fields) is OnDisk))
        texts.append(sum(1 for o in alive if type(o.fields) is Fields and len(o.fields)))
        copies.append(sum(1 for o in alive if not len(o.fields)))
        return await plan(self, chunk)

    monkeypatch.setattr(run, "read_cases", reading)
    monkeypatch.setattr(engine.Engine, "_plan", planning)
    returned = []
    execute = run.execute_run
    monkeypatch.setattr("geval_spec.runner.run.execute_run", lambda *a, **k: returned.append(execute(*a, **k))
                        or returned[-1])
    res = cli("run", "demo", "--concurrency", "4", cwd=root)
    assert res.code == 0, res.err + res.out
    assert held == [35, 30, 25, 20, 15, 10, 5, 0]  # (the chunk's own: replaced by their copies with texts)
    assert texts == [5] * 8  # the chunk's, read again from the file
    assert copies == [0, 5, 10, 15, 20, 25, 30, 35]  # the gate's copies without texts: made as cases are let go
    assert server.state.total == 40 and len(judgments(root, last_line(res.out))) == 40
    dataset = returned[0].dataset
    assert len(dataset.cases) == 40 and all(len(c.fields) == 0 for c in dataset.cases)
    assert dataset.cases == read(load_spec(Project(root).resolve("demo"))).without_texts().cases


@pytest.mark.parametrize("judged", [slice(0, 40), slice(0, 0), slice(3, 17), slice(0, 40, 3), "reordered"])
def test_the_gates_cases_without_texts_are_the_datas_in_order(judged):
    """The run copies the cases it judges without their texts as the engine lets them go, and the others at once:
    the gate gets the data's cases in the data's order, whichever cases were judged (a --split, --limit or
    --shard, or the cases not reused), and the same if the judged cases were ever not in the data's order."""
    from geval_spec.dataset.cases import Case, Dataset
    from geval_spec.runner.run import _TextFree

    cases = tuple(Case(id=f"c{i}", row=i + 1, fields={"text": f"t{i}"}, human=(float(i),), group=f"g{i // 3}")
                  for i in range(40))
    dataset = Dataset(path=Path("d.jsonl"), display="d.jsonl", cases=cases, sha256="x")
    chosen = list(reversed(cases[5:20])) if judged == "reordered" else list(cases[judged])
    text_free = _TextFree(dataset, chosen)
    for start in range(0, len(chosen), 4):
        text_free.let_go(chosen[start:start + 4])
    assert text_free.dataset() == dataset.without_texts()


def test_an_answer_holding_half_a_character_is_kept_and_judged(tmp_path):
    """A judge that writes an escape from \\ud800 to \\udfff standing alone (half of a character, which no store or
    terminal takes) in its reasoning: the answer is stored, judged and reported with U+FFFD in its place, not a
    failed run."""
    def judge(body, index):
        score = int(re.search(r"\[\[score=(\d+)\]\]", candidate_of(body)).group(1))
        content = json.dumps({"reasoning": "half \ud800 of it", "errors": ["e\udc00"], "score": score})
        return {"content": content, "score": score, "distribution": {score: 1.0}}

    with FakeOpenAI(ServerConfig(judge=judge)) as srv:
        root = make_project(tmp_path, srv.base_url, n=6, client="openai-http")
        res = cli("run", "demo", cwd=root)
        assert res.code in (0, 1), res.err + res.out
        js = judgments(root, last_line(res.out))
    assert len(js) == 6 and all(j.valid for j in js.values())
    assert js["c001"].details.errors == ("e\ufffd",)
    rep = cli("report", "demo", "--format", "json", "--out", "-", "--exit-zero", cwd=root)
    assert rep.code == 0 and json.loads(rep.out)


def test_a_body_holding_half_a_character_is_stored_as_text():
    from geval_spec.judge.clients.base import completion_from_openai

    body = {"id": "x\ud800", "choices": [{"message": {"content": "ok \udfff"}, "logprobs": {"content": [
        {"token": "a\ud800", "logprob": -0.1, "top_logprobs": [{"token": "\udc00", "logprob": -1.0}]}]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    text = json.dumps(body)
    c = completion_from_openai(json.loads(text), "m", 1.0, text=text)
    stored = c.body_text()
    stored.encode("utf-8")  # (raises on a lone surrogate)
    assert c.choices[0].text == "ok \ufffd" and json.loads(stored)["id"] == "x\ufffd"
    assert json.loads(stored)["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["token"] == "\ufffd"
    plain = json.dumps({"choices": [{"message": {"content": "ok"}}]})
    assert completion_from_openai(json.loads(plain), "m", 1.0, text=plain).raw_text == plain  # (as received)


def test_the_run_command_s_last_session_does_not_merge_the_run_s_row_groups(tmp_path, monkeypatch):
    """The session that judges and saves the gate after a run checkpoints (it writes the gate); a default session
    merged every row group the run's sessions appended (100,000 cases: 826 against 358 MB of RSS, a 365 MB file
    against 261 MB). It checkpoints as the run's own sessions do."""
    monkeypatch.setenv("GEVAL_STORE_INTERVAL", "0.1")
    with FakeOpenAI(ServerConfig(latency=0.05)) as srv:  # a run of about a second: several store sessions
        root = make_project(tmp_path, srv.base_url, n=40, client="openai-http")
        run_id = last_line(cli("run", "demo", "--concurrency", "2", cwd=root).out)
    with Store(root / ".geval" / "results.duckdb", vacuum=False) as store:
        groups = store.con.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('answers')"
                                   ).fetchone()[0]
        assert store.con.execute("SELECT count(*) FROM meta WHERE key = ?", [f"gate:{run_id}"]).fetchone()[0] == 1
    assert groups > 1


def test_a_data_file_changed_during_a_run_stops_it_with_a_data_error_and_keeps_what_was_paid_for(tmp_path, server,
                                                                                                 monkeypatch):
    """The texts of a JSON Lines file are read again as each chunk is planned; the file changed after the second
    chunk: the run stops with exit 2 naming the file, the answers it received are stored, and the next run (of
    the changed file) does not send them again."""
    import asyncio

    from geval_spec.runner import engine

    root = make_project(tmp_path, server.base_url, n=20, client="openai-http")
    monkeypatch.setattr(engine, "FIRST_CHUNK", 5)
    monkeypatch.setattr(engine, "CHUNK", 5)
    data = root / "specs" / "data" / "cases.jsonl"
    plan = engine.Engine._plan
    planned = []

    async def planning(self, chunk):
        out = await plan(self, chunk)
        planned.append(len(chunk))
        if len(planned) == 2:  # once the first answers are in
            for _ in range(500):
                if server.state.ok >= 4:
                    break
                await asyncio.sleep(0.01)
            with data.open("a") as fh:
                fh.write('{"id": "new", "doc": "d99", "src": "s", "cand": "Summary new [[score=3]]", "human": 3}\n')
        return out

    monkeypatch.setattr(engine.Engine, "_plan", planning)
    res = cli("run", "demo", "--concurrency", "4", cwd=root)
    assert res.code == 2, res.err + res.out
    assert "cases.jsonl" in res.err and "changed while it was in use" in res.err and "Traceback" not in res.err
    sent = server.state.total
    assert planned == [5, 5] and 4 <= sent <= 10
    with Store(root / ".geval" / "results.duckdb") as store:
        assert store.con.execute("SELECT count(*) FROM answers").fetchone()[0] == server.state.ok == sent
    monkeypatch.setattr(engine.Engine, "_plan", plan)
    again = cli("run", "demo", "--concurrency", "4", cwd=root)
    assert again.code == 0, again.err + again.out
    assert server.state.total == 21  # what was answered before is not sent again: the rest and the new case


def test_an_unchanged_rerun_without_a_saved_gate_does_not_read_the_texts_again(tmp_path, server, monkeypatch):
    """The gate reads no texts: an unchanged rerun whose gate is not saved (a new geval-spec version) computes it
    from the cases as read, without opening the data file again for each case (it did: 20,000 opens at 20,000
    cases)."""
    from geval_spec import files

    root = make_project(tmp_path, server.base_url, n=30, client="openai-http")
    first = cli("run", "demo", "--concurrency", "4", cwd=root)
    assert first.code == 0, first.err + first.out
    with Store(root / ".geval" / "results.duckdb") as store:
        store.con.execute("DELETE FROM meta WHERE key LIKE 'gate:%'")
    opened = []
    real = files.LinesAgain.__init__

    def counting(self, *args, **kwargs):
        opened.append(args)
        real(self, *args, **kwargs)

    monkeypatch.setattr(files.LinesAgain, "__init__", counting)
    again = cli("run", "demo", "--concurrency", "4", cwd=root)
    assert again.code == 0, again.err + again.out
    assert server.state.total == 30 and opened == []
    assert "gate passed" in again.out + again.err
