"""Safe to run a spec from someone else's pull request: what tests/test_hostile.py does not cover.

Templates read from git revisions stay in the project; the limits are
configurable through the environment; ordinary templates still render in the
limited sandbox; a variable the built-in template needs points at data.fields;
redaction keeps logprob tokens aligned with the redacted text.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import cli, git
from e2e_helpers import make_project
from geval_spec.errors import InputError, Problem
from geval_spec.files import prepare_output
from geval_spec.judge.clients.base import redact_body
from geval_spec.redact import redact, url_credentials

DEAD = "http://127.0.0.1:9/v1"


def project(tmp_path: Path, template: str | None = None, **files: str) -> Path:
    root = make_project(tmp_path / "proj", DEAD, n=4)
    spec = root / "specs" / "demo.yaml"
    if template is not None:
        spec.write_text(spec.read_text().replace("scoring:\n", f"prompt:\n  template: {template}\nscoring:\n"))
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def commit(root: Path) -> None:
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "spec")


# -- templates at a git revision -------------------------------------------------------------------
def test_template_at_a_revision_cannot_climb_out_of_the_repository(tmp_path):
    root = project(tmp_path, "../../../outside.j2")
    (tmp_path / "outside.j2").write_text("OUTSIDE {{ candidate }}{{ source }}\n")
    commit(root)
    for ref in ("demo@HEAD", "demo"):
        res = cli("render", ref, cwd=root)
        assert res.code == 2 and "outside the project" in res.err and "OUTSIDE" not in res.out, ref


def test_template_link_at_a_revision_is_refused(tmp_path):
    root = project(tmp_path, "templates/t.j2")
    (root / "specs" / "templates").mkdir()
    (root / "specs" / "templates" / "t.j2").symlink_to("../data/cases.jsonl")  # inside, but a link
    commit(root)
    res = cli("validate", "demo@HEAD", cwd=root)
    assert res.code == 2 and "symbolic link" in res.err


def test_include_at_a_revision_reads_the_revision_inside_the_project(tmp_path):
    root = project(tmp_path, "templates/t.j2", **{
        "specs/templates/t.j2": "{{ candidate }}{{ source }}\n{% include 'part.j2' %}\n",
        "specs/templates/part.j2": "PART AT HEAD\n"})
    commit(root)
    (root / "specs" / "templates" / "part.j2").write_text("PART IN THE WORKING TREE\n")
    assert "PART AT HEAD" in cli("render", "demo@HEAD", cwd=root).out
    assert "PART IN THE WORKING TREE" in cli("render", "demo", cwd=root).out


# -- limits, and how to change them ----------------------------------------------------------------
def test_render_size_limit_is_configurable(tmp_path, monkeypatch):
    root = project(tmp_path)
    assert cli("validate", "demo", cwd=root).code == 0
    monkeypatch.setenv("GEVAL_RENDER_MAX_BYTES", "200")
    res = cli("validate", "demo", cwd=root)
    assert res.code == 2 and "GEVAL_RENDER_MAX_BYTES" in res.err and "case 'c000'" in res.err
    monkeypatch.setenv("GEVAL_RENDER_MAX_BYTES", "lots")
    res = cli("validate", "demo", cwd=root)
    assert res.code == 2 and "must be a positive number" in res.err


def test_render_time_limit_is_configurable(tmp_path, monkeypatch):
    loops = "{% set r = range(3000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}"
    root = project(tmp_path, "templates/slow.j2", **{"specs/templates/slow.j2": "{{ candidate }}{{ source }}" + loops})
    monkeypatch.setenv("GEVAL_RENDER_TIMEOUT", "0.2")
    res = cli("render", "demo", cwd=root)
    assert res.code == 2 and "longer than 0.2 seconds" in res.err and "slow.j2" in res.err
    monkeypatch.setenv("GEVAL_RENDER_TIMEOUT", "60")
    assert cli("render", "demo", cwd=root).code == 0


def test_read_limits_are_configurable(tmp_path, monkeypatch):
    root = project(tmp_path)
    monkeypatch.setenv("GEVAL_MAX_READ_BYTES", "100")
    res = cli("validate", "demo", cwd=root)
    assert res.code == 2 and "too large" in res.err and "GEVAL_MAX_READ_BYTES" in res.err
    monkeypatch.setenv("GEVAL_MAX_READ_BYTES", "1M")
    monkeypatch.setenv("GEVAL_MAX_LINE_BYTES", "50")
    res = cli("validate", "demo", cwd=root)
    assert res.code == 2 and "line 1 of the data file is too long" in res.err


def test_data_outside_the_project_is_refused(tmp_path):
    root = project(tmp_path)
    (tmp_path / "elsewhere.jsonl").write_text((root / "specs" / "data" / "cases.jsonl").read_text())
    spec = root / "specs" / "demo.yaml"
    spec.write_text(spec.read_text().replace("path: data/cases.jsonl", "path: ../../elsewhere.jsonl"))
    res = cli("validate", "demo", cwd=root)
    assert res.code == 2 and "outside the project" in res.err and "[data.path]" in res.err


@pytest.mark.parametrize("text", [
    "{{ '{:>8}'.format(candidate) }} {{ source|center(30) }} {{ '%5.2f' % 3.14159 }}",
    "{{ ([1, 2] + [3])|join(',') }} {{ candidate ~ '!' }} {{ 'ab' * 3 }} {{ 2 ** 10 }} {{ source|replace('S', 's') }}",
    "{% set ns = namespace(s='') %}{% for s in steps %}{% set ns.s = ns.s ~ s %}{% endfor %}{{ ns.s }}{{ candidate }}"
    "{{ source }}",
])
def test_ordinary_templates_render_in_the_limited_sandbox(tmp_path, text):
    root = project(tmp_path, "templates/t.j2", **{"specs/templates/t.j2": text + "{{ candidate }}{{ source }}\n"})
    res = cli("render", "demo", cwd=root)
    assert res.code == 0, res.err


def test_a_variable_the_builtin_template_needs_points_at_data_fields(tmp_path):
    root = project(tmp_path)
    spec = root / "specs" / "demo.yaml"
    spec.write_text(spec.read_text().replace("fields: {source: src, candidate: cand}", "fields: {source: src, answer: cand}"))
    res = cli("validate", "demo", cwd=root)
    line = next(n for n, t in enumerate(spec.read_text().splitlines(), 1) if "fields:" in t)
    assert res.code == 2 and f"specs/demo.yaml:{line}:" in res.err
    assert "the built-in G-Eval template needs `candidate`: map a column to it under data.fields" in res.err


def test_a_column_of_any_name_maps_onto_a_builtin_variable(tmp_path):
    root = project(tmp_path)
    data = root / "specs" / "data" / "cases.jsonl"
    data.write_text(data.read_text().replace('"cand"', '"summary text"'))
    spec = root / "specs" / "demo.yaml"
    spec.write_text(spec.read_text().replace("candidate: cand", "candidate: summary text"))
    res = cli("render", "demo", cwd=root)
    assert res.code == 0 and "Summary 0" in res.out, res.err


def test_unknown_verdict_level_on_a_verdicts_spec(tmp_path):
    root = make_project(tmp_path / "proj", DEAD, n=2, method="verdicts")
    f = tmp_path / "v.jsonl"
    f.write_text(json.dumps({"case_id": "c000", "verdicts": [{"statement": "s", "verdict": "maybe"}]}) + "\n")
    res = cli("import", "demo", str(f), cwd=root)
    assert res.code == 2 and "unknown verdict 'maybe'" in res.err and f"{f}:1:" in res.err


# -- redaction and output paths ---------------------------------------------------------------------
def test_redaction_keeps_logprob_tokens_aligned(monkeypatch):
    key = "sk-aligned-secret-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    content = f'{{"reasoning": "seen Authorization: Bearer {key} here", "score": 4}}'
    tokens = [content[i:i + 3] for i in range(0, len(content), 3)]
    body = {"choices": [{"message": {"content": content}, "logprobs": {"content": [
        {"token": t, "logprob": -0.1, "bytes": list(t.encode()), "top_logprobs": [{"token": t, "logprob": -0.1}]}
        for t in tokens]}}]}
    out = redact_body(body)
    choice = out["choices"][0]
    assert choice["message"]["content"] == redact(content) and key not in json.dumps(out)
    assert "".join(t["token"] for t in choice["logprobs"]["content"]) == choice["message"]["content"]
    assert body["choices"][0]["message"]["content"] == content  # the input is not changed
    assert out["choices"][0]["logprobs"] is not body["choices"][0]["logprobs"]


def test_a_secret_in_a_tokens_alternative_is_masked_though_no_chosen_token_spells_it(monkeypatch):
    """A server answers anything in top_logprobs: an alternative that holds the key (or a key's shape) is stored
    redacted, without its bytes; the chosen tokens, the score's alternatives and the other tokens are kept."""
    key = "sk-echoed-as-an-alternative-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    score = {"token": "4", "logprob": -0.1, "bytes": [52],
             "top_logprobs": [{"token": "4", "logprob": -0.1, "bytes": [52]},
                              {"token": "3", "logprob": -2.5, "bytes": [51]}]}
    leaky = {"token": " is", "logprob": -0.1, "bytes": list(b" is"),
             "top_logprobs": [{"token": " is", "logprob": -0.1, "bytes": list(b" is")},
                              {"token": f" {key}", "logprob": -9.0, "bytes": list(f" {key}".encode())},
                              {"token": "ghp_" + "a" * 36, "logprob": -9.5, "bytes": None}]}
    body = {"choices": [{"message": {"content": "score is 4"}, "logprobs": {"content": [
        {"token": "score", "logprob": -0.1, "bytes": list(b"score")}, leaky, score]}}]}
    out = redact_body(body)
    assert "echoed" not in json.dumps(out) and "ghp_" not in json.dumps(out) and key in json.dumps(body)
    tokens = out["choices"][0]["logprobs"]["content"]
    assert [t["token"] for t in tokens] == ["score", " is", "4"] and tokens[2] is score
    assert tokens[1]["top_logprobs"][0] is leaky["top_logprobs"][0]
    assert tokens[1]["top_logprobs"][1] == {"token": " [redacted]", "logprob": -9.0, "bytes": None}
    assert tokens[1]["top_logprobs"][2]["token"] == "[redacted]"


