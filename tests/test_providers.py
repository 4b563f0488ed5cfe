"""Real provider limits against the local server: rate limits (declared and adaptive), reasoning models,
provider settings, prompt-cache accounting and the cost ceiling."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cli
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig, request_tokens

from geval_spec.judge import costs
from geval_spec.judge.clients import client_name
from geval_spec.judge.clients.base import duration_seconds, rate_info
from geval_spec.judge.clients.http_client import wire_body, wire_text
from geval_spec.judge.models import facts
from geval_spec.judge.requests import request_body
from geval_spec.runner.pacing import rate_cost
from geval_spec.spec.fingerprint import canonical
from geval_spec.spec.sections import Judge

LONG_SOURCE = "The council approved the new budget after a long debate about schools and roads. " * 12


def _project(tmp_path: Path, api_base: str, n: int, *, judge_extra: str = "", model: str = "openai/judge-small",
             **kw) -> Path:
    root = make_project(tmp_path, api_base, n=n, client="openai-http", **kw)
    spec = root / "specs" / "demo.yaml"
    text = spec.read_text().replace("model: openai/judge-small", f"model: {model}")
    if judge_extra:
        text = text.replace("  client: openai-http\n", f"  client: openai-http\n{judge_extra}")
    spec.write_text(text)
    data = root / "specs" / "data" / "cases.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    data.write_text("\n".join(json.dumps({**r, "src": LONG_SOURCE + r["src"]}) for r in rows) + "\n")
    return root


def _achieved(srv: FakeOpenAI) -> float:
    """Requests per minute the server accepted, from the first to the last accepted request."""
    times = sorted(srv.state.accepted_at)
    return (len(times) - 1) / (times[-1] - times[0]) * 60.0


def _store(root: Path):
    return duckdb.connect(str(root / ".geval" / "results.duckdb"), read_only=True)


# -- rate limits ---------------------------------------------------------------------------------------------

def test_declared_limits_are_paced_evenly_with_no_429_and_near_the_limit(tmp_path):
    rpm = 900  # 15 a second; tokens bind first: each request costs about 480 tokens, tpm 240,000 = 500/min
    with FakeOpenAI(ServerConfig(rpm=rpm, tpm=240_000, latency=0.05)) as srv:
        root = _project(tmp_path, srv.base_url, 60, judge_extra=f"  limits: {{rpm: {rpm}, tpm: 240000}}\n")
        res = cli("run", "demo", "--concurrency", "32", cwd=root)
        assert res.code == 0, res.err
        assert srv.state.rate_limited == 0 and srv.state.total == 60
        cost = request_tokens(srv.state.bodies[0])
        limit = min(rpm, 240_000 / cost)
        assert 0.9 * limit <= _achieved(srv) <= 1.1 * limit, (_achieved(srv), limit)
        assert "paced to 900 rpm, 240,000 tpm" in res.err or "paced to" in res.err


def test_cli_limits_override_the_spec_and_a_full_minute_is_never_sent_at_once(tmp_path):
    # the spec allows far more than the server; --rpm brings it down to the server's limit
    with FakeOpenAI(ServerConfig(rpm=600, latency=0.02)) as srv:
        root = _project(tmp_path, srv.base_url, 40, judge_extra="  limits: {rpm: 100000}\n")
        res = cli("run", "demo", "--concurrency", "32", "--rpm", "600", cwd=root)
        assert res.code == 0, res.err
        assert srv.state.rate_limited == 0
        gaps = [b - a for a, b in zip(srv.state.accepted_at, srv.state.accepted_at[1:])]
        assert min(gaps) > 0.05  # a request every 0.1 s, never a burst
        assert 0.9 * 600 <= _achieved(srv) <= 1.1 * 600


def test_without_limits_the_pace_adapts_to_the_providers_headers(tmp_path):
    rpm = 1200
    with FakeOpenAI(ServerConfig(rpm=rpm, latency=0.05)) as srv:
        root = _project(tmp_path, srv.base_url, 160)
        res = cli("run", "demo", "--concurrency", "64", cwd=root)
        assert res.code == 0, res.err
        answered = srv.state.statuses[200]
        assert answered == 160
        assert srv.state.rate_limited <= 0.05 * srv.state.total, srv.state.rate_limited
        assert _achieved(srv) >= 0.8 * rpm


def test_without_headers_429s_cut_the_window_and_retry_after_is_honoured(tmp_path):
    with FakeOpenAI(ServerConfig(rpm=600, latency=0.05, ratelimit_headers=False)) as srv:
        root = _project(tmp_path, srv.base_url, 60)
        res = cli("run", "demo", "--concurrency", "64", cwd=root)
        assert res.code == 0, res.err
        assert srv.state.statuses[200] == 60  # every case answered in the end
        # The 429s come in one burst as the slow start overshoots, and none after: the pace is found. Before later
        # 429s paced at the rate answers came at, 44-50 of about 106 requests were refused all through the run
        # (the window alone held the pace). How many the burst holds is the requests already in flight when the
        # first 429 is read: 3-12 on a quiet machine, up to 23 on a loaded one (CPU-starved, the client reads
        # answers in clumps and its window grows meanwhile), so their count is no measure of the pacing.
        limited = srv.state.limited_at
        assert limited and max(limited) - min(limited) < 1.0, [round(t - min(limited), 3) for t in limited]
        assert sum(t > max(limited) for t in srv.state.accepted_at) >= 40  # of the 60 answers


def test_without_headers_later_429s_pace_at_what_the_provider_let_through(monkeypatch):
    """Answers that came within milliseconds before the first 429 (a burst the provider let through) gave a pace
    of tens of thousands a minute, which the window alone (1 to 2 in flight at 50 ms) could not bring down to a
    600 rpm limit: about half the requests were refused, and a request could use up its retries on 429s
    (a flaky CI failure). A later 429 paces at nine tenths of the rate answers came at over the last seconds."""

    from geval_spec.runner import pacing

    clock = [100.0]
    monkeypatch.setattr(pacing, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    p = pacing.Pacer(None, None, concurrency=64)

    def attempt(at: float, refused: bool = False) -> None:
        clock[0] = at
        p.in_flight += 1
        p.release(pacing.Ticket(sent_at=at, round=p.round), rate_limited=refused)

    for at in (100.000, 100.001, 100.002, 100.003):
        attempt(at)
    attempt(100.004, refused=True)
    assert p.estimated and p.requests.per_minute * p.share > 10_000  # the burst's rate
    answers = [100.004 + k * 0.1 for k in range(1, 21)]  # then the provider lets ten a second through
    for at in answers:
        attempt(at)
    attempt(answers[-1] + 0.01, refused=True)
    measured = (4 + 20 - 1) / (answers[-1] - 100.000) * 60.0
    assert p.requests.per_minute * p.share == pytest.approx(0.9 * measured)
    assert p.requests.per_minute * p.share < 1.1 * 600


def test_the_slow_start_reaches_the_concurrency_in_two_round_trips():
    """Without limits or headers the window starts at 8 and grows by two an answer: 8, then 24, then every one of 64
    in flight. Starting at 4 and growing by one (4, 8, 16, 32, 64) cost a 2,000-case run at latency 0.2 s about
    0.6 s of wall time against a raw loop, and at 300 rpm without headers the first 429s came while answers
    still came at the slow start's pace, which then became the pace: 0.63 of the limit (BENCHMARKS.md)."""
    from geval_spec.runner import pacing

    p = pacing.Pacer(None, None, concurrency=64)
    rounds = []
    while len(rounds) < 5:
        in_flight = int(p.window)
        rounds.append(in_flight)
        if in_flight >= 64:
            break
        for _ in range(in_flight):  # a round trip: everything in flight is answered
            p.in_flight += 1
            p.release(pacing.Ticket(sent_at=0.0, round=p.round))
    assert rounds == [8, 24, 64]
    assert pacing.Pacer(None, None, concurrency=3).window == 3  # never more than the concurrency
    p = pacing.Pacer(None, None, concurrency=64)
    p.in_flight += 1
    p.release(pacing.Ticket(sent_at=0.0, round=p.round), rate_limited=True)
    assert (p.window, p.slow_start) == (4, False)  # a 429 halves it and ends the slow start


