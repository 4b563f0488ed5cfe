"""Rendering: exact messages, an identical static prefix, a sandbox that holds."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, cli
from geval_spec.errors import TemplateError
from geval_spec.dataset.cases import read_cases
from geval_spec.spec.load import load_spec
from geval_spec.spec.project import Project
from geval_spec.judge.render import REUSE_AFTER, Renderer, renderer_for
from geval_spec.judge.messages import serialise
from geval_spec.spec.template import TemplateSource


def parsed(name: str):
    return load_spec(Project(ROOT).resolve(name))


@pytest.mark.parametrize("name", ["summeval-consistency", "topical-chat-coherence", "nl-samenvatting-consistentie"])
def test_two_cases_share_the_static_prefix(name):
    p = parsed(name)
    cases = read_cases(p).cases
    r = renderer_for(p)
    a, b = r.render(cases[0].id, cases[0].fields), r.render(cases[1].id, cases[1].fields)
    prefix = r.static_prefix()
    assert len(prefix) > 200
    sa, sb = serialise(a.messages), serialise(b.messages)
    assert sa.startswith(prefix) and sb.startswith(prefix)
    assert sa != sb
    assert a.messages[0].role == "system" and a.messages[0] == b.messages[0]
    # no case text in the static part
    assert cases[0].fields["candidate"] not in a.messages[0].content


def test_render_prints_the_exact_messages():
    p = parsed("summeval-consistency")
    case = read_cases(p).cases[5]
    res = cli("render", "summeval-consistency", "--case", case.id)
    assert res.code == 0, res.err
    rendered = renderer_for(p).render(case.id, case.fields)
    expected = "".join(f"--- {m.role} ---\n{m.content}\n" for m in rendered.messages)
    assert res.out.split("\n", 2)[2] == expected
    assert "static prefix:" in res.out


def test_render_json_is_the_request_body():
    p = parsed("topical-chat-coherence")
    case = read_cases(p).cases[0]
    res = cli("render", "topical-chat-coherence", "--format", "json")
    body = json.loads(res.out)[0]["body"]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["model"] == "openai/gpt-4.1-mini"
    assert body["messages"] == renderer_for(p).render(case.id, case.fields).as_dicts()


def test_unknown_case_suggests():
    res = cli("render", "summeval-consistency", "--case", "summeval_dm-test-26e4e19d945cedcb489f28808c730658139c9415_9")
    assert res.code == 2 and "did you mean" in res.err


def _renderer(text: str) -> Renderer:
    p = parsed("topical-chat-coherence")
    return Renderer(p.spec, TemplateSource(name="t.j2", text=text), p.steps)


@pytest.mark.parametrize("evil", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ candidate.__class__.__init__.__globals__ }}",
    "{% for x in range(10**9) %}{% endfor %}",
])
def test_sandbox_blocks_escapes(evil):
    r = _renderer(evil + "{{ history }}{{ fact }}{{ candidate }}")
    with pytest.raises(TemplateError):
        r.render("x", {"history": "h", "fact": "f", "candidate": "c"})


def test_template_error_names_file_and_line():
    with pytest.raises(TemplateError) as info:  # unknown filter: a compile-time error
        _renderer("line one\n{{ history }}\n{{ fact | nosuchfilter }}{{ candidate }}\n")
    assert info.value.problems[0].headline().startswith("t.j2:3: error")


def test_runtime_error_line():
    r = _renderer("a\nb\n{{ history }}{{ rubric.nope }}\n{{ fact }}{{ candidate }}")
    with pytest.raises(TemplateError) as info:
        r.render("x", {"history": "h", "fact": "f", "candidate": "c"})
    problem = info.value.problems[0]
    assert problem.file == "t.j2" and problem.line == 3


def test_static_prefix_share_is_reported_for_case_first_templates():
    r = _renderer("{{ candidate }}\n{{ history }}{{ fact }} then static text " + "x " * 50)
    assert r.static_prefix() == "<user>\n"


UNDECLARED_CASES = [
    "{{ a }}{{ b.c }}{% if d %}{{ e }}{% endif %}",
    "{% for x in items %}{{ x }}{{ loop.index }}{{ y }}{% else %}{{ z }}{% endfor %}",
    "{% set s = 1 %}{{ s }}{{ t }}{% set u %}{{ v }}{% endset %}{{ u }}",
    "{% macro m(p, q=r) %}{{ p }}{{ q }}{{ w }}{{ caller() }}{% endmacro %}{% call m(1) %}{{ k }}{% endcall %}",
    "{% with a = b %}{{ a }}{{ c }}{% endwith %}{{ a }}",
    "{% block system %}{{ sys }}{% endblock %}{% block user %}{{ self.system() }}{{ usr }}{% endblock %}",
    "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}{{ more }}",
    "{{ x | default(y) }}{{ 'lit' ~ z }}{{ [a1, a2] | join(sep) }}{{ {'k': v1}[key] }}",
    "{% for k, v in pairs if v > lim %}{{ k }}{% endfor %}{{ lipsum(1) }}{{ cycler }}",
    "{% filter upper %}{{ f1 }}{% endfilter %}{% if g1 is defined %}{{ g1 }}{% endif %}",
]


@pytest.mark.parametrize("text", UNDECLARED_CASES + [
    p.read_text(encoding="utf-8") for p in sorted([*(ROOT / "geval_spec" / "spec" / "templates").glob("*.j2"),
                                                  *(ROOT / "specs" / "templates").glob("*.j2")])])
def test_undeclared_names_are_the_ones_jinja_meta_finds(text):
    """The names a template reads from its context are noted while its code is written, in one pass; they are
    the set jinja2.meta.find_undeclared_variables finds in a second pass (which the loader no longer runs)."""
    from jinja2 import StrictUndefined, meta

    from geval_spec.judge.sandbox import LimitedSandbox

    env = LimitedSandbox(undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    tree = env.parse(text)
    _, undeclared = env.compile_tree(tree, "t.j2")
    assert undeclared == meta.find_undeclared_variables(env.parse(text))
    assert undeclared  # every case reads at least one name


_USER = "{% block user %}{{ history }}|{{ fact }}|{{ candidate }}{% endblock %}"
REUSE_CASES = [  # (template, whether its system block is rendered once for all cases)
    ("{% block system %}{{ task }} {{ criterion.name }}{% for s in steps %}{{ loop.index }}. {{ s }}{% endfor %}"
     "{% endblock %}" + _USER, True),
    ("{% block system %}{% for i in range(3) %}{{ i }}{% endfor %}{{ rubric.max if rubric else method }}"
     "{% set n = namespace(k=1) %}{{ n.k }}{{ dict(a=1) | tojson }}{% endblock %}" + _USER, True),
    ("{% block system %}{{ task }} {{ candidate }}{% endblock %}" + _USER, False),  # reads the case
    ("{% block system %}{{ findings | length }}{% endblock %}" + _USER, False),  # the case's findings
    ("{% block system %}{% macro m() %}{{ fact }}{% endmacro %}{{ m() }}{% endblock %}" + _USER, False),
    ("{% block system %}{% if history is defined %}{{ history }}{% endif %}{% endblock %}" + _USER, False),
    ("{% block system %}{{ [1, 2, 3, 4, 5, 6, 7, 8] | random }}{% endblock %}" + _USER, False),
    ("{% block system %}{% filter random %}abcdefgh{% endfilter %}{% endblock %}" + _USER, False),
    ("{% block system %}{{ lipsum(1) }}{% endblock %}" + _USER, False),
    ("{% block system %}{{ task }}{{ self.user() }}{% endblock %}" + _USER, False),
    ("{% block system %}{{ (['abcdefghijklmnopqrstuvwxyz'] * 8) | map('random') | join }}{% endblock %}" + _USER,
     False),  # random text by another route
    ("{% block system %}{{ task }}{% block inner %}[{{ candidate }}]{% endblock %}{% endblock %}" + _USER,
     False),  # a nested block's reads are not its own
]


@pytest.mark.parametrize("text,reused", REUSE_CASES)
def test_a_block_that_reads_nothing_of_the_case_is_rendered_once(text, reused, monkeypatch):
    """Each case gets the messages a renderer of its own would give it; a system block is rendered once only when
    its text cannot depend on the case (no case name read, no random text, no other block's code)."""
    r = _renderer(text)
    calls = []
    block = r.template.blocks["system"]
    monkeypatch.setitem(r.template.blocks, "system", lambda ctx: calls.append(1) or block(ctx))
    cases = [(f"c{i}", {"history": f"h{i}", "fact": f"f{i}", "candidate": f"c{i}"}) for i in range(6)]
    got = [r.render(cid, fields) for cid, fields in cases]
    assert len(calls) == (REUSE_AFTER + 1 if reused else len(cases))
    if "random" not in text and "lipsum" not in text:
        assert got == [_renderer(text).render(cid, fields) for cid, fields in cases]


def test_a_case_value_named_like_a_spec_variable_is_not_served_from_the_reused_block():
    text = "{% block system %}{{ task }}{% endblock %}" + _USER
    r = _renderer(text)
    fields = {"history": "h", "fact": "f", "candidate": "c"}
    first = [r.render("a", fields) for _ in range(REUSE_AFTER + 1)][-1].messages[0].content
    shadowed = r.render("b", dict(fields, task="the case's own task")).messages[0].content
    assert shadowed == "the case's own task" != first and r.render("c", fields).messages[0].content == first


def test_a_render_s_context_is_jinja_s_own_merge_of_globals_spec_and_case():
    """A render's context is merged once per renderer (Jinja's globals, then the spec's variables, then the case's)
    and handed to Jinja as it is: a case value named like a global (``range``, ``lipsum``) or a spec variable
    shadows it, as in Jinja's own merge, and the globals stay callable everywhere else; a render leaves nothing
    behind for the next."""
    text = ("{% block system %}{{ task }}{% for i in range(2) %}{{ i }}{% endfor %}{% endblock %}"
            "{% block user %}{% set note = 'n' %}{{ history }}|{{ fact }}|{{ candidate }}|{{ note }}{% endblock %}")
    r = _renderer(text)
    jinja = r.template  # Jinja's own merge: new_context without shared
    fields = {"history": "h", "fact": "f", "candidate": "c"}

    def by_jinja(values):
        ctx = r.context(values)
        return tuple("".join(jinja.blocks[b](jinja.new_context({k: v for k, v in ctx.items()
                                                                 if k not in jinja.globals or k in values})))
                      for b in ("system", "user"))

    for values in (fields, dict(fields, history="range"), dict(fields, lipsum="L", history="x")):
        got = r.render("a", values)
        assert tuple(m.content for m in got.messages) == by_jinja(values)
    shadow = _renderer("{% block user %}{{ range }}|{{ lipsum }}|{{ candidate }}{% endblock %}")
    out = shadow.render("a", dict(fields, range="R", lipsum="L"))
    assert out.messages[0].content == "R|L|c"
    assert "range" not in shadow.context(fields) or callable(shadow.context(fields)["range"])


def test_a_reused_block_still_counts_against_the_output_limit(monkeypatch):
    text = "{% block system %}{{ task * 40 }}{% endblock %}" + _USER
    fields = {"history": "h", "fact": "f", "candidate": "c"}
    size = len(_renderer(text).render("a", fields).messages[0].content)
    # (a renderer reads the limits once, at its first render)
    monkeypatch.setenv("GEVAL_RENDER_MAX_BYTES", str(size + 3 + len("hfc")))  # case a fits, case b does not
    r = _renderer(text)
    for _ in range(REUSE_AFTER + 1):
        r.render("a", fields)
    assert r._same  # the system block is reused now
    with pytest.raises(TemplateError, match="case 'b'"):
        r.render("b", dict(fields, candidate="c" * 10))


def test_a_template_runtime_error_from_cycler_is_a_template_error():
    with pytest.raises(TemplateError):
        _renderer("{{ cycler() }}{{ history }}{{ fact }}{{ candidate }}").render(
            "x", {"history": "h", "fact": "f", "candidate": "c"})


def test_a_template_read_at_a_git_revision_has_the_working_tree_s_limits(tmp_path):
    """A template committed as bytes that are not UTF-8 made `render demo@HEAD` end in an internal error (exit
    70), and one of 3 MB was read although a template file over 1 MB is refused; a spec at a revision likewise."""
    import subprocess

    from conftest import cli
    from e2e_helpers import make_project

    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=3)
    spec = root / "specs" / "demo.yaml"
    spec.write_text(spec.read_text().replace("scoring:\n", "prompt: {template: templates/t.j2}\nscoring:\n", 1))
    template = root / "specs" / "templates" / "t.j2"
    template.parent.mkdir()
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    for name, body in (("latin1", b"{{ candidate }}\ncaf\xe9\n"), ("big", b"{{ candidate }}\n" + b"x" * (3 << 20))):
        template.write_bytes(body)
        subprocess.run(git + ["add", "-A"], cwd=root, check=True)
        subprocess.run(git + ["commit", "-qm", name], cwd=root, check=True)
        template.write_text("{{ candidate }}\n")  # the working tree's copy is fine
        assert cli("render", "demo", cwd=root).code == 0
        res = cli("render", "demo@HEAD", cwd=root)
        assert res.code == 2 and "t.j2" in res.err and "Traceback" not in res.err, (name, res.err)
        assert ("not UTF-8" if name == "latin1" else "too large") in res.err, (name, res.err)
    spec.write_bytes(spec.read_bytes() + b"# caf\xe9\n")
    subprocess.run(git + ["commit", "-qam", "spec"], cwd=root, check=True)
    res = cli("validate", "demo@HEAD", cwd=root)
    assert res.code == 2 and "not UTF-8" in res.err and "Traceback" not in res.err, res.err


def test_the_git_folder_rule_looks_only_inside_the_project(tmp_path):
    """Files under the project's .git are refused; a project that itself lies under a folder named .git is not."""
    from geval_spec.files import OutsideProject, confine

    root = tmp_path / ".git" / "p"
    (root / "specs" / "templates").mkdir(parents=True)
    (root / ".git").mkdir()
    assert confine(root / "specs", "templates/t.j2", root) == root / "specs" / "templates" / "t.j2"
    for rel in ("../.git/config", "templates/../../.git/HEAD", "./.git/x"):
        with pytest.raises(OutsideProject):
            confine(root / "specs" if rel.startswith("..") or rel.startswith("templates") else root, rel, root)
