"""The Dutch plugin and the bias controls, end to end against the local server."""

from __future__ import annotations

import json
import re
import shutil
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from conftest import ROOT, cli
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig

sys.path.insert(0, str(ROOT / "plugins" / "nl" / "eval"))


def test_the_plugin_loads_through_the_entry_point_group():
    names = [ep.name for ep in entry_points(group="geval_spec.plugins")]
    assert "nl" in names
    from geval_spec.plugins import load_plugins

    registry = load_plugins()
    assert "nl" in registry.loaded and registry.checker_for("nl-BE") is registry.checker_for("nl-NL")


def test_labelled_sentences_meet_the_targets():
    from evaluate import evaluate, load

    rows = load()
    assert len(rows) >= 60
    r = evaluate(rows)
    assert r["formality"]["precision"] >= 0.9 and r["formality"]["recall"] >= 0.9
    assert r["compounds"]["precision"] >= 0.8
    assert r["flemish_flagged"] == []


def test_findings_positions_and_lexicon():
    from geval_spec.spec.sections import Language
    from geval_spec_nl import check

    text = "U kunt hier terecht. Heb je vragen over de hoofd pijn?"
    found = check(Language(code="nl-NL", formality="u", compounds=True), text)
    assert [(f.kind, text[f.start:f.end]) for f in found] == [("formality", "je"), ("compound", "hoofd pijn")]
    mixed = check(Language(code="nl-NL", formality="any"), "Je kunt u aanmelden en je krijgt een mail.")
    assert [f.text for f in mixed] == ["u"]  # the minority form in a mixture
    lex = check(Language(code="nl-NL", formality="any", compounds=True, lexicon=["team leider"]),
                "De team leider komt.")
    assert lex == []


@pytest.mark.parametrize("wanted, written, flagged", [
    ("u", "Kun jé dat doen?", "jé"),  # an emphasised je, composed
    ("u", "Kun je\u0301 dat doen?", "je\u0301"),  # the same, decomposed: the same finding
    ("u", "Kun jíj dat doen?", "jíj"),
    ("u", "Kun j\u200de dat doen?", "j\u200de"),  # a zero-width joiner inside hides nothing
    ("je", "Kunt ú dat doen?", "ú"),
    ("je", "Kunt u\u0301 dat doen?", "u\u0301"),
])
def test_address_is_found_however_its_characters_are_written(wanted, written, flagged):
    """Text that looks the same gets the same findings: NFC and NFD, emphasis accents, invisible joiners."""
    from geval_spec.spec.sections import Language
    from geval_spec_nl import check

    found = check(Language(code="nl-NL", formality=wanted), written)
    assert [(f.kind, f.text, written[f.start:f.end]) for f in found] == [("formality", flagged, flagged)]


@pytest.mark.parametrize("written", ["De team  leider komt.", "De team\u00a0leider komt.", "De team\tleider komt."])
@pytest.mark.parametrize("phrase", ["team leider", "team  leider", " team leider "])
def test_the_lexicon_protects_its_phrase_whatever_white_space_stands_between_its_words(phrase, written):
    """The compound check pairs two words across any white space; the lexicon's phrase matched one plain space
    only, so "team  leider" (two spaces, a tab, a no-break space) was flagged with "team leider" in the lexicon."""
    from geval_spec.spec.sections import Language
    from geval_spec_nl import check

    lang = Language(code="nl-NL", formality="any", compounds=True, lexicon=[phrase])
    assert [f.kind for f in check(lang.model_copy(update={"lexicon": []}), written)] == ["compound"]
    assert check(lang, written) == []
    assert [f.kind for f in check(lang, written.replace("leider", "leiders"))] == ["compound"]  # whole words only