def test_rate_cost_counts_what_the_server_counts():
    judge = Judge(model="openai/x", max_tokens=300)
    body = request_body(judge, [{"role": "system", "content": "a" * 1001}, {"role": "user", "content": "b" * 7}],
                        logprobs=False, n=2)
    assert rate_cost(body) == request_tokens(body) == 252 + 600


@pytest.mark.parametrize("text,seconds", [("0s", 0.0), ("120ms", 0.12), ("1.5s", 1.5), ("6m0s", 360.0),
                                          ("1h2m3s", 3723.0), ("2", 2.0), ("soon", None)])
def test_reset_durations(text, seconds):
    assert duration_seconds(text) == seconds


def test_rate_info_reads_openai_and_litellm_headers():
    info = rate_info({"x-ratelimit-limit-requests": "500", "llm_provider-x-ratelimit-remaining-tokens": "10",
                      "x-ratelimit-reset-requests": "120ms", "content-type": "application/json"})
    assert info is not None and info.limit_requests == 500 and info.remaining_tokens == 10
    assert info.reset_requests == pytest.approx(0.12)
    assert rate_info({"content-type": "x"}) is None


# -- reasoning models and provider settings ----------------------------------------------------------------

def test_a_fixed_temperature_is_refused_before_anything_is_sent(tmp_path):
    with FakeOpenAI(ServerConfig(fixed_temperature_models={"o3-mini": 1.0})) as srv:
        root = _project(tmp_path, srv.base_url, 4, model="openai/o3-mini", method="direct")
        res = cli("run", "demo", cwd=root)
        assert res.code == 2 and srv.state.total == 0
        assert "temperature" in res.err and "takes only temperature 1" in res.err
        assert re.search(r"demo\.yaml:\d+:\d+", res.err), res.err
        res = cli("run", "demo", "--model", "openai/gpt-5-mini", cwd=root)
        assert res.code == 2 and "--model openai/gpt-5-mini takes only temperature 1" in res.err