def test_a_secret_echoed_as_a_key_is_masked_at_every_level(monkeypatch):
    """A server may echo the key anywhere, keys of the body, of a choice and of its logprobs included."""
    key = "sk-echoed-as-a-key-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    body = {key: 1, "choices": [{key: 2, "message": {key: "x", "content": "4"},
                                 "logprobs": {key: 3, "content": [{"token": "4", "logprob": -0.1}]}}]}
    out = redact_body(body)
    assert "echoed" not in json.dumps(out) and key in json.dumps(body)  # the input is not changed
    assert out["choices"][0]["logprobs"]["content"] == body["choices"][0]["logprobs"]["content"]


_KEY = "sk-screened-body-0123456789"
_PIECES = ["a", "score", "4", " ", ":", "Bearer ", "Authorization: ", "api_key=", "https://u:p@h/", _KEY[:9],
           _KEY[9:], _KEY, "\x00", "\ud800", "é", "\u0130", "\n", "sk-", "hf_" + "x" * 20, "token"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=4).map("".join)
_JSON = st.recursive(st.one_of(st.none(), st.integers(), _TEXT),
                     lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
                     max_leaves=8)
_TOKEN = st.one_of(st.fixed_dictionaries({"token": _TEXT, "logprob": st.just(-0.1)},
                                         optional={"top_logprobs": st.lists(st.fixed_dictionaries(
                                             {"token": _TEXT, "logprob": st.just(-1.0)}), max_size=2)}), _JSON)