def test_the_lexicon_protects_the_phrase_where_it_stands_after_longer_lower_cases():
    """'İ'.lower() is two characters: spans found in the lowered text fell beside the phrase, which was flagged
    while it stood in the lexicon (and a span could cover a real finding beside it)."""
    from geval_spec.spec.sections import Language
    from geval_spec_nl import check

    lang = Language(code="nl-NL", formality="any", compounds=True, lexicon=["hoofd pijn"])
    assert check(lang, "İİİİİİİİİİİİ: u heeft hoofd pijn.") == [] == check(lang, "Ik heb HOOFD PIJN.")
    assert [f.text for f in check(lang.model_copy(update={"lexicon": []}), "İİİİİİİİİİİİ: u heeft hoofd pijn.")] \
        == ["hoofd pijn"]


@pytest.mark.parametrize("phrase, written", [
    ("kun je\u0301", "Kun jé dat doen?"),  # the lexicon decomposed, the text composed
    ("kun jé", "Kun je\u0301 dat doen?"),  # and the other way round
    ("kun jé", "Kun j\u200dé dat doen?"),  # a zero-width joiner inside the word
    ("kun jé", "Ku\u00adn jé dat doen?"),  # a soft hyphen
    ("KUN JÉ", "kun je\u0301 dat doen?"),  # in any case
])
def test_the_lexicon_protects_its_phrase_however_its_letters_are_written(phrase, written):
    """A lexicon phrase is the same phrase in NFC and NFD and with invisible characters inside, as the findings
    read words: it was matched as written, and its words were flagged when the spec and the data differed."""
    from geval_spec.spec.sections import Language
    from geval_spec_nl import check

    lang = Language(code="nl-NL", formality="u", lexicon=[phrase])
    assert check(lang, written) == []
    assert [f.kind for f in check(lang.model_copy(update={"lexicon": []}), written)] == ["formality"]
    assert [f.kind for f in check(lang, written.replace("Kun", "Wil").replace("kun", "wil")
                                  .replace("Ku\u00adn", "Wil"))] == ["formality"]  # only the phrase is protected


@pytest.mark.parametrize("phrase, written, wanted, protected", [
    ("\u00fc\u0301 je", "\u00fc\u0301 je", "u", True),  # neither NFC nor NFD, written alike
    ("e\u0301\u0323 je", "e\u0301\u0323 je", "u", True),  # marks in a non-canonical order
    ("\u01d8 je", "u\u0308\u0301 je", "u", True),  # the same letter, composed and not
    ("\ud55c je", "\u1112\u1161\u11ab je", "u", True),  # Hangul composed and as jamo
    ("kun j\u00e9", "Kun je\u00ad\u0301 dat?", "u", True),  # a soft hyphen between a letter and its accent
    ("je", "2\u200bje kunt", "u", True),  # a zero-width space after a digit: je is a word of its own
    ("je", "je\u00adzelf kunt", "u", False),  # a soft hyphen inside a word: "je" is not the word
    ("kun je", "Kun je\u0301 dat?", "u", False),  # je with an accent is not the phrase: as composed jé
    ("", "Kun je dat?", "u", False),  # an empty phrase protects nothing
    ("\u00ad", "Kun je dat?", "u", False),
])
def test_the_lexicon_reads_the_text_as_the_checks_do(phrase, written, wanted, protected):
    """A phrase is matched in the text read as the checks read words (NFC, no format characters inside a word),
    with the text's own offsets: forms between NFC and NFD, Hangul, digits and format characters next to a phrase
    (a review of ad2702a found these)."""
    from geval_spec.spec.sections import Language
    from geval_spec_nl import check

    lang = Language(code="nl-NL", formality=wanted, lexicon=[phrase])
    found = check(lang, written)
    unprotected = check(lang.model_copy(update={"lexicon": []}), written)
    assert unprotected and all(written[f.start:f.end] == f.text for f in unprotected)
    assert (found == []) is protected, found


