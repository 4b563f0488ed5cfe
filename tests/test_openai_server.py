"""The local OpenAI server behaves like a real provider: rate limits, secret echoes, usage details, model quirks,
and the Files + Batch APIs. Talks to it over HTTP only (urllib and aiohttp), as a client would."""

from __future__ import annotations

import asyncio
import json
import math
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from openai_batches import BatchConfig
from openai_server import FakeOpenAI, ServerConfig, format_duration, tokens_of

TESTS = Path(__file__).resolve().parent
SECRET = "Bearer sk-test-secret-7d1f"


@dataclass
class Reply:
    """One HTTP answer: status, headers (lower-case names) and raw body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """A minimal OpenAI API client on urllib; two instances share nothing but the server's URL."""

    def __init__(self, base_url: str, authorization: str = SECRET, extra_headers: dict[str, str] | None = None):
        self.base_url = base_url
        self.headers = {"Authorization": authorization, **(extra_headers or {})}

    def request(self, method: str, path: str, payload: Any = None, *, data: bytes | None = None,
                content_type: str = "application/json") -> Reply:
        if payload is not None:
            data = json.dumps(payload).encode()
        headers = {**self.headers, "Content-Type": content_type} if data is not None else self.headers
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return Reply(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read())
        except urllib.error.HTTPError as e:
            return Reply(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())

    def chat(self, body: dict[str, Any]) -> Reply:
        return self.request("POST", "/chat/completions", body)

    def upload(self, data: bytes, purpose: str | None = "batch") -> Reply:
        """``POST /files`` as multipart/form-data."""
        boundary = uuid.uuid4().hex
        parts = b""
        if purpose is not None:
            parts += f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n{purpose}\r\n'.encode()
        parts += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="input.jsonl"\r\n'
                  "Content-Type: application/jsonl\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        return self.request("POST", "/files", data=parts, content_type=f"multipart/form-data; boundary={boundary}")

    def submit(self, lines: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
        """Upload `lines` as a JSONL file and create a batch of them; the batch object."""
        uploaded = self.upload("".join(json.dumps(line) + "\n" for line in lines).encode())
        assert uploaded.status == 200, uploaded.body
        created = self.request("POST", "/batches", {"input_file_id": uploaded.json()["id"],
                                                     "endpoint": "/v1/chat/completions", "completion_window": "24h",
                                                     **params})
        assert created.status == 200, created.body
        return created.json()

    def batch(self, batch_id: str) -> dict[str, Any]:
        reply = self.request("GET", f"/batches/{batch_id}")
        assert reply.status == 200, reply.body
        return reply.json()

    def lines(self, file_id: str) -> list[dict[str, Any]]:
        reply = self.request("GET", f"/files/{file_id}/content")
        assert reply.status == 200, reply.body
        return [json.loads(line) for line in reply.body.decode().splitlines()]


def judge_body(i: int, model: str = "judge-small", **extra: Any) -> dict[str, Any]:
    """A request the default judge answers with score 1 + i % 5."""
    return {"model": model, "messages": [{"role": "system", "content": "You are a judge."},
                                         {"role": "user", "content": f"Candidate:\nSummary {i} [[score={1 + i % 5}]]"}],
            "logprobs": True, "top_logprobs": 3, "max_tokens": 20, **extra}


def batch_line(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def reset_seconds(value: str) -> float:
    """Parse an ``x-ratelimit-reset-*`` value ("120ms", "1.5s", "2m3s") back to seconds."""
    assert re.fullmatch(r"\d+ms|(\d+h)?(\d+m)?\d+(\.\d+)?s", value), value
    if value.endswith("ms"):
        return int(value[:-2]) / 1000
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)([hms])", value))


@pytest.fixture
def server(request):
    """A server with the ServerConfig given by ``@pytest.mark.parametrize('server', [cfg], indirect=True)``."""
    srv = FakeOpenAI(getattr(request, "param", None) or ServerConfig()).start()
    yield srv
    srv.stop()


def with_config(**kwargs: Any):
    return pytest.mark.parametrize("server", [ServerConfig(**kwargs)], indirect=True)


def test_format_duration_like_openai():
    assert [format_duration(s) for s in (0, 0.0004, 0.12, 1, 1.5, 123, 3600, 59.9999)] == \
        ["0s", "1ms", "120ms", "1s", "1.5s", "2m3s", "1h0m0s", "1m0s"]
    assert reset_seconds("2m3.5s") == 123.5 and reset_seconds("120ms") == 0.12


def test_plain_server_sends_no_rate_limit_headers_and_plain_usage(server):
    reply = Client(server.base_url).chat(judge_body(1))
    assert reply.status == 200
    assert not [h for h in reply.headers if h.startswith("x-ratelimit") or h.startswith("retry-after")]
    assert set(reply.json()["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


@with_config(rpm=30, burst_seconds=20)  # a bucket of 10 requests, refilled at 1 per 2 seconds
def test_burst_beyond_capacity_gets_429_with_sane_headers(server):
    async def burst() -> list[tuple[int, dict[str, str], dict]]:
        async with aiohttp.ClientSession() as session:
            async def one(i: int) -> tuple[int, dict[str, str], dict]:
                async with session.post(server.base_url + "/chat/completions", json=judge_body(i)) as r:
                    return r.status, {k.lower(): v for k, v in r.headers.items()}, await r.json()
            return await asyncio.gather(*(one(i) for i in range(25)))

    replies = asyncio.run(burst())
    ok = [r for r in replies if r[0] == 200]
    limited = [r for r in replies if r[0] == 429]
    assert len(ok) == 10 and len(limited) == 15
    assert sorted(int(h["x-ratelimit-remaining-requests"]) for _, h, _ in ok) == list(range(10))
    for _, headers, body in limited:
        assert headers["x-ratelimit-limit-requests"] == "30" and headers["x-ratelimit-remaining-requests"] == "0"
        wait_ms = int(headers["retry-after-ms"])
        assert 0 < wait_ms <= 2000 and headers["retry-after"] == str(math.ceil(wait_ms / 1000))
        assert 18 < reset_seconds(headers["x-ratelimit-reset-requests"]) <= 20
        assert body["error"]["code"] == "rate_limit_exceeded" and body["error"]["type"] == "requests"
        assert "Limit 30" in body["error"]["message"]
    assert server.state.statuses == {200: 10, 429: 15} and server.state.rate_limited == 15
    assert len(server.state.accepted_at) == 10


@with_config(rpm=1200, burst_seconds=0.25)  # 20 requests per second, a bucket of 5
def test_client_respecting_retry_after_is_paced_at_the_limit(server):
    client = Client(server.base_url)
    errors_per_request = []
    for i in range(20):
        errors = 0
        while (reply := client.chat(judge_body(i))).status == 429:
            errors += 1
            time.sleep(int(reply.headers["retry-after-ms"]) / 1000)
        assert reply.status == 200
        errors_per_request.append(errors)
    assert errors_per_request[:5] == [0] * 5  # the burst fits the bucket
    assert max(errors_per_request) == 1 and sum(errors_per_request) >= 5  # retried once, never twice
    times = server.state.accepted_at
    assert len(times) == 20
    # never more than the bucket plus what refilled, over any window
    for i in range(20):
        for j in range(i, 20):
            assert j - i + 1 <= 5 + 20 * (times[j] - times[i]) + 1e-6
    # and the hints are not too cautious: past the burst the client gets more than half the limit
    assert 15 / (times[-1] - times[4]) > 10


def assert_wait(reply: Reply, missing: tuple[float, float], rate: float, since: float) -> None:
    """`reply` is a 429 asking to wait until the tokens `missing` (at least, at most) refill at `rate` per
    second, less what refilled since the client sent its previous admitted request (at `since`)."""
    elapsed_ms = 1000 * (time.monotonic() - since)
    wait_ms = int(reply.headers["retry-after-ms"])
    assert reply.status == 429 and 1000 * missing[0] / rate - elapsed_ms - 1 <= wait_ms <= 1000 * missing[1] / rate + 1
    assert reply.headers["retry-after"] == str(math.ceil(wait_ms / 1000))


@with_config(tpm=6000)  # 100 tokens per second, a bucket of 100
def test_tpm_counts_prompt_and_max_tokens_times_n(server):
    client = Client(server.base_url)
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 38}], "max_tokens": 30}  # 10 + 30
    sent = time.monotonic()
    first = client.chat(body)
    assert first.status == 200 and first.headers["x-ratelimit-limit-tokens"] == "6000"
    assert "x-ratelimit-limit-requests" not in first.headers
    assert first.headers["x-ratelimit-remaining-tokens"] == "60"
    doubled = client.chat({**body, "n": 2})  # 10 + 2 x 30 = 70, with 60 left
    assert_wait(doubled, (10, 10), 100, sent)
    assert doubled.json()["error"]["type"] == "tokens"
    time.sleep(int(doubled.headers["retry-after-ms"]) / 1000)
    sent = time.monotonic()
    retried = client.chat({**body, "n": 2})
    left = int(retried.headers["x-ratelimit-remaining-tokens"])  # the bucket holds left .. left + 1 now
    assert retried.status == 200
    # more than the bucket but less than the minute's limit: admitted once the bucket is full, leaving a debt
    big = {**body, "max_tokens": 490}  # 500 tokens
    refused = client.chat(big)
    assert_wait(refused, (99 - left, 100 - left), 100, sent)
    time.sleep(int(refused.headers["retry-after-ms"]) / 1000)
    sent = time.monotonic()
    admitted = client.chat(big)
    assert admitted.status == 200 and admitted.headers["x-ratelimit-remaining-tokens"] == "0"
    assert reset_seconds(admitted.headers["x-ratelimit-reset-tokens"]) == 5.0  # from -400 back to 100
    after = client.chat(body)  # 40 tokens, with the bucket at -400
    assert_wait(after, (440, 440), 100, sent)
    # more than the per-minute limit can never fit: no retry hint
    too_large = client.chat({**body, "max_tokens": 7000})
    assert too_large.status == 429 and "retry-after-ms" not in too_large.headers
    assert too_large.json()["error"]["message"].startswith("Request too large for m")
    assert server.state.rate_limited == 4 and server.state.statuses[200] == 3