def test_no_logprobs_names_scoring_fallback(tmp_path):
    with FakeOpenAI(ServerConfig(no_logprobs_models={"o3-mini"})) as srv:
        root = _project(tmp_path, srv.base_url, 4, model="openai/o3-mini", temperature=1,
                        scoring_extra="  fallback: none\n")
        res = cli("run", "demo", cwd=root)
        assert res.code == 2 and srv.state.total == 0
        assert "returns no logprobs" in res.err and "scoring.fallback" in res.err


def test_reasoning_settings_pass_through_and_reasoning_tokens_are_counted_and_billed(tmp_path):
    config = ServerConfig(fixed_temperature_models={"o3-mini": 1.0}, no_logprobs_models={"o3-mini"},
                          reasoning_tokens=40)
    with FakeOpenAI(config) as srv:
        root = _project(tmp_path, srv.base_url, 6, model="openai/o3-mini", method="direct", temperature=1,
                        judge_extra="  params: {reasoning_effort: low, top_p: 0.5}\n")
        res = cli("run", "demo", cwd=root)
        assert res.code == 0, res.err
        assert all(p == {"reasoning_effort": "low", "top_p": 0.5, "seed": 7} for p in srv.state.extra_params)
        assert all("max_completion_tokens" in b and "max_tokens" not in b for b in srv.state.bodies)
        assert "of them reasoning" in res.out
        price = costs.price("openai/o3-mini")
        with _store(root) as con:
            rows = con.execute("SELECT prompt_tokens, completion_tokens, reasoning_tokens, cost FROM answers").fetchall()
        for pt, ct, rt, cost in rows:
            assert rt == 40 and ct >= 40
            assert cost == pytest.approx(pt * price.input + ct * price.output)