def test_spans_answer_as_the_scan_over_every_span_did():
    from hypothesis import given, strategies as st

    from geval_spec_nl.text import Covered

    @given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 8)).map(lambda t: (t[0], t[0] + t[1])), max_size=8),
           st.integers(0, 40), st.integers(0, 6))
    def same(spans, start, width):
        covered = Covered(spans)
        assert covered.inside(start) == any(a <= start < b for a, b in spans)
        end = start + width
        assert covered.overlaps(start, end) == any(a < end and start < b for a, b in spans)

    same()


def dutch_project(tmp_path: Path, base_url: str) -> Path:
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    spec = tmp_path / "specs" / "nl-samenvatting-consistentie.yaml"
    spec.write_text(spec.read_text().replace("  top_logprobs: 20", f"  top_logprobs: 20\n  api_base: {base_url}\n"
                                             "  client: openai-http"))
    return tmp_path


def test_dutch_spec_end_to_end_with_findings_in_render_and_report(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        root = dutch_project(tmp_path, srv.base_url)
        rendered = cli("render", "nl-samenvatting-consistentie", "--case", "hoofdpijn-2", cwd=root)
        assert rendered.code == 0, rendered.err
        assert "Automatic pre-checks found these issues" in rendered.out and "hoofd pijn" in rendered.out
        res = cli("run", "nl-samenvatting-consistentie", cwd=root)
        assert res.code in (0, 1), res.err
        run_id = res.out.strip().splitlines()[-1]
        sent = srv.state.total
        bodies = [b["messages"][-1]["content"] for b in srv.state.bodies]
        assert any("formality: informal 'je'" in b for b in bodies)
    cassette = tmp_path / "nl.cassette.jsonl"
    assert cli("export", run_id, "--cassette", str(cassette), cwd=root).code == 0
    fresh = tmp_path / "fresh.duckdb"
    replay = cli("run", "nl-samenvatting-consistentie", "--replay", str(cassette), "--db", str(fresh), cwd=root)
    assert replay.code in (0, 1), replay.err
    assert srv.state.total == sent
    md = cli("report", "nl-samenvatting-consistentie", "--db", str(fresh), "--out", "-", cwd=root).out
    assert "### Language pre-checks (nl-NL, formality u)" in md
    assert "| formality |" in md and "| compound |" in md
    data = json.loads(cli("report", "nl-samenvatting-consistentie", "--db", str(fresh), "--format", "json", "--out",
                          "-", cwd=root).out)
    lang = data["diagnostics"]["language"]
    assert lang["kinds"]["compound"]["cases"] == 2 and lang["kinds"]["formality"]["cases"] == 4
    assert {e["case_id"] for e in lang["kinds"]["compound"]["examples"]} == {"hoofdpijn-2", "software-2"}
    # nothing from the Flemish sentences is flagged
    flagged_texts = [e["text"].lower() for k in lang["kinds"].values() for e in k["examples"]]
    assert "gelet op" not in flagged_texts and "vastgoedmakelaar" not in flagged_texts
    assert data["diagnostics"]["length"]["quartiles"]  # bias.length: report


def test_penalty_is_analysis_only(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        root = dutch_project(tmp_path, srv.base_url)
        assert cli("run", "nl-samenvatting-consistentie", cwd=root).code in (0, 1)
        before = json.loads(cli("report", "nl-samenvatting-consistentie", "--format", "json", "--out", "-",
                                cwd=root).out)
        spec = root / "specs" / "nl-samenvatting-consistentie.yaml"
        spec.write_text(spec.read_text().replace("  lexicon: [vastgoedmakelaar, gelet op]",
                                                 "  lexicon: [vastgoedmakelaar, gelet op]\n  penalty: {compound: 1.0}"))
        sent = srv.state.total
        after = json.loads(cli("report", "nl-samenvatting-consistentie", "--format", "json", "--out", "-",
                               cwd=root).out)
        assert srv.state.total == sent
        assert after["spec"]["fingerprint"] == before["spec"]["fingerprint"]
        assert after["correlation"]["all"]["dataset"] != before["correlation"]["all"]["dataset"]


def test_a_negative_penalty_is_refused_at_its_key(tmp_path):
    """A penalty below 0 raised scores past the rubric's maximum (8 on a 1..5 rubric) in every analysis."""
    root = dutch_project(tmp_path, "http://127.0.0.1:9/v1")
    spec = root / "specs" / "nl-samenvatting-consistentie.yaml"
    spec.write_text(spec.read_text().replace("  lexicon: [vastgoedmakelaar, gelet op]",
                                             "  lexicon: [vastgoedmakelaar, gelet op]\n"
                                             "  penalty: {formality: -3, compound: 0.5}"))
    line = next(i for i, text in enumerate(spec.read_text().splitlines(), 1) if "penalty:" in text)
    res = cli("validate", "nl-samenvatting-consistentie", cwd=root)
    assert res.code == 2 and f"nl-samenvatting-consistentie.yaml:{line}:" in res.err, res.err
    assert "penalty -3 for 'formality' must be a number of at least 0" in res.err and "1 error" in res.out


def pairwise_judge(body, index):
    """Prefers the candidate with the higher [[q=N]]; with [[first]] in the source it always says A."""
    text = body["messages"][-1]["content"]
    qa = int(re.search(r"Candidate A:\n.*?\[\[q=(\d)\]\]", text, re.S).group(1))
    qb = int(re.search(r"Candidate B:\n.*?\[\[q=(\d)\]\]", text, re.S).group(1))
    if "[[first]]" in text:
        pref = "A"
    else:
        pref = "A" if qa > qb else ("B" if qb > qa else "tie")
    return {"content": json.dumps({"reasoning": "compared", "errors": [], "preferred": pref})}


def test_position_swap_end_to_end(tmp_path):
    rows = []
    for i in range(24):
        qa, qb = (i % 5) + 1, ((i * 3) % 5) + 1
        src = f"Question {i}." + (" [[first]]" if i % 4 == 0 else "")
        human = 1.0 if qa > qb else (0.0 if qb > qa else 0.5)
        rows.append({"id": f"p{i}", "doc": f"d{i // 2}", "src": src, "a": f"Answer one [[q={qa}]]",
                     "b": f"Answer two [[q={qb}]]", "pref": human})
    (tmp_path / "specs" / "data").mkdir(parents=True)
    (tmp_path / "specs" / "data" / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with FakeOpenAI(ServerConfig(judge=pairwise_judge)) as srv:
        (tmp_path / "specs" / "pairs.yaml").write_text(f"""name: pairs
version: 1
task: Choose the better answer.
criterion: {{name: Helpfulness, description: The answer helps the asker.}}
steps: [Read both answers., Decide which helps more.]
pairwise: {{candidates: [answer_a, answer_b]}}
scoring: {{method: direct}}
bias: {{position_swap: true, length: report}}
judge: {{model: openai/judge-small, api_base: {srv.base_url}, client: openai-http}}
data:
  path: data/pairs.jsonl
  id: id
  group: doc
  fields: {{source: src, answer_a: a, answer_b: b}}
  human: pref
  human_scale: {{min: 0, max: 1}}
calibration: {{split: all, threshold: 0.5}}
""")
        assert cli("validate", "pairs", cwd=tmp_path).code == 0
        res = cli("run", "pairs", cwd=tmp_path)
        assert res.code in (0, 1), res.err
        assert srv.state.total == 48  # both orders for every case
        swapped = [b for b in srv.state.bodies if "Candidate A:\nAnswer two" in b["messages"][-1]["content"]]
        assert len(swapped) == 24
    data = json.loads(cli("report", "pairs", "--format", "json", "--out", "-", cwd=tmp_path).out)
    pos = data["diagnostics"]["position"]
    # the [[first]] cases always say A: inconsistent whenever the two answers differ in quality
    assert pos["both_orders_valid"] == 24 and 0 < pos["consistent"] < 24
    assert pos["consistency"] == round(pos["consistent"] / 24, 4)
    md = cli("report", "pairs", "--out", "-", cwd=tmp_path).out
    assert "### Position bias" in md and "orders that disagree give a tie" in md


def test_two_judge_panel_end_to_end(tmp_path):
    def judge(body, index):
        from openai_server import candidate_of

        cand = candidate_of(body)
        score = int(cand.split("[[score=")[1][0])
        if body["model"] == "gpt-4.1-mini" and "fam=openai" in cand:
            score = 5  # prefers its own family's candidates
        return {"content": json.dumps({"reasoning": "r", "errors": [], "score": score})}

    with FakeOpenAI(ServerConfig(judge=judge)) as srv:
        root = make_project(tmp_path, srv.base_url, n=30, method="direct", client="openai-http")
        data = root / "specs" / "data" / "cases.jsonl"
        rows = [json.loads(x) for x in data.read_text().splitlines()]
        for i, r in enumerate(rows):
            r["family"] = "openai" if i % 2 else "anthropic"
            r["cand"] += f" fam={r['family']}"
        data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        spec = root / "specs" / "demo.yaml"
        text = spec.read_text()
        judge_block = text[text.index("judge:\n"):text.index("data:\n")]
        text = text.replace(judge_block, f"""judges:
  - {{model: openai/gpt-4.1-mini, api_base: {srv.base_url}, client: openai-http}}
  - {{model: anthropic/claude-sonnet-4, name: claude, api_base: {srv.base_url}, client: openai-http}}
ensemble: mean
""").replace("  human: human\n", "  human: human\n  model_family: family\n")
        spec.write_text(text)
        res = cli("run", "demo", cwd=root)
        assert res.code in (0, 1), res.err
        assert srv.state.total == 60
        assert {b["model"] for b in srv.state.bodies} == {"gpt-4.1-mini", "anthropic/claude-sonnet-4"}
    report = json.loads(cli("report", "demo", "--format", "json", "--out", "-", cwd=root).out)
    assert set(report["judges"]) == {"openai/gpt-4.1-mini", "claude"}
    assert report["run"]["judge"] == ["claude", "openai/gpt-4.1-mini"] and report["run"]["ensemble"] == "mean"
    panel = report["panel"]
    assert panel["judges"] and panel["alpha_interval"] is not None
    rows = {r["judge"]: r for r in panel["self_preference"]}
    assert rows["openai/gpt-4.1-mini"]["flag"] is True and rows["claude"]["flag"] is False
    md = cli("report", "demo", "--out", "-", cwd=root).out
    assert "### Per judge" in md and "### Self-preference" in md and "> self-preference:" in md


def _key(e):
    return (e.name, e.value)


def _fake_distributions(root):
    """Installed-looking folders on two sys.path entries: a distribution of the group installed twice (the first
    counts), one that only mentions the group, an egg-info, comments, names with dots and capitals, two
    distributions with entry points in one folder, an extras marker, and an egg-info file (not a folder)."""
    from geval_spec import plugins

    def dist(where, folder, text, name="x"):
        info = root / where / folder
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(text)

    g = plugins.GROUP
    for folder, target in (("first", "first_mod:setup"), ("second", "second_mod:setup")):
        dist(folder, "dup_plugin-1.0.dist-info", f"[{g}]\ndup = {target}\n", "dup-plugin")
    dist("second", "Dup.Plugin-2.0.dist-info", f"[{g}]\ndup = third_mod:setup\n", "Dup.Plugin")
    dist("first", "mentions-1.0.dist-info", f"[console_scripts]\n{g} = x:y\n", "mentions")
    dist("first", "old_style-0.3-py3.11.egg-info", f"# a comment\n[{g}]\n# off = no:where\nold=old_mod:setup [extra]\n")
    dist("first", "Two.Entries-1.0.dist-info", f"[{g}]\n  b = pkg.b : make.it \n a = pkg.a\n\n[other]\nc = no:no\n")
    (root / "first" / "loose-1.0.egg-info").write_text("Metadata-Version: 1.0\nName: loose\n")


def test_plugin_entry_points_are_the_ones_importlib_finds(tmp_path, monkeypatch):
    """The quick scan of entry points finds what importlib.metadata.entry_points(group=...) finds, on a corpus of
    installed-looking folders (see _fake_distributions), without importing importlib.metadata."""
    import subprocess
    import sys
    from importlib.metadata import entry_points

    from geval_spec import plugins

    _fake_distributions(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "first"), str(tmp_path / "second"), *sys.path])

    ours = list(map(_key, plugins._scan()[0]))
    theirs = list(map(_key, entry_points(group=plugins.GROUP)))
    assert ours == theirs  # in the same order: of two plugins with one name, the later one is set up last
    assert [v for n, v in ours if n == "dup"] == ["first_mod:setup"]
    assert {"nl", "old", "a", "b"} <= {n for n, _ in ours} and "c" not in {n for n, _ in ours}
    # the same through importlib (the route for a zip on sys.path)
    assert list(map(_key, plugins._scan_with_importlib()[0])) == theirs
    code = ("import sys; from geval_spec import plugins; eps = plugins._scan()[0]; "
            "assert 'importlib.metadata' not in sys.modules; print(sorted(e.name for e in eps))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'nl'" in out


def test_the_scan_takes_path_objects_and_hands_odd_folders_to_importlib(tmp_path, monkeypatch):
    """A pathlib.Path on sys.path (notebooks, conftests) is read like its text; a folder whose suffix is not lower
    case, or whose name is empty, is named by its metadata, so importlib decides."""
    from importlib.metadata import entry_points

    from geval_spec import plugins

    g = plugins.GROUP
    info = tmp_path / "a" / "Odd_Plugin-1.0.DIST-INFO"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-name\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{g}]\nodd = a_mod:setup\n")
    info = tmp_path / "b" / "odd_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{g}]\nodd = b_mod:setup\n")
    monkeypatch.setattr(sys, "path", [tmp_path / "a", str(tmp_path / "b"), *sys.path])

    assert list(map(_key, plugins._scan()[0])) == list(map(_key, entry_points(group=g)))
    assert ("odd", "a_mod:setup") in map(_key, plugins._scan()[0])


