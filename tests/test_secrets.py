"""No secret at rest or on screen: a judge that echoes the API key puts it in no file and no output.

The local OpenAI server echoes the Authorization (and api-key) header in a 401
body, in a 500 body, or in the judge's own reasoning. With OPENAI_API_KEY set,
each spec is run through both clients; then every file geval-spec wrote (the
DuckDB store, the journal folder, an exported cassette, every report format,
the JUnit file) and everything it printed is searched for the key.
"""

from __future__ import annotations

import pytest

from conftest import cli
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig

KEY = "sk-test-echoed-key-9a8b7c6d5e4f"


def leaks(root, outputs: list[str]) -> list[str]:
    found = [f"output {i}" for i, text in enumerate(outputs) if KEY in text]
    for path in root.rglob("*"):  # the store, the journal folder, the cassette, reports, JUnit files
        if path.is_file() and KEY.encode() in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


@pytest.mark.parametrize("client", ["litellm", "openai-http"])
@pytest.mark.parametrize("echo", ["401", "500", "reasoning"])
def test_an_echoed_key_is_stored_and_printed_nowhere(tmp_path, monkeypatch, client, echo):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(ServerConfig(echo_auth=echo)) as server:
        root = make_project(tmp_path / "p", server.base_url, n=4, client=client, max_retries=1)
        run = cli("run", "demo", "--backoff", "0", "--retry-budget", "20", "--junit", "junit.xml", cwd=root)
    outputs = [run.out, run.err]
    assert run.code in ((0, 1) if echo == "reasoning" else (1, 3)), run.err  # 401 is exit 3; 500: see the runner
    run_id = run.out.strip().splitlines()[-1] if run.code in (0, 1) else None
    if echo == "401":
        assert "401" in run.err and "[redacted]" in run.err
    if echo == "reasoning":  # the answers are valid: masking the key kept the scores readable
        assert "4 valid" in run.out, run.out
        exported = cli("export", run_id, "--cassette", "c.jsonl", cwd=root)
        assert exported.code == 0, exported.err
        outputs += [exported.out, exported.err]
    report = cli("report", "demo", "--format", "all", "--exit-zero", "--junit", "report-junit.xml", cwd=root)
    outputs += [report.out, report.err]
    if run_id is not None:
        assert report.code == 0, report.err
        assert (root / "reports" / "demo" / "report.html").is_file() and (root / "report-junit.xml").is_file()
    assert (root / ".geval" / "results.duckdb").is_file()
    assert not leaks(root, outputs), leaks(root, outputs)


def test_the_key_is_sent_and_answers_stay_readable(tmp_path, monkeypatch):
    """Control: redaction does not stop the key from being sent, nor change clean answers."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(ServerConfig()) as server:
        root = make_project(tmp_path, server.base_url, n=4, client="openai-http")
        res = cli("run", "demo", cwd=root)
    assert res.code == 0 and "4 valid" in res.out, res.err + res.out


def test_a_key_echoed_without_its_public_prefix_is_redacted():
    """A server that echoed the key without its ``sk-`` got it stored as it was: the prefix is public, the rest is
    the secret."""
    from geval_spec.redact import redact, secret_values

    env = [("OPENAI_API_KEY", "sk-testsecretkey1234567890abcdef"), ("GROQ_API_KEY", "gsk_abcdefghijklmnop9876"),
           ("ANTHROPIC_API_KEY", "sk-ant-api03-Zyxwvutsrqponmlk42"), ("SHORT_TOKEN", "sk-cdefghijkl"),
           ("PLAIN_PASSWORD", "hunter2hunter2"), ("GOOGLE_APPLICATION_CREDENTIALS", "my-gcp-project-credentials.json"),
           ("DB_PASSWORD", "correct-horse-battery-staple")]
    values = secret_values(env)
    assert {"testsecretkey1234567890abcdef", "abcdefghijklmnop9876", "Zyxwvutsrqponmlk42"} <= set(values)
    assert "cdefghijkl" not in values  # too short to be a secret of its own: ordinary words would be masked
    # only a provider's public prefix is taken off: a value's first words are no prefix
    assert "credentials.json" not in values and "horse-battery-staple" not in values
    text = ("echo: testsecretkey1234567890abcdef and abcdefghijklmnop9876 and Zyxwvutsrqponmlk42 and cdefghijkl and "
            "hunter2hunter2; see credentials.json, a horse-battery-staple phrase")
    assert redact(text, values) == ("echo: [redacted] and [redacted] and [redacted] and cdefghijkl and [redacted]; "
                                    "see credentials.json, a horse-battery-staple phrase")
