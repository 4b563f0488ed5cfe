"""The loader: positions, tags, scalars, and only our own error type on any input."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geval_spec.errors import GevalError, SpecError
from geval_spec.spec.load import load_spec
from geval_spec.spec.project import SpecSource
from geval_spec.spec.yamldoc import load_yaml
from conftest import ROOT


def test_positions_of_keys_and_values():
    doc = load_yaml("a:\n  b: [1, 2]\n  c: {d: x}\n", "f.yaml")
    assert doc.key_marks[("a", "b")].line == 2 and doc.key_marks[("a", "b")].col == 3
    assert doc.value_marks[("a", "b", 1)].line == 2 and doc.value_marks[("a", "b", 1)].col == 10
    assert doc.key_marks[("a", "c", "d")].line == 3
    assert doc.data == {"a": {"b": [1, 2], "c": {"d": "x"}}}


def test_core_schema_scalars():
    doc = load_yaml("a: yes\nb: 1_000\nc: 0x1f\nd: .5\ne: ~\nf: 'true'\ng: True\nh: -3\n", "f.yaml")
    assert doc.data == {"a": "yes", "b": "1_000", "c": 31, "d": 0.5, "e": None, "f": "true", "g": True, "h": -3}


@pytest.mark.parametrize("text", ["a: !!python/object/apply:os.system ['echo hi']\n", "a: !!str 3\n",
                                  "!custom {a: 1}\n", "a: !!binary aGk=\n", "- !!set {a, b}\n"])
def test_every_tag_is_refused(text):
    with pytest.raises(SpecError, match="YAML tags are not allowed"):
        load_yaml(text, "f.yaml")


def test_aliases_work_and_billion_laughs_is_stopped():
    doc = load_yaml("a: &x [1, 2]\nb: *x\n", "f.yaml")
    assert doc.data["b"] == [1, 2] and ("b", 1) in doc.value_marks
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        bomb += f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]\n"
    with pytest.raises(SpecError, match="expands to more than"):
        load_yaml(bomb, "f.yaml")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_arbitrary_text_raises_only_spec_error(text):
    try:
        load_yaml(text, "fuzz.yaml")
    except SpecError:
        pass


yaml_ish = st.recursive(
    st.one_of(st.text(max_size=10), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(min_size=1, max_size=8), children, max_size=4)),
    max_leaves=20)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("abc:-[]{}&*!|>'\"#\n\t ,?%@`01")), max_size=200))
def test_yaml_shaped_noise_raises_only_spec_error(text):
    try:
        load_yaml(text, "fuzz.yaml")
    except SpecError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["name", "version", "task", "criterion", "steps", "rubric", "judge", "data",
                                        "scoring", "split", "calibration", "bootstrap", "x"]), yaml_ish, max_size=8))
def test_whole_pipeline_raises_only_project_errors(data):
    import json

    source = SpecSource(display="fuzz.yaml", text=json.dumps(data), root=ROOT, rel="specs/fuzz.yaml")
    try:
        load_spec(source)
    except GevalError:
        pass