_CHOICE = st.one_of(st.fixed_dictionaries(
    {"message": st.fixed_dictionaries({"content": _TEXT})},
    optional={"logprobs": st.one_of(st.fixed_dictionaries({"content": st.lists(_TOKEN, max_size=6)}), _JSON),
              "finish_reason": _TEXT}), _JSON)
_BODY = st.fixed_dictionaries({"choices": st.one_of(st.lists(_CHOICE, max_size=2), _JSON)},
                              optional={"id": _TEXT, "model": _TEXT, "usage": _JSON, "x": _JSON})


_TOKENS = {"content": [{"token": _KEY[:9], "logprob": -0.1}, {"token": _KEY[9:], "logprob": -0.1}]}


@settings(max_examples=400, deadline=None)
@given(_BODY, st.dictionaries(_TEXT, _JSON, max_size=2), st.dictionaries(_TEXT, _JSON, max_size=2))
@example({"choices": [{"message": {"content": "4"}, "logprobs": {"content": []}}]}, {}, {_KEY: 1})
@example({"choices": [{_KEY: 1, "message": {"content": "4"}}]}, {}, {})
@example({"choices": [{"message": {"content": "4"}, "logprobs": _TOKENS}]}, {}, {})
@example({"choices": [{"message": {"content": "4"}, "logprobs": {"content": [{"token": "a"}], "x": [_KEY]}}]}, {},
         {})