@with_config(echo_auth="401")
def test_echo_401_puts_the_whole_authorization_in_the_error(server):
    client = Client(server.base_url)
    for reply in (client.chat(judge_body(1)), client.request("GET", "/batches"), client.upload(b"{}\n")):
        assert reply.status == 401
        error = reply.json()["error"]
        assert error["code"] == "invalid_api_key" and f"Incorrect API key provided: {SECRET}." in error["message"]
    assert server.state.total == 1 and server.state.statuses == {401: 1} and server.state.ok == 0


@with_config(echo_auth="500")
def test_echo_500_puts_authorization_and_api_key_in_the_error(server):
    reply = Client(server.base_url, extra_headers={"api-key": "azure-key-91c3"}).chat(judge_body(1))
    assert reply.status == 500
    message = reply.json()["error"]["message"]
    assert SECRET in message and "azure-key-91c3" in message


@with_config(echo_auth="reasoning", batch=BatchConfig())
def test_echo_into_reasoning_online_and_in_batches(server):
    client = Client(server.base_url)
    reply = client.chat(judge_body(3))
    assert reply.status == 200
    choice = reply.json()["choices"][0]
    answer = json.loads(choice["message"]["content"])
    assert SECRET in answer["reasoning"] and answer["score"] == 4
    score_tokens = [e for e in choice["logprobs"]["content"] if len(e["top_logprobs"]) > 1]
    assert [e["token"].strip() for e in score_tokens] == ["4"]  # the score's alternatives are still there
    batch = client.submit([batch_line("a", judge_body(3))])
    done = client.batch(batch["id"])
    [line] = client.lines(done["output_file_id"])
    assert SECRET in json.loads(line["response"]["body"]["choices"][0]["message"]["content"])["reasoning"]