def test_params_are_in_the_judging_fingerprint_and_reserved_keys_are_refused(tmp_path):
    root = _project(tmp_path, "http://127.0.0.1:9", 4)
    fp = json.loads(cli("list", "--format", "json", cwd=root).out)
    spec = root / "specs" / "demo.yaml"
    text = spec.read_text()
    spec.write_text(text.replace("  client: openai-http\n", "  client: openai-http\n  params: {top_p: 0.9}\n"))
    fp2 = json.loads(cli("list", "--format", "json", cwd=root).out)
    assert fp[0]["judging"] != fp2[0]["judging"]
    assert fp[0]["analysis"] == fp2[0]["analysis"]
    spec.write_text(text.replace("  client: openai-http\n", "  client: openai-http\n  limits: {rpm: 10}\n"))
    fp3 = json.loads(cli("list", "--format", "json", cwd=root).out)
    assert fp3[0]["judging"] == fp[0]["judging"]  # pacing changes no answer
    spec.write_text(text.replace("  client: openai-http\n", "  client: openai-http\n  params: {temperature: 1}\n"))
    res = cli("validate", cwd=root)
    assert res.code == 2 and "geval-spec sets temperature itself" in res.err and "demo.yaml:" in res.err


@pytest.mark.parametrize("api_base, said", [
    ("http://", "api_base has no host"),
    ("http://:8000/v1", "api_base has no host"),
    ("http://[::1]:99999/v1", "api_base is not a URL"),
    ("http://localhost:abc/v1", "api_base is not a URL"),
    ("http://[zz]/v1", "api_base is not a URL"),
    ("http://exa mple.com/v1", "holds a space or a control character"),
    ("http://example.com/v1\t", "holds a space or a control character"),
    ("http://localhost:8000/v1", None),
    ("http://[::1]:8080/v1", None),
    ("https://api.example.com", None),
])
def test_an_api_base_that_is_no_url_is_refused_by_validate(tmp_path, api_base, said):
    """Such a URL passed validate and --dry-run; the run then failed every request as an outage (exit 3)."""
    root = _project(tmp_path, "http://127.0.0.1:9/v1", 4)
    spec = root / "specs" / "demo.yaml"
    text = spec.read_text()
    assert "  api_base: http://127.0.0.1:9/v1\n" in text
    spec.write_text(text.replace("  api_base: http://127.0.0.1:9/v1\n", f"  api_base: {json.dumps(api_base)}\n"))
    res = cli("validate", cwd=root)
    if said is None:
        assert res.code == 0, res.err
    else:
        assert res.code == 2 and said in res.err and "[judge.api_base]" in res.err and "demo.yaml:" in res.err, res.err


def test_a_run_stored_with_an_api_base_the_check_refuses_stays_readable(tmp_path):
    """The check belongs to reading a spec file: made as a validator of the spec model, it also ran on the specs
    stored with runs, and a run stored before it (a replayed run never contacts its api_base) crashed report, and
    the next run of the mended spec, with exit 70."""
    from geval_spec.store.db import Store

    with FakeOpenAI(ServerConfig()) as srv:
        root = _project(tmp_path, srv.base_url, 4)
        ran = cli("run", "demo", cwd=root)
        assert ran.code in (0, 1), ran.err
    run_id = ran.out.strip().splitlines()[-1]
    with Store(root / ".geval" / "results.duckdb") as store:
        store.con.execute("UPDATE runs SET spec_json = replace(spec_json, ?, 'http://localhost:99999/v1')",
                          [srv.base_url])
        assert "99999" in store.con.execute("SELECT spec_json FROM runs").fetchone()[0]
    res = cli("report", run_id, "--exit-zero", "--out", "-", cwd=root)
    assert res.code == 0, res.err