@example({"choices": [{"message": {"content": "4"}}], "usage": {"n": [{"a": "Bearer abcdefghij"}]}}, {_KEY: 1}, {})
@example({"choices": [{"message": {"content": "\ud800"}}]}, {}, {})
@example({"choices": [{"message": {"content": ""}, "logprobs": {"content": [  # no token inside a masked span
    {"token": "Authorization: a", "logprob": -0.1}, None, {"token": "a", "logprob": -0.1}]}}]}, {}, {})
def test_a_body_screened_in_one_search_is_redacted_as_text_by_text(body, extra, in_logprobs):
    """redact_body asks one search over all of a body's texts whether anything needs masking; wherever a secret
    stands (values, keys at every level, chosen tokens spelling it across their boundaries, lone surrogates),
    the answer is the body redacted text by text, and the very body when that masks nothing."""
    from geval_spec.judge.clients.base import _masked_body
    from geval_spec.redact import secret_values

    body = {**extra, **body}
    for choice in body["choices"] if isinstance(body["choices"], list) else []:
        if isinstance(choice, dict) and isinstance(choice.get("logprobs"), dict):
            choice["logprobs"] = {**in_logprobs, **choice["logprobs"]}
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = _KEY
    try:
        expected = _masked_body(body, secret_values())
        out = redact_body(body)
    finally:
        if old is None:
            del os.environ["OPENAI_API_KEY"]
        else:
            os.environ["OPENAI_API_KEY"] = old
    assert out == expected and (out is body) == (expected is body)


def test_a_body_with_nothing_to_mask_is_kept_as_received(monkeypatch):
    """Stored once, as received: no second encoding when redaction masked nothing (escapes and spacing kept)."""
    from geval_spec.judge.clients.base import completion_from_openai

    monkeypatch.setenv("OPENAI_API_KEY", "sk-kept-as-received-0123456789")
    text = ('{"id":"c1",  "choices":[{"message":{"role":"assistant","content":"caf\\u00e9 \\/ 4"},'
            '"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}')
    parsed = json.loads(text)
    done = completion_from_openai(parsed, "gpt-4.1-mini", 1.0, text=text)
    assert done.body_text() == text and done.choices[0].text == "café / 4"
    assert done.raw is parsed  # nothing masked: not copied
    leaked = text.replace("caf", "sk-kept-as-received-0123456789 caf")
    masked = completion_from_openai(json.loads(leaked), "gpt-4.1-mini", 1.0, text=leaked)
    assert masked.raw_text is None and "sk-kept" not in masked.body_text()
    assert json.loads(masked.body_text())["choices"][0]["message"]["content"] == "[redacted] café / 4"


@pytest.mark.parametrize("url, bad", [
    ("http://127.0.0.1:8000/v1", False), ("https://api.example.org/v1?api-version=2024-06-01", False),
    ("https://user:pw@api.example.org/v1", True), ("https://token@api.example.org", True),
    ("https://api.example.org/v1?key=abc", True), ("https://api.example.org/v1?access_token=abc", True),
])
def test_url_credentials(url, bad):
    reason = url_credentials(url)
    assert (reason is not None) == bad
    assert reason is None or "pw" not in reason and "abc" not in reason


def test_prepare_output_makes_folders_and_refuses_files_in_the_way(tmp_path):
    target = tmp_path / "a" / "b" / "report.md"
    assert prepare_output(target) == target and target.parent.is_dir() and not target.exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError) as info:
        prepare_output(tmp_path / "file" / "sub" / "x.md")
    assert "is a file, not a directory" in info.value.problems[0].message
    if os.geteuid() != 0:
        (tmp_path / "ro").mkdir(mode=0o500)
        with pytest.raises(InputError, match="permission"):
            prepare_output(tmp_path / "ro" / "x.md")