class _OwnDistributions:
    """An import hook that supplies distributions of its own (none): the scan then asks importlib.metadata."""

    def find_spec(self, *args):
        return None

    def find_distributions(self, *args, **kwargs):
        return iter(())


@pytest.mark.parametrize("hook", ["none", "backport", "own"])
def test_unreadable_entry_points_are_reported_not_skipped(tmp_path, monkeypatch, hook):
    """Reported with the folder and what is wrong, by the scan itself, with the importlib_metadata backport's finder
    on sys.meta_path (litellm's dependencies put it there; it finds what the scan reads), and through importlib
    (a hook with distributions of its own)."""
    from geval_spec import plugins

    if hook == "backport":
        importlib_metadata = pytest.importorskip("importlib_metadata")
        monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, importlib_metadata.MetadataPathFinder()])
    elif hook == "own":
        monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, _OwnDistributions()])
    calls = []
    real = plugins._scan_with_importlib
    monkeypatch.setattr(plugins, "_scan_with_importlib", lambda: calls.append(1) or real())

    g = plugins.GROUP
    for folder, content in (("bad_line-1.0.dist-info", f"[{g}]\nno equals sign here\nfine = builtins:id\n".encode()),
                            ("bad_text-1.0.dist-info", f"[{g}]\nx = y:z  # caf\xe9\n".encode("latin-1"))):
        info = tmp_path / folder
        info.mkdir()
        (info / "entry_points.txt").write_bytes(content)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(plugins, "_REGISTRY", None)
    registry = plugins.load_plugins()
    failed = dict(registry.failed)
    assert "not name = value" in failed["bad_line-1.0.dist-info"]
    assert "not UTF-8" in failed["bad_text-1.0.dist-info"]
    assert "fine" in registry.loaded
    assert bool(calls) is (hook == "own")