def test_a_reserved_credential_param_is_named_not_redacted(tmp_path):
    root = _project(tmp_path, "http://127.0.0.1:9/v1", 4)
    spec = root / "specs" / "demo.yaml"
    spec.write_text(spec.read_text().replace("  client: openai-http\n", "  client: openai-http\n  params: {api_key: x}\n"))
    res = cli("validate", cwd=root)
    message = next(line for line in res.err.splitlines() if "error [judge.params]" in line)  # (the excerpt below
    # it shows the value redacted, as it should)
    assert res.code == 2 and "geval-spec sets api_key itself" in message and "[redacted]" not in message, res.err


def test_client_auto_and_cache_marks():
    assert client_name("auto", "openai/gpt-4.1-mini") == "openai-http"
    assert client_name("auto", "gpt-4.1-mini") == "openai-http"
    assert client_name("auto", "anthropic/claude-sonnet-4-5") == "litellm"
    assert client_name("litellm", "openai/gpt-4.1-mini") == "litellm"
    messages = [{"role": "system", "content": "static"}, {"role": "user", "content": "case"}]
    marked = request_body(Judge(model="anthropic/claude-sonnet-4-5", cache_prefix=True), messages, logprobs=False)
    assert marked["cache_control_injection_points"] == [{"location": "message", "role": "system"}]
    openai = request_body(Judge(model="openai/gpt-4.1-mini", cache_prefix=True), messages, logprobs=False)
    assert "cache_control_injection_points" not in openai  # OpenAI caches prefixes by itself
    assert "cache_control_injection_points" not in wire_body(marked)  # never sent to an OpenAI endpoint


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                      max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(model=st.sampled_from(["openai/judge-small", "judge-small", "gpt-4.1-mini", "openai/o3-mini", "o4-mini",
                              'openai/we"ird\\model', "openai/"]),
       extra=st.dictionaries(st.sampled_from(["n", "seed", "temperature", "top_logprobs", "response_format",
                                              "max_tokens", "logprobs", "zz", "model_x", "mode",
                                              "cache_control_injection_points"]), _VALUE, max_size=6),
       messages=st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": _TEXT}),
                         min_size=1, max_size=3))
def test_wire_text_is_the_wire_body_encoded(model, extra, messages):
    """The body sent as planned (only the model's name put in place) is the wire body, whatever the keys after
    "model" hold (a nested "model" among them too); when it cannot be, None (the client encodes the wire body)."""
    body = {"model": model, "messages": messages, **extra}
    text = wire_text(body, canonical(body))
    if text is None:
        assert "cache_control_injection_points" in body or ("max_tokens" in body and facts(model).reasoning)
    else:
        assert json.loads(text) == json.loads(json.dumps(wire_body(body)))
        assert text == canonical(wire_body(body))
    assert wire_text(body, canonical({**body, "zzz": 1})) in (None, canonical({**body, "zzz": 1}))  # not its text


def test_wire_text_tells_equal_settings_of_other_types_apart():
    """The ends of the text are kept per judge's settings: 0, 0.0, -0.0, False and True are not one setting."""
    for temperature in (0, 0.0, -0.0, False, 0, True, 1, 1.0, -0.0):
        body = {"model": "openai/judge-small", "messages": [{"role": "user", "content": "x"}],
                "temperature": temperature, "seed": 7}
        assert wire_text(body, canonical(body)) == canonical(wire_body(body))