def test_problems_never_print_a_secret_or_a_huge_line(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value-123456")
    p = Problem("the key sk-ant-secret-value-123456 was refused", file="f.txt", line=2,
                source="first\nurl: https://u:sk-ant-secret-value-123456@h/v1 " + "x" * 100_000 + "\n")
    text = p.headline() + p.excerpt()
    assert "secret-value" not in text and len(text) < 1000


SECRETISH = ["Authorization: Bearer abcdefgh123", "x-api-key=zzzzzzzzzz", "sk-" + "a" * 20, "AIza" + "b" * 31,
             "https://user:pw@host/x", "?api_key=123&x=1", "authorİzation: xyz", "AUTHORIZATION:\nq",
             "hf_" + "c" * 20, "bearer   toolongtoken", "s3cr3t-value-xyz", "https://h/p;token=1", "ghp_" + "d" * 20,
             "ghs_" + "e" * 30, "gho_" + "f" * 20, "ghu_" + "g" * 20, "ghr_" + "h" * 20]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SECRETISH), st.text(max_size=12),
                          st.sampled_from([" ", "\n", ":", "=", "'", '"', "&", "?", "@", "://", "-", "_"])),
                max_size=8).map("".join))
def test_the_one_pass_screen_finds_a_secret_exactly_when_a_pattern_does(text):
    """secret_spans first asks one alternation whether any secret pattern matches; it must answer exactly as the
    patterns themselves (a 'no' skips them)."""
    from geval_spec import redact as r

    values = ("s3cr3t-value-xyz",)
    patterns = (r._HEADER, r._BEARER, r._URL_USERINFO, r._QUERY_SECRET, r._KEY_SHAPES, r._values_pattern(values))
    any_pattern = any(rx.search(text) for rx in patterns)
    assert (r._screen(values).search(text) is not None) == any_pattern
    assert bool(r.secret_spans(text, values)) == any_pattern


_FOLDED_SECRETISH = SECRETISH + ["gsk_" + "e" * 20, "xai-" + "f" * 20, "r8_" + "g" * 20, "github_pat_" + "h" * 22,
                                 "x-api-\u212aey: abcdefgh", "Bearer\u00a0abcdefgh123", "AUTHORIZATION=zz",
                                 "?acce\u017f\u017f_token=1", "\u0130\u0130api_key=2", "auth\u0131ri\u017eation: q",
                                 "sig=3", "SIGNATURE=4", "&passwd=5", "ftp://u:p@h", "QUOTE\"D-SECRET",
                                 "api_key: abcdef12", "APIKEY: q1w2e3r4", "x-goog-api-key: zz", "Api-Key: 1"]


def _recased(text: str, flips: list[bool]) -> str:
    folds = {"i": "\u0130", "s": "\u017f", "k": "\u212a"}
    out = []
    for ch, flip in zip(text, flips + [False] * len(text)):
        if flip and ch.lower() in folds:
            out.append(folds[ch.lower()])
        else:
            out.append(ch.swapcase() if flip else ch)
    return "".join(out)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_FOLDED_SECRETISH), st.text(max_size=12),
                          st.sampled_from([" ", "\n", ":", "=", "'", '"', "&", "?", "@", "://", "-", "_"])),
                max_size=8).map("".join), st.lists(st.booleans(), max_size=64))
def test_the_substring_screen_never_misses_a_secret(text, flips):
    """secret_spans skips the patterns for a long text that lacks every substring a match needs: whatever the
    case (and the characters beyond ASCII that a pattern ignoring case reads as letters), no text a pattern
    matches may be skipped."""
    from geval_spec import redact as r

    values = ("s3cr3t-value-xyz",)
    for variant in (text, _recased(text, flips)):
        if r._screen(values).search(variant) is not None:
            assert r.may_hold_secret(variant, values), variant


def test_the_case_folds_are_all_the_letters_beyond_ascii():
    """The substring screen lowers the text after mapping these characters; they must be every character beyond
    ASCII that Python's regular expressions, ignoring case, take for an ASCII letter."""
    import sys

    from geval_spec import redact as r

    letter = re.compile("(?i)[a-z]")
    found = {chr(cp) for cp in range(128, sys.maxunicode + 1) if letter.fullmatch(chr(cp))}
    assert {chr(cp) for cp in r._ASCII_FOLDS} == found
    for ch in found:
        assert re.fullmatch(f"(?i){r._ASCII_FOLDS[ord(ch)]}", ch)


def _masked_copy(value):
    """The reference: every string of a JSON value redacted, in a new value."""
    if isinstance(value, str):
        return redact(value, ("s3cr3t-value-xyz",))
    if isinstance(value, dict):
        return {_masked_copy(k): _masked_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked_copy(v) for v in value]
    return value


_JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(SECRETISH), st.text(max_size=8))


