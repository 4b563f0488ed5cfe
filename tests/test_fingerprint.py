"""Fingerprints: what changes which, and what changes neither."""

from __future__ import annotations

import io
import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT
from geval_spec.spec.load import load_spec
from geval_spec.spec.project import Project, SpecSource
from geval_spec.spec.yamldoc import load_yaml

SPECS = ["summeval-consistency", "topical-chat-coherence", "nl-samenvatting-consistentie"]


def source_for(name: str, text: str | None = None) -> SpecSource:
    proj = Project(ROOT)
    src = proj.resolve(name)
    return src if text is None else SpecSource(display=src.display, text=text, root=src.root, rel=src.rel)


def fps(name: str, text: str | None = None) -> tuple[str, str]:
    parsed = load_spec(source_for(name, text))
    return parsed.judging_fp, parsed.analysis_fp


def edited(name: str, old: str, new: str) -> str:
    text = source_for(name).text
    assert old in text
    return text.replace(old, new, 1)


def test_step_edit_changes_judging_only():
    base = fps("summeval-consistency")
    after = fps("summeval-consistency", edited("summeval-consistency", "Split the summary into atomic statements.",
                                                "Split the summary into short atomic statements."))
    assert after[0] != base[0] and after[1] == base[1]


def test_temperature_edit_changes_analysis_only():
    base = fps("summeval-consistency")
    after = fps("summeval-consistency", edited("summeval-consistency", "temperature: 0.5", "temperature: 0.3"))
    assert after[0] == base[0] and after[1] != base[1]


def test_description_and_version_change_neither():
    base = fps("summeval-consistency")
    text = edited("summeval-consistency", "Factual consistency of CNN", "Consistency of CNN")
    text = text.replace("version: 1", "version: 2")
    assert fps("summeval-consistency", text) == base


def test_judge_model_and_rubric_change_judging():
    base = fps("topical-chat-coherence")
    assert fps("topical-chat-coherence", edited("topical-chat-coherence", "model: openai/gpt-4.1-mini",
                                                "model: openai/gpt-4.1"))[0] != base[0]
    assert fps("topical-chat-coherence", edited("topical-chat-coherence", "stays on topic.\"}",
                                                "stays on the topic.\"}"))[0] != base[0]
    # threshold and split: analysis only
    after = fps("topical-chat-coherence", edited("topical-chat-coherence", "threshold: 0.6", "threshold: 0.7"))
    assert after[0] == base[0] and after[1] != base[1]


def test_template_text_changes_judging(tmp_path):
    import shutil

    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "specs", specs)
    proj = Project(tmp_path)
    before = load_spec(proj.resolve("topical-chat-coherence")).judging_fp
    tpl = specs / "templates" / "dialogue.j2"
    tpl.write_text(tpl.read_text().replace("You evaluate one response", "You evaluate a response"))
    assert load_spec(proj.resolve("topical-chat-coherence")).judging_fp != before


def _shuffled(value, rng: random.Random):
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def _dump(value, style: str) -> str:
    if style == "json":
        return json.dumps(value, ensure_ascii=False, indent=1)
    from ruamel.yaml import YAML

    y = YAML(typ="safe", pure=True)
    y.default_flow_style = {"block": False, "flow": True, "mixed": None}[style]
    y.width = 4096
    if style == "block":
        y.default_style = None
    buf = io.StringIO()
    y.dump(value, buf)
    return buf.getvalue()


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(SPECS), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(["json", "block", "flow", "mixed"]))
def test_key_order_and_formatting_change_neither(name, seed, style):
    original = source_for(name)
    data = load_yaml(original.text, original.display).data
    text = _dump(_shuffled(data, random.Random(seed)), style)
    assert fps(name, text) == fps(name)


def test_keys_added_later_change_no_fingerprint_at_their_default():
    base = fps("summeval-consistency")
    same = edited("summeval-consistency", "  threshold: 0.8", "  threshold: 0.8\n  rule: point")
    assert fps("summeval-consistency", same) == base
    lower = edited("summeval-consistency", "  threshold: 0.8", "  threshold: 0.8\n  rule: lower_bound")
    assert fps("summeval-consistency", lower)[0] == base[0] and fps("summeval-consistency", lower)[1] != base[1]


def test_without_splits_the_gate_is_judged_on_all():
    text = source_for("topical-chat-coherence").text
    start = text.index("split:\n")
    end = text.index("bootstrap:")
    no_split = (text[:start] + text[end:]).replace("  split: test\n", "")
    parsed = load_spec(source_for("topical-chat-coherence", no_split))
    assert parsed.spec.split is None and parsed.spec.calibration.split == "all"
    explicit = (text[:start] + text[end:])
    try:
        load_spec(source_for("topical-chat-coherence", explicit))
    except Exception as exc:  # an explicit split: test without splits stays an error
        assert "defines no splits" in str(exc)
    else:
        raise AssertionError("calibration.split: test without splits must be refused")