def test_the_direct_client_sends_the_planned_body_with_the_wire_model(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        root = _project(tmp_path, srv.base_url, 3)
        assert cli("run", "demo", cwd=root).code == 0
        bodies = list(srv.state.bodies)
    assert len(bodies) == 3 and {b["model"] for b in bodies} == {"judge-small"}
    assert all(b["logprobs"] is True and b["messages"][-1]["role"] == "user" for b in bodies)


# -- prompt caching -------------------------------------------------------------------------------------

def test_cached_tokens_are_stored_priced_at_the_cached_rate_and_summarised(tmp_path):
    with FakeOpenAI(ServerConfig(cached_tokens=0.5)) as srv:
        root = _project(tmp_path, srv.base_url, 8, model="openai/gpt-4.1-mini")
        res = cli("run", "demo", cwd=root)
        assert res.code == 0, res.err
        price = costs.price("openai/gpt-4.1-mini")
        with _store(root) as con:
            rows = con.execute("SELECT prompt_tokens, completion_tokens, cached_tokens, cost FROM answers").fetchall()
        saved = 0.0
        for pt, ct, cached, cost in rows:
            assert cached == pt // 2
            assert cost == pytest.approx((pt - cached) * price.input + cached * price.cached_input + ct * price.output)
            saved += cached * (price.input - price.cached_input)
        assert re.search(r"= 50% read from the provider's cache, saving \$", res.out), res.out
        assert f"${saved:,.4f}" in res.out


# -- the cost ceiling ------------------------------------------------------------------------------------

def test_max_cost_refuses_a_run_whose_estimate_is_above_it(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        root = _project(tmp_path, srv.base_url, 20, model="openai/gpt-4.1-mini")
        res = cli("run", "demo", "--max-cost", "0.0001", cwd=root)
        assert res.code == 3 and srv.state.total == 0
        assert "--max-cost $0.0001: the estimate for this run is $" in res.err and "nothing was sent" in res.err
        res = cli("run", "demo", "--max-cost", "1", "--model", "openai/not-in-the-map", cwd=root)
        assert res.code == 2 and "cannot be enforced" in res.err and srv.state.total == 0


def test_max_cost_stops_before_passing_the_ceiling_and_the_run_goes_on(tmp_path):
    n = 40
    with FakeOpenAI(ServerConfig()) as srv:
        root = _project(tmp_path, srv.base_url, n, model="openai/gpt-4.1-mini")
        assert cli("run", "demo", "--limit", "4", cwd=root).code == 0  # earlier answers: a typical output length
        dry = cli("run", "demo", "--dry-run", cwd=root)
        estimate = float(re.search(r"cost +about \$([0-9.]+)", dry.out).group(1))
        ceiling = estimate + 0.0001  # the estimate is printed to 4 decimals
        # the estimate is just under the ceiling, but every request in flight reserves its most (max_tokens)
        res = cli("run", "demo", "--max-cost", f"{ceiling:.6f}", "--concurrency", "4", cwd=root)
        assert res.code == 3, res.err
        assert f"--max-cost ${ceiling:.4f} reached: this run spent $" in res.err
        with _store(root) as con:
            answered = con.execute("SELECT count(*) FROM answers").fetchone()[0]
            newest = con.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
            spent = con.execute("SELECT sum(cost) FROM answers WHERE run_id = ?", [newest]).fetchone()[0]
        assert 4 < answered < n
        assert spent <= ceiling
        before = srv.state.total
        res = cli("run", "demo", cwd=root)
        assert res.code == 0, res.err
        assert srv.state.total - before == n - answered  # only the rest is sent


def _odd_answers(bodies: dict[str, tuple[int, bytes, dict[str, str]]]):
    """A server on 127.0.0.1 answering POST /<name>/v1/chat/completions with the given (status, body, headers)."""
    import asyncio
    import threading

    from aiohttp import web

    async def handle(request):
        status, body, headers = bodies[request.match_info["name"]]
        return web.Response(status=status, body=body, headers=headers)

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/{name}/v1/chat/completions", handle)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def stop():
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    return f"http://127.0.0.1:{port}", stop


def test_the_direct_client_turns_odd_answers_into_transport_errors(monkeypatch):
    """Bytes that are not UTF-8, JSON nested past Python's stack and an answer that unpacks to gigabytes ended the
    run with an internal error (exit 70, or memory exhausted); they are answers that are not chat completions now,
    which the run retries and then records as failed. A base URL with credentials in the environment is an input
    error (aiohttp refused it with a ValueError)."""
    import asyncio
    import gzip

    from geval_spec.errors import InputError
    from geval_spec.judge.clients import http_client
    from geval_spec.judge.clients.base import TransportError
    from geval_spec.judge.clients.http_client import HttpClient

    monkeypatch.setattr(http_client, "MAX_ANSWER_BYTES", 1 << 20)
    bomb = gzip.compress(b" " * (8 << 20), 9)  # 8 MB of whitespace in a few KB
    good = json.dumps({"choices": [{"message": {"role": "assistant", "content": "caf\u00e9"}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 2}}, ensure_ascii=False).encode("utf-8")
    base, stop = _odd_answers({
        "latin1": (200, good.replace("caf\u00e9".encode(), b"caf\xe9"), {"Content-Type": "application/json"}),
        "latin1-401": (401, b'{"error": {"message": "cl\xe9 refus\xe9e"}}', {}),
        "nul": (200, b"\x00\xff" + good, {}),
        "deep": (200, b"[" * 200_000 + b"]" * 200_000, {}),
        "bomb": (200, bomb, {"Content-Encoding": "gzip", "Content-Type": "application/json"}),
        "big": (200, b" " * (2 << 20) + good, {}),
        "good-gzip": (200, gzip.compress(good), {"Content-Encoding": "gzip"}),
    })

    async def ask(name):
        client = HttpClient(f"{base}/{name}/v1", 1)
        try:
            return await client.complete({"model": "judge-small", "messages": []}, 10.0)
        finally:
            await client.close()

    try:
        latin = asyncio.run(ask("latin1"))
        assert latin.choices[0].text == "caf\ufffd"  # kept, with the byte that is not UTF-8 marked
        with pytest.raises(TransportError) as refused:
            asyncio.run(ask("latin1-401"))
        assert refused.value.kind == "auth" and "cl\ufffd refus\ufffde" in str(refused.value)
        for name, words in (("nul", "not JSON"), ("deep", "not JSON"), ("bomb", "larger than 1 MB"),
                            ("big", "larger than 1 MB")):
            with pytest.raises(TransportError) as caught:
                asyncio.run(ask(name))
            assert caught.value.kind == "malformed" and words in str(caught.value), (name, caught.value)
        assert asyncio.run(ask("good-gzip")).choices[0].text == "caf\u00e9"
    finally:
        stop()
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.setenv(name, "http://bob:secret-pass@127.0.0.1:9/v1")
        with pytest.raises(InputError) as bad:
            HttpClient(None, 1)
        assert name in str(bad.value.problems[0].message) and "secret-pass" not in str(bad.value.problems[0])
        monkeypatch.delenv(name)


def test_a_request_takes_its_ticket_at_once_only_when_nobody_waits(monkeypatch):
    """Pacer.take hands a ticket without the lock when the window is open and no limit holds the request back, and
    never past a request waiting in acquire (first come first served); a request's tokens are counted only
    against a tpm limit."""
    from geval_spec.runner import pacing

    clock = [100.0]
    monkeypatch.setattr(pacing, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    body = {"messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 50}
    p = pacing.Pacer(None, None, concurrency=2, adaptive=False)
    first = p.take(body)
    assert first is not None and p.in_flight == 1
    assert p.take(body) is not None and p.take(body) is None  # the window (2) is full

    async def main() -> list[str]:
        order: list[str] = []

        async def waiter() -> None:
            ticket = await p.acquire(body)
            order.append("waiter")
            p.release(ticket)

        task = asyncio.ensure_future(waiter())
        await asyncio.sleep(0)  # the waiter is in acquire, waiting for room
        p.release(first)  # room for one: the waiter's, not a newcomer's
        assert p.take(body) is None
        await task
        order.append("newcomer" if p.take(body) is not None else "none")
        return order

    assert asyncio.run(main()) == ["waiter", "newcomer"]

    limited = pacing.Pacer(None, 6000, concurrency=4)  # 6,000 tokens a minute: 100 a second
    assert limited.take(body) is not None  # 100 + 50 tokens booked
    assert limited.tokens is not None and limited.tokens.next_at == pytest.approx(100.0 + 150 * 60 / 6000)
    assert limited.take(body) is None  # the next may start 1.5 s later
    clock[0] = 101.5
    assert limited.take(body) is not None


def test_a_model_s_entry_is_read_where_its_key_stands_as_decoding_the_whole_map_reads_it(monkeypatch):
    """costs reads one model's entry of litellm's cost map where its key stands (not the 3.5 MB map decoded
    whole: 33 ms of every run's start) only when the map can spell the key one way and holds it once, at the start
    of a line: the same entry json.loads gives, for every name of the installed map (whose entries are not all
    laid out alike: one stood at column 0, and was missed until a review found it) and names it lacks; the whole
    map decoded for a repeated key, a nested one, or a map with escapes."""
    text = costs._map_text()
    if text is not None:  # the installed map: every name it has, and names it lacks
        table = json.loads(text)
        for name in [*table, "no-such-model", "gpt-4.1-mini-no", "", 'a"b']:
            assert costs._entry(name) == table.get(name), name

    def use(map_text):
        monkeypatch.setattr(costs, "_map_text", lambda: map_text)
        costs._entry.cache_clear()
        costs._prices.cache_clear()
        costs._escapes.cache_clear()

    def same(map_text, *names):
        use(map_text)
        try:
            table = json.loads(map_text)
        except ValueError:  # (a damaged map prices nothing)
            table = {}
        for name in names:
            assert costs._entry(name) == table.get(name), (map_text, name)

    try:
        data = {"m": {"input_cost_per_token": 1.0, "note": 'say "n": 1'}, "x/m": {"a": [1, {"b": "}\n    }"}]},
                'q"uote': {"k": 2}, "\u00e9": {"k": 3}, "nested": {"m2": {"k": 4}}}
        laid_out = json.dumps(data, indent=4, ensure_ascii=False)  # (no escape: the keys are found where they stand)
        names = ("m", "x/m", 'q"uote', "\u00e9", "nested", "m2", "n", "k", "absent")
        same(laid_out, *names)
        same(laid_out[:-2] + ',\n"m": {"input_cost_per_token": 2.0}\n}', *names)  # repeated, the last at column 0
        same(laid_out[:-2] + ',\n"late":{"k": 5}\n}', "late", *names)  # at column 0, no space before the colon
        same(laid_out[:-2] + ',\n            "deep": {"k": 6}\n}', "deep", *names)  # a model's key indented deeply
        same(json.dumps(data), *names)  # on one line
        same(laid_out.replace('"x/m"', '"x\\/m"'), *names)  # an escape: decoded whole
        same(json.dumps(data, indent=4), *names)  # \\u escapes: decoded whole
        same('{\n    "m": {"k": ', "m")  # damaged: nothing, as decoding it whole gives
    finally:
        costs._entry.cache_clear()
        costs._prices.cache_clear()
        costs._escapes.cache_clear()


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="\\u/a\n", max_size=12))
def test_the_cost_maps_escape_check_is_the_two_substrings(text):
    """_escapes walks from backslash to backslash: it answers as asking for either pair does."""
    costs._escapes.cache_clear()
    try:
        assert costs._escapes(text) == ("\\u" in text or "\\/" in text)
    finally:
        costs._escapes.cache_clear()


@pytest.mark.parametrize("value", ["1e400", "inf", "-inf", "nan", "1e308"])
def test_a_rate_limit_header_too_large_for_a_count_is_no_count(value):
    """A server can say x-ratelimit-limit-requests: 1e400. int(float()) of it raised OverflowError out of the
    response's reading (an internal error); a count that is no whole number is unknown (None), as one that is not
    a number was."""
    info = rate_info({"x-ratelimit-limit-requests": value, "x-ratelimit-remaining-tokens": value,
                      "x-ratelimit-limit-tokens": "1000"})
    assert info is not None and info.limit_tokens == 1000
    if value == "1e308":
        assert info.limit_requests == int(1e308)
    else:
        assert info.limit_requests is None and info.remaining_tokens is None