@settings(max_examples=300, deadline=None)
@given(st.recursive(_JSON_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(SECRETISH)),
                                                 inner, max_size=4)), max_leaves=20))
def test_redacting_a_value_masks_every_string_and_copies_only_when_it_masks(value):
    from geval_spec.redact import redact_json

    before = json.dumps(value)
    out = redact_json(value, ("s3cr3t-value-xyz",))
    assert out == _masked_copy(value) and json.dumps(value) == before
    assert (out is value) == (_masked_copy(value) == value)


@pytest.mark.parametrize("label", ["a` <img src=x onerror=alert(1)> `b", "``<script>alert(1)</script>", "x`"])
def test_a_judge_label_cannot_put_html_into_the_markdown_report(tmp_path, label):
    """report.md goes into CI job summaries (rendered as Markdown): a backtick in a judge label once closed the code
    span around it and let its HTML through."""
    from markdown_it import MarkdownIt

    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=6)
    lines = tmp_path / "j.jsonl"
    lines.write_text("".join(json.dumps({"case_id": f"c{i:03d}", "score": 1 + i % 5}) + "\n" for i in range(6)))
    assert cli("import", "demo", str(lines), "--judge", label, cwd=root).code == 0
    md = cli("report", "demo", "--out", "-", "--exit-zero", cwd=root).out
    rendered = MarkdownIt("commonmark").render(md)
    assert "<img" not in rendered and "<script" not in rendered
    assert label.replace("<", "&lt;").replace(">", "&gt;") in rendered  # shown as written, inside a code span
    import html as html_lib

    page = cli("report", "demo", "--format", "html", "--out", "-", "--exit-zero", cwd=root).out
    assert "<img" not in page and "<script>" not in page.split("</script>")[-1]
    assert f"<code>{html_lib.escape(label.strip(), quote=True)}</code>" in page  # whole, in one code element


# The redaction screen and the score reader read a body's tokens without a check per token when the body is well
# formed; these are the checked readings they must equal for any tokens at all (the code before 2026-12-03).
def _chosen_checked(tokens):
    return "".join([t["token"] if isinstance(t, dict) and isinstance(t.get("token"), str) else "" for t in tokens])


def _alternatives_checked(tokens):
    return [a["token"] for t in tokens if isinstance(t, dict) and isinstance(alts := t.get("top_logprobs"), list)
            for a in alts if isinstance(a, dict) and isinstance(a.get("token"), str)]


def _texts_checked(tokens):
    return [str(t.get("token", "")) if isinstance(t, dict) else "" for t in tokens]


_ODD = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), _TEXT, st.lists(_TEXT, max_size=2),
                 st.dictionaries(_TEXT, _TEXT, max_size=2))
_ALT = st.one_of(st.fixed_dictionaries({"token": _TEXT, "logprob": st.just(-1.0)}),
                 st.fixed_dictionaries({"token": _ODD}), st.fixed_dictionaries({"logprob": st.just(-1.0)}), _ODD)
_ANY_TOKEN = st.one_of(
    st.fixed_dictionaries({"token": _TEXT, "logprob": st.just(-0.1)},
                          optional={"top_logprobs": st.one_of(st.lists(_ALT, max_size=3), _ODD)}),
    st.fixed_dictionaries({"token": _ODD}, optional={"top_logprobs": st.lists(_ALT, max_size=2)}),
    st.fixed_dictionaries({}, optional={"top_logprobs": st.lists(_ALT, max_size=2)}), _ODD)


@settings(max_examples=500, deadline=None)
@given(st.lists(_ANY_TOKEN, max_size=6))
@example([{"token": "a", "top_logprobs": "ab"}])  # a text where a list belongs: its characters are no alternatives
@example([{"token": "a", "top_logprobs": {"token": "b"}}])  # an object where a list belongs
@example([{"token": "a", "top_logprobs": [{"token": 5}]}, {"token": "b", "top_logprobs": [{"token": "c"}]}])
@example([{"token": 5}, {"token": "b"}])
@example([{"token": None}, "token", ["token"], {"top_logprobs": []}])
def test_tokens_read_without_checks_equal_the_checked_reading(tokens):
    from geval_spec.judge.clients.base import _alternatives, _chosen_text
    from geval_spec.judge.types import Logprobs

    assert _chosen_text(tokens) == _chosen_checked(tokens)
    assert _alternatives(tokens) == _alternatives_checked(tokens)
    assert Logprobs(tokens).texts() == _texts_checked(tokens)