@with_config(cached_tokens="prefix", reasoning_tokens=7)
def test_prefix_cached_tokens_and_reasoning_tokens(server):
    client = Client(server.base_url)
    shared = "The rubric. " * 400  # 4800 characters: about 1200 tokens

    def usage(user: str, model: str = "m") -> dict[str, Any]:
        reply = client.chat({"model": model, "messages": [{"role": "system", "content": shared},
                                                          {"role": "user", "content": f"Candidate:\n{user}"}]})
        assert reply.status == 200
        content = reply.json()["choices"][0]["message"]["content"]
        return {**reply.json()["usage"], "content_tokens": len(tokens_of(content))}

    first = usage("one")
    assert first["prompt_tokens_details"] == {"cached_tokens": 0}
    assert first["prompt_tokens"] == (len(shared) + len("Candidate:\none")) // 4
    second = usage("two")  # shares ~4800 characters = 9 whole blocks of 128 tokens
    assert second["prompt_tokens_details"] == {"cached_tokens": 9 * 128}
    assert usage("two", model="other")["prompt_tokens_details"] == {"cached_tokens": 0}  # caches are per model
    short = {"model": "m", "messages": [{"role": "user", "content": "Candidate:\n" + "y" * 3000}]}
    for _ in range(2):  # repeated, but under 1024 tokens: never cached
        assert client.chat(short).json()["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert second["completion_tokens_details"] == {"reasoning_tokens": 7}
    assert second["content_tokens"] > 0 and second["completion_tokens"] == second["content_tokens"] + 7
    assert second["total_tokens"] == second["prompt_tokens"] + second["completion_tokens"]


@with_config(cached_tokens=0.5)
def test_cached_tokens_as_a_share(server):
    usage = Client(server.base_url).chat(judge_body(1)).json()["usage"]
    assert usage["prompt_tokens"] > 10
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] // 2
    assert "completion_tokens_details" not in usage