@pytest.mark.parametrize("hook", [None, "own"])
def test_a_plugins_distribution_and_version_are_read_as_importlib_reads_them(tmp_path, monkeypatch, hook):
    """The reuse key of a judgment names each checker's distribution and version (a new version of a checker
    judges again); the scan reads them from METADATA as importlib.metadata does."""
    import sys
    from importlib.metadata import distributions
    from types import SimpleNamespace

    from geval_spec import plugins
    from geval_spec.runner.run import case_keys

    if hook == "own":
        monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, _OwnDistributions()])
    info = tmp_path / "versioned_plugin-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text(f"[{plugins.GROUP}]\nversioned = builtins:id\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    spec = SimpleNamespace(spec=SimpleNamespace(language=object()), judging_fp="fp")
    case = SimpleNamespace(id="c1", fields={"text": "x"})
    keys = []
    for version in ("1.0", "1.0.post1"):
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: Versioned-Plugin\nVersion: {version}\n\n"
                                       "Version: 9 (in the description)\n")
        monkeypatch.setattr(plugins, "_REGISTRY", None)
        registry = plugins.load_plugins()
        ours = registry.versions
        theirs = {f"{d.metadata['Name']} {d.version}" for d in distributions()}
        assert ours["versioned"] == f"Versioned-Plugin {version}" and set(ours.values()) <= theirs
        keys.append(case_keys(spec, [case], [])["c1"])  # type: ignore[arg-type]
    assert keys[0] != keys[1]