@with_config(no_logprobs_models=frozenset({"o-mini"}), fixed_temperature_models={"o-mini": 1.0})
def test_no_logprob_and_fixed_temperature_models(server):
    client = Client(server.base_url)
    plain = client.chat(judge_body(1, temperature=0))
    assert plain.status == 200 and plain.json()["choices"][0]["logprobs"] is not None
    odd = client.chat(judge_body(1, model="o-mini", temperature=1, reasoning_effort="low", top_p=0.9))
    assert odd.status == 200 and odd.json()["choices"][0]["logprobs"] is None
    assert client.chat(judge_body(1, model="o-mini")).status == 200  # no temperature: the default is fine
    refused = client.chat(judge_body(1, model="o-mini", temperature=0.0))
    assert refused.status == 400
    error = refused.json()["error"]
    assert error["param"] == "temperature" and error["code"] == "unsupported_value"
    assert error["message"].startswith("Unsupported value: 'temperature' does not support 0.0 with this model")
    assert server.state.extra_params[1] == {"reasoning_effort": "low", "top_p": 0.9}
    assert server.state.extra_params[0] == {} and server.state.statuses == {200: 3, 400: 1}


@with_config(fixed_temperature_models={"o-mini": 1.0},
             batch=BatchConfig(clock="polls", validating=1, in_progress=2, finalizing=1, fail_ids=frozenset({"c2"})))
def test_batch_lifecycle_matches_online_answers(server):
    client = Client(server.base_url)
    bodies = {f"c{i}": judge_body(i) for i in range(4)}
    bodies["c4"] = judge_body(4, model="o-mini", temperature=0)  # the online endpoint refuses this one
    batch = client.submit([batch_line(cid, body) for cid, body in bodies.items()], metadata={"run": "r1"})
    assert batch["status"] == "validating" and batch["metadata"] == {"run": "r1"}
    assert batch["request_counts"] == {"total": 5, "completed": 0, "failed": 0}
    polls = [client.batch(batch["id"]) for _ in range(4)]
    assert [p["status"] for p in polls] == ["in_progress", "in_progress", "finalizing", "completed"]
    assert [p["request_counts"]["completed"] + p["request_counts"]["failed"] for p in polls] == [0, 2, 5, 5]
    done = polls[-1]
    assert done["request_counts"] == {"total": 5, "completed": 3, "failed": 2}
    assert done["completed_at"] >= done["in_progress_at"] >= batch["created_at"]
    assert server.state.total == 0  # a batch is not online traffic

    outputs = {line["custom_id"]: line for line in client.lines(done["output_file_id"])}
    assert set(outputs) == {"c0", "c1", "c3"}
    for cid, line in outputs.items():
        assert line["error"] is None and line["id"].startswith("batch_req_")
        assert line["response"]["status_code"] == 200 and line["response"]["request_id"].startswith("req_")
        assert line["response"]["body"] == client.chat(bodies[cid]).json()
    errors = {line["custom_id"]: line for line in client.lines(done["error_file_id"])}
    assert set(errors) == {"c2", "c4"}
    assert errors["c2"]["response"]["status_code"] == 500 and errors["c2"]["error"] is None
    assert errors["c4"]["response"]["status_code"] == 400
    assert errors["c4"]["response"]["body"] == client.chat(bodies["c4"]).json()
    meta = client.request("GET", f"/files/{done['output_file_id']}").json()
    assert meta["purpose"] == "batch_output" and meta["object"] == "file"


@with_config(batch=BatchConfig(fail_fraction=0.5, error_shape="error"))
def test_fraction_of_failures_is_deterministic_and_error_shape(server):
    client = Client(server.base_url)
    lines = [batch_line(f"case-{i}", judge_body(i)) for i in range(40)]

    def failed_ids() -> set[str]:
        done = client.batch(client.submit(lines)["id"])
        assert done["status"] == "completed"
        errors = client.lines(done["error_file_id"])
        assert all(e["response"] is None and e["error"]["code"] == "server_error" and e["error"]["message"]
                   for e in errors)
        assert done["request_counts"]["failed"] == len(errors)
        return {e["custom_id"] for e in errors}

    first = failed_ids()
    assert 8 <= len(first) <= 32 and failed_ids() == first


def test_invalid_input_file_fails_the_batch(server):
    client = Client(server.base_url)
    good = json.dumps(batch_line("a", judge_body(1)))
    data = "\n".join([good, "{not json", good, json.dumps({**batch_line("b", judge_body(2)), "url": "/v1/embeddings"})])
    file_id = client.upload(data.encode()).json()["id"]
    created = client.request("POST", "/batches", {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                                  "completion_window": "24h"}).json()
    failed = client.batch(created["id"])
    assert failed["status"] == "failed" and failed["output_file_id"] is None and failed["failed_at"]
    assert [(e["code"], e["line"]) for e in failed["errors"]["data"]] == [
        ("invalid_json_line", 2), ("duplicate_custom_id", 3), ("mismatched_endpoint", 4)]
    bad_window = client.request("POST", "/batches", {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                                     "completion_window": "1h"})
    assert bad_window.status == 400 and bad_window.json()["error"]["param"] == "completion_window"
    missing = client.request("POST", "/batches", {"input_file_id": "file-nope", "endpoint": "/v1/chat/completions",
                                                  "completion_window": "24h"})
    assert missing.status == 404


def test_files_upload_get_content_delete(server):
    client = Client(server.base_url)
    data = b'{"custom_id": "a"}\n'
    uploaded = client.upload(data).json()
    assert uploaded["id"].startswith("file-") and uploaded["bytes"] == len(data) and uploaded["purpose"] == "batch"
    assert client.request("GET", f"/files/{uploaded['id']}").json() == uploaded
    assert client.request("GET", f"/files/{uploaded['id']}/content").body == data
    assert client.request("DELETE", f"/files/{uploaded['id']}").json()["deleted"] is True
    assert client.request("GET", f"/files/{uploaded['id']}").status == 404
    assert client.upload(data, purpose=None).status == 400


@with_config(batch=BatchConfig(clock="polls", in_progress=4))
def test_cancel_keeps_what_was_answered(server):
    client = Client(server.base_url)
    batch = client.submit([batch_line(f"c{i}", judge_body(i)) for i in range(4)])
    assert client.batch(batch["id"])["request_counts"]["completed"] == 1  # 1 of 4 polls into in_progress
    cancelling = client.request("POST", f"/batches/{batch['id']}/cancel").json()
    assert cancelling["status"] == "cancelling" and cancelling["cancelling_at"]
    cancelled = client.batch(batch["id"])
    assert cancelled["status"] == "cancelled" and cancelled["request_counts"] == {"total": 4, "completed": 1,
                                                                                  "failed": 0}
    assert [line["custom_id"] for line in client.lines(cancelled["output_file_id"])] == ["c0"]
    again = client.request("POST", f"/batches/{batch['id']}/cancel")
    assert again.status == 409 and "cancelled" in again.json()["error"]["message"]