def test_a_zip_on_sys_path_sends_the_scan_to_importlib(tmp_path, monkeypatch):
    import sys
    import zipfile
    from importlib.metadata import entry_points

    from geval_spec import plugins

    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped_plugin-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped-plugin\nVersion: 1\n")
        z.writestr("zipped_plugin-1.0.dist-info/entry_points.txt", f"[{plugins.GROUP}]\nzipped = zmod:setup\n")
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    found = {(e.name, e.value) for e in plugins._scan()[0]}
    assert ("zipped", "zmod:setup") in found
    assert found == {(e.name, e.value) for e in entry_points(group=plugins.GROUP)}


def test_an_entry_point_loads_module_attribute_paths():
    from geval_spec.plugins import EntryPoint

    assert EntryPoint("x", "os.path:join").load() is __import__("os").path.join
    assert EntryPoint("x", "os.path").load() is __import__("os").path
    assert EntryPoint("x", "os:path.join [extra]").load() is __import__("os").path.join
    assert EntryPoint("x", "os:path..join").load() is __import__("os").path.join  # empty parts dropped, as importlib
    with pytest.raises(ValueError, match="not module:attribute"):
        EntryPoint("x", "not a value!").load()


def test_a_fifo_or_a_huge_entry_points_file_is_reported_not_read(tmp_path, monkeypatch):
    """An entry_points.txt planted on sys.path that is a FIFO (which would block a plain read forever) or larger
    than 1 MiB is named in Registry.failed; the scan goes on."""
    import os

    from geval_spec import plugins

    fifo = tmp_path / "fifo_plugin-1.0.dist-info"
    fifo.mkdir()
    os.mkfifo(fifo / "entry_points.txt")
    huge = tmp_path / "huge_plugin-1.0.dist-info"
    huge.mkdir()
    (huge / "entry_points.txt").write_text(f"[{plugins.GROUP}]\n" + "# padding\n" * 120_000)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    found, broken = plugins._scan()
    problems = dict(broken)
    assert "not a regular file" in problems["fifo_plugin-1.0.dist-info"]
    assert "too large" in problems["huge_plugin-1.0.dist-info"]
    assert any(e.name == "nl" for e in found)