@with_config(batch=BatchConfig(clock="polls", in_progress=1))  # one poll would complete a batch
def test_listing_is_newest_first_and_pages(server):
    client = Client(server.base_url)
    ids = [client.submit([batch_line("a", judge_body(i))])["id"] for i in range(3)]
    page = client.request("GET", "/batches?limit=2").json()
    assert [b["id"] for b in page["data"]] == ids[::-1][:2] and page["has_more"] is True
    assert page["first_id"] == ids[2] and page["last_id"] == ids[1]
    rest = client.request("GET", f"/batches?limit=2&after={page['last_id']}").json()
    assert [b["id"] for b in rest["data"]] == [ids[0]] and rest["has_more"] is False
    assert all(b["status"] == "in_progress" for b in page["data"] + rest["data"])  # listing is not a poll
    assert client.request("GET", "/batches?limit=0").status == 400


SUBMITTER = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from test_openai_server import Client, batch_line, judge_body
client = Client(sys.argv[1])
batch = client.submit([batch_line(f"c{i}", judge_body(i)) for i in range(3)])
print(batch["id"], flush=True)
time.sleep(60)
"""


@with_config(batch=BatchConfig(clock="polls", in_progress=2))  # it cannot complete before it is polled
def test_a_new_client_retrieves_the_batch_of_a_killed_one(server):
    proc = subprocess.Popen([sys.executable, "-c", SUBMITTER, server.base_url, str(TESTS)], stdout=subprocess.PIPE,
                            text=True)
    try:
        batch_id = proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert batch_id.startswith("batch_")
    client = Client(server.base_url)  # a fresh client that never saw the submission
    assert batch_id in [b["id"] for b in client.request("GET", "/batches").json()["data"]]
    assert [client.batch(batch_id)["status"] for _ in range(2)] == ["in_progress", "completed"]
    batch = client.batch(batch_id)
    assert batch["request_counts"] == {"total": 3, "completed": 3, "failed": 0}
    lines = client.lines(batch["output_file_id"])
    assert [line["custom_id"] for line in lines] == ["c0", "c1", "c2"]
    assert lines[2]["response"]["body"] == client.chat(judge_body(2)).json()


def test_standalone_server_takes_rate_limit_flags():
    proc = subprocess.Popen([sys.executable, str(TESTS / "openai_server.py"), "--rpm", "6", "--burst-seconds", "20"],
                            stdout=subprocess.PIPE, text=True)  # a bucket of 2 requests, refilled every 10 s
    try:
        port = int(proc.stdout.readline().split()[1])
        client = Client(f"http://127.0.0.1:{port}/v1")
        statuses = [client.chat(judge_body(i)).status for i in range(3)]
        stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats", timeout=10).read())
    finally:
        proc.kill()
        proc.wait(10)
    assert statuses == [200, 200, 429]
    assert stats["statuses"] == {"200": 2, "429": 1} and stats["rate_limited"] == 1 and len(stats["accepted_at"]) == 2


@with_config(fault_rate=1.0, faults=("timeout",), timeout_sleep=0.4)
def test_a_late_answer_to_a_client_that_gave_up_is_not_counted_ok(server):
    request = urllib.request.Request(server.base_url + "/chat/completions", data=json.dumps(judge_body(1)).encode(),
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(TimeoutError):
        urllib.request.urlopen(request, timeout=0.1)
    deadline = time.monotonic() + 5
    while not server.state.statuses and time.monotonic() < deadline:  # the server answers after 0.4 s
        time.sleep(0.02)
    assert server.state.statuses == {200: 1} and server.state.total == 1 and server.state.faults == {"timeout": 1}
    assert server.state.ok == 0 and not server.state.ok_by_hash
