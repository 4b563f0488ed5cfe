"""Data files through DuckDB, dotted paths, ids, and stable splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT
from geval_spec.errors import DataError
from geval_spec.dataset.cases import read_cases
from geval_spec.spec.load import load_spec
from geval_spec.spec.project import Project
from geval_spec.dataset.splits import assign_splits, hash_split, hash_unit

SPEC = """name: d
version: 1
task: t
criterion: {{name: C, description: D}}
steps: [s]
rubric:
  scale: {{min: 1, max: 2}}
  anchors: {{1: {{description: a}}, 2: {{description: b}}}}
scoring: {{method: direct}}
judge: {{model: openai/x}}
data:
  path: {path}
  id: meta.id
  group: meta.doc
  fields: {{source: ctx, candidate: out.text}}
  human: [r1, r2]
split: {{by: group, fractions: {{dev: 0.5, test: 0.5}}, seed: 3}}
calibration: {{split: all}}
"""

ROWS = [
    {"meta": {"id": "x1", "doc": "g1"}, "ctx": ["first passage", "second passage"], "out": {"text": "cand one"},
     "r1": 1, "r2": 2},
    {"meta": {"id": "x2", "doc": "g1"}, "ctx": ["p"], "out": {"text": "cand two"}, "r1": 2, "r2": None},
    {"meta": {"id": "x3", "doc": "g2"}, "ctx": ["q"], "out": {"text": "cand three"}, "r1": None, "r2": None},
]


def write(tmp: Path, fmt: str) -> Path:
    specs = tmp / "specs"
    specs.mkdir(exist_ok=True)
    path = specs / f"data.{fmt}"
    if fmt == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    elif fmt == "json":
        path.write_text(json.dumps(ROWS))
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(ROWS), path)
    (specs / "d.yaml").write_text(SPEC.format(path=path.name))
    return tmp


@pytest.mark.parametrize("fmt", ["jsonl", "json", "parquet"])
def test_nested_fields_lists_and_raters(tmp_path, fmt):
    proj = Project(write(tmp_path, fmt))
    ds = read_cases(load_spec(proj.resolve("d")))
    c1, c2, c3 = ds.cases
    assert c1.id == "x1" and c1.group == "g1"
    assert c1.fields["source"] == "first passage\n\nsecond passage"
    assert c1.fields["candidate"] == "cand one"
    assert c1.human == (1.0, 2.0) and c1.human_mean == 1.5
    assert c2.human == (2.0, None) and c2.human_mean == 2.0
    assert c3.human_mean is None


def test_equal_human_scores_are_one_tuple_and_minus_zero_is_zero(tmp_path):
    """A run holds every case to the end (their scores, for the gate): the few distinct human-score tuples are
    kept once, not once a case (72 bytes a case at 100,000 cases); -0.0 is 0.0, so sharing never changes a value."""
    specs = tmp_path / "specs"
    specs.mkdir()
    rows = [{"meta": {"id": f"x{i}", "doc": "g"}, "ctx": ["c"], "out": {"text": "t"}, "r1": v, "r2": 2}
            for i, v in enumerate([1, 1.0, "1", -0.0, 0, "-0.0", None])]
    (specs / "data.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (specs / "d.yaml").write_text(SPEC.format(path="data.jsonl"))
    cases = read_cases(load_spec(Project(tmp_path).resolve("d"))).cases
    assert cases[0].human is cases[1].human is cases[2].human and cases[0].human == (1.0, 2.0)
    assert cases[3].human is cases[4].human is cases[5].human
    assert [repr(c.human[0]) for c in cases[3:6]] == ["0.0", "0.0", "0.0"] and cases[6].human == (None, 2.0)


def test_the_engines_sent_hashes_answer_as_a_set_of_the_hashes_would():
    import hashlib

    from geval_spec.runner.engine import _Hashes

    hashes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(200)]
    sent = _Hashes()
    sent.update(hashes[:50])
    sent.add(hashes[60])
    assert [h in sent for h in hashes] == [i < 50 or i == 60 for i in range(200)]


def test_csv(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "data.csv").write_text("id,src,cand,score,doc\na,\"one, two\",c1,3,g\nb,s2,c2,1.5,h\n")
    (specs / "d.yaml").write_text(SPEC.format(path="data.csv").replace("meta.id", "id").replace("meta.doc", "doc")
                                  .replace("ctx", "src").replace("out.text", "cand")
                                  .replace("[r1, r2]", "score"))
    ds = read_cases(load_spec(Project(tmp_path).resolve("d")))
    assert [c.id for c in ds.cases] == ["a", "b"]
    assert ds.cases[0].fields["source"] == "one, two" and ds.cases[1].human == (1.5,)


def test_duplicate_ids_are_listed(tmp_path):
    write(tmp_path, "jsonl")
    path = tmp_path / "specs" / "data.jsonl"
    path.write_text(path.read_text() + json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[1]) + "\n")
    with pytest.raises(DataError) as info:
        read_cases(load_spec(Project(tmp_path).resolve("d")))
    msg = info.value.problems[0].message
    assert "'x1' (lines 1, 4)" in msg and "'x2' (lines 2, 5)" in msg


def test_unreadable_file_is_a_data_error(tmp_path):
    write(tmp_path, "jsonl")
    (tmp_path / "specs" / "data.jsonl").write_text("{not json\n")
    with pytest.raises(DataError, match=r"data.jsonl \(line 1\): not valid JSON"):
        read_cases(load_spec(Project(tmp_path).resolve("d")))


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_key_given_twice_in_a_record_is_an_error_not_its_last_value(tmp_path, fmt):
    """json.loads keeps the last of two values of a key silently: a record that names a key twice (at its top, or
    in an object inside it) is refused at its line or record, as an import file's line is."""
    write(tmp_path, fmt)
    path = tmp_path / "specs" / f"data.{fmt}"
    first = json.dumps(ROWS[0])
    other = json.dumps(ROWS[1])
    for record, key in ((first[:-1] + ', "meta": {"id": "x9", "doc": "g1"}}', "meta"),
                        (first.replace('"id": "x1"', '"id": "x1", "id": "x7"'), "id")):
        if fmt == "jsonl":
            path.write_text(f"{other}\n{record}\n")
            where = r"data.jsonl \(line 2\)"
        else:
            path.write_text(f"[{other},\n {record}]")
            where = r"data.json \(the file\)"
        with pytest.raises(DataError, match=rf"{where}: key '{key}' is given twice in one object"):
            read_cases(load_spec(Project(tmp_path).resolve("d")))


def test_a_parquet_file_that_names_a_column_twice_is_refused(tmp_path):
    """pyarrow reads two columns of one name into a record that keeps the last: the human scores of the second
    'human' column were used without a word. Refused, as a CSV's repeated header is (at the top, or in a struct)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from geval_spec.dataset.readers import read_parquet
    from geval_spec.files import ReadError

    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["a", "b"]), pa.array([1, 2]), pa.array([5, 5])],
                                        names=["id", "human", "human"]), path)
    with pytest.raises(ReadError, match=r"duplicate column name\(s\) 'human'"):
        read_parquet(path)
    meta = pa.StructArray.from_arrays([pa.array(["x", "y"]), pa.array(["z", "w"])], names=["doc", "doc"])
    pq.write_table(pa.Table.from_arrays([pa.array(["a", "b"]), meta], names=["id", "meta"]), path)
    with pytest.raises(ReadError, match=r"duplicate column name\(s\) 'meta.doc'"):
        read_parquet(path)
    pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array([1])], names=["id", "human"]), path)
    assert read_parquet(path).rows == [{"id": "a", "human": 1}]


def test_a_nan_or_infinite_id_or_label_is_an_error_at_its_line(tmp_path):
    """JSON as Python reads it takes NaN and Infinity: such an id became the case 'nan' (true, lists and objects
    were refused)."""
    write(tmp_path, "jsonl")
    path = tmp_path / "specs" / "data.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1].replace('"id": "x2"', '"id": NaN'),
                               lines[2].replace('"doc": "g2"', '"doc": Infinity')]) + "\n")
    with pytest.raises(DataError) as caught:
        read_cases(load_spec(Project(tmp_path).resolve("d")))
    text = "\n".join(f"{p.message} {p.hint}" for p in caught.value.problems)
    assert "the id at 'meta.id' is nan (not a finite number)" in text and "line 2" in text
    assert "inf (not a finite number): a label is text or a number" in text and "line 3" in text


def test_values_show_in_a_prompt_as_json_writes_them_and_bytes_as_text():
    """A list's null and true showed as Python's None and True (an object already showed as JSON), and a
    Parquet binary column (text, as some writers store it) as b'...'."""
    from decimal import Decimal

    from geval_spec.dataset.cases import _as_label, _as_number, as_text

    assert as_text([1, None, {"a": 2}, True, 2.0]) == '1\n\nnull\n\n{"a": 2}\n\ntrue\n\n2'
    assert as_text(b"caf\xc3\xa9 \xff") == "caf\u00e9 \ufffd" and _as_label(b"id-1") == "id-1"
    assert _as_label(b"\x12\xff\x00") == "12ff00"  # (binary that is no text, e.g. a UUID: unique, as hex digits)
    assert _as_number(Decimal("3.50")) == 3.5 and _as_number(Decimal("NaN")) is None  # a Parquet decimal score


def test_a_json_data_file_that_is_not_json_is_named_by_its_line(tmp_path):
    write(tmp_path, "json")
    path = tmp_path / "specs" / "data.json"
    path.write_text("[\n" + json.dumps(ROWS[0]) + ",\n" + json.dumps(ROWS[1])[:-1] + ",}\n]\n")
    with pytest.raises(DataError) as caught:
        read_cases(load_spec(Project(tmp_path).resolve("d")))
    assert "data.json (line 3): not valid JSON: Expecting property name" in caught.value.problems[0].message


def test_hash_split_is_stable_across_machines():
    # the documented definition: SHA-256 of "<seed>:<key>", first 8 bytes big-endian / 2**64
    import hashlib

    digest = hashlib.sha256(b"7:doc-1").digest()
    assert hash_unit(7, "doc-1") == int.from_bytes(digest[:8], "big") / 2**64 == 0.7176577258037262
    fr = {"examples": 0.1, "dev": 0.45, "test": 0.45}
    got = [hash_split(7, f"g{i}", fr) for i in range(12)]
    assert got == ["test", "test", "examples", "test", "test", "test", "test", "test", "test", "dev", "test",
                   "examples"]


def test_groups_never_span_splits():
    p = load_spec(Project(ROOT).resolve("summeval-consistency"))
    ds = read_cases(p)
    splits = assign_splits(p.spec, ds.cases)
    by_group: dict[str, set] = {}
    for c in ds.cases:
        by_group.setdefault(c.group, set()).add(splits[c.id])
    assert all(len(s) == 1 for s in by_group.values())
    counts = {s: list(splits.values()).count(s) for s in ("dev", "test")}
    assert counts["dev"] > 50 and counts["test"] > 50


def test_a_cases_fields_read_like_the_dict_they_replace():
    """Fields share their names across a file's cases; as a mapping they are the dict of the present values."""

    from geval_spec.dataset.cases import Fields

    index = {"source": 0, "candidate": 1, "reference": 2}
    f = Fields(index, ("s", "c", None))
    assert dict(f) == {"source": "s", "candidate": "c"} and f == {"source": "s", "candidate": "c"}
    assert list(f) == ["source", "candidate"] and len(f) == 2 and "reference" not in f
    assert f.get("reference", "") == "" and f["candidate"] == "c" and repr(f) == repr(dict(f))
    with pytest.raises(KeyError):
        f["reference"]
    with pytest.raises(KeyError):
        f["other"]
    with pytest.raises(TypeError):
        f["source"] = "x"  # type: ignore[index]
    assert not hasattr(f, "__dict__")


_NAMES = st.text(max_size=6)
_VALUES = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["\x00\x1f\"\\\n\t", "é\u2028日本"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(_NAMES, _VALUES, max_size=5), st.booleans()), max_size=6))
def test_fields_json_is_json_dumps_of_the_fields_and_the_case_keys_are_kept(records):
    """A case's fields in its reuse key are ``json.dumps(dict(fields), sort_keys=True, ensure_ascii=False)``:
    fields_json writes exactly that, for Fields sharing an index or not and for plain dicts, so the keys of
    judgments stored by earlier versions still match (an unchanged rerun sends nothing after an upgrade)."""
    import hashlib
    from types import SimpleNamespace

    from geval_spec.dataset.cases import Case, Fields, fields_json
    from geval_spec.runner.run import JUDGMENT_VERSION, case_keys

    shared: dict[str, int] = {}
    cases = []
    for n, (record, plain) in enumerate(records):
        if plain:
            fields = {k: v for k, v in record.items() if v is not None}
        else:
            index = shared if set(record) <= set(shared) else {k: i for i, k in enumerate(record)}
            shared = index
            values = [None] * len(index)
            for k, v in record.items():
                values[index[k]] = v
            fields = Fields(index, tuple(values))
        cases.append(Case(id=f"c{n}", row=n + 1, fields=fields, human=(1.0,)))
    expected = [json.dumps(dict(c.fields), sort_keys=True, ensure_ascii=False) for c in cases]
    assert list(fields_json(cases)) == expected
    spec = SimpleNamespace(spec=SimpleNamespace(language=None), judging_fp="fp")
    base = json.dumps(["fp", JUDGMENT_VERSION, [], ""])
    assert case_keys(spec, cases, []) == {  # type: ignore[arg-type]
        c.id: hashlib.sha256((base + "\x00" + c.id + "\x00" + e).encode("utf-8")).hexdigest()
        for c, e in zip(cases, expected)}


# characters at which str.splitlines() breaks a line, which a JSON string may hold as they are
SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r"]


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_json_line_may_hold_any_line_separator_in_a_string(tmp_path, ending):
    """JSON Lines end at a newline only: U+2028, NEL, form feed and the rest inside a string stay in its record."""
    write(tmp_path, "jsonl")
    rows = [dict(ROWS[0], out={"text": f"a{sep}b"}, meta={"id": f"x{i}", "doc": "g1"}) for i, sep in
            enumerate(SEPARATORS)]
    text = ending.join(json.dumps(r, ensure_ascii=False) for r in rows) + ending
    (tmp_path / "specs" / "data.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))  # with a BOM
    cases = read_cases(load_spec(Project(tmp_path).resolve("d"))).cases
    assert [c.fields["candidate"] for c in cases] == [f"a{sep}b" for sep in SEPARATORS]
    assert [c.row for c in cases] == list(range(1, len(SEPARATORS) + 1))


def test_a_data_line_that_is_not_utf8_or_too_long_is_named(tmp_path, monkeypatch):
    write(tmp_path, "jsonl")
    path = tmp_path / "specs" / "data.jsonl"
    parsed = load_spec(Project(tmp_path).resolve("d"))  # (before the limits below, which bound the spec too)
    good = json.dumps(ROWS[0]).encode()
    path.write_bytes(good + b"\n" + good.replace(b"cand one", b"cand \xff") + b"\n")
    byte = len(good) + 1 + good.index(b"cand one") + 6
    with pytest.raises(DataError, match=rf"data.jsonl \(line 2\): data file is not UTF-8 text \(byte {byte}\)"):
        read_cases(parsed)
    path.write_bytes(good + b"\n" + good + b"x" * 100 + b"\n")
    monkeypatch.setenv("GEVAL_MAX_LINE_BYTES", str(len(good) + 50))
    with pytest.raises(DataError, match=r"line 2 of the data file is too long: more than the limit of"):
        read_cases(parsed)
    path.write_bytes((good + b"\r\n") * 2)  # a line at the limit, and its \r\n, is read
    monkeypatch.setenv("GEVAL_MAX_LINE_BYTES", str(len(good)))
    with pytest.raises(DataError, match="duplicate case ids"):  # (both lines are read)
        read_cases(parsed)
    monkeypatch.setenv("GEVAL_MAX_READ_BYTES", str(2 * len(good) + 3))
    with pytest.raises(DataError, match="too large"):
        read_cases(parsed)


def test_lines_of_a_text_end_at_newlines_only():
    from geval_spec.files import lines

    text = "a\u2028b\r\n\nc\x85d\re\n" + "last"
    assert list(lines(text)) == [(1, "a\u2028b"), (2, ""), (3, "c\x85d\re"), (4, "last")]
    assert list(lines("")) == [] and list(lines("x\n")) == [(1, "x")]


_JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                      st.text(max_size=6)),
                            lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                    st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                            max_leaves=12)
_AROUND = st.sampled_from(["", " ", "\t", "\r", "\n", "\ufeff", "x", ",", "}", "{}", " 1", "\u2028"])


def _decoded(text: str) -> tuple[str, object]:
    from geval_spec.dataset.readers import _decode
    from geval_spec.files import ReadError

    try:
        return "value", _decode(text, "line 1")
    except ReadError as exc:
        return "error", str(exc)


def _decoded_by_json_loads(text: str) -> tuple[str, object]:
    """The reading before the scanner's fast path: json.loads, and its words for an error (a key given twice in
    one object is an error, not its last value)."""
    from geval_spec.files import KeyTwice, ReadError, keys_once
    from geval_spec.redact import SURROGATE, lone_surrogate

    try:
        value = json.loads(text, object_pairs_hook=keys_once)
    except RecursionError:
        return "error", str(ReadError("JSON nested too deeply", where="line 1"))
    except KeyTwice as exc:
        return "error", str(ReadError(str(exc), where="line 1"))
    except ValueError as exc:
        return "error", str(ReadError(f"not valid JSON: {getattr(exc, 'msg', str(exc))}", where="line 1"))
    if lone_surrogate(text, value):
        return "error", str(ReadError(f"a value {SURROGATE}", where="line 1"))
    return "value", value


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=5), _JSON_VALUES, max_size=4), _AROUND, _AROUND, st.booleans(),
       st.integers(0, 40), st.booleans())
def test_a_data_line_is_read_as_json_loads_reads_it(obj, before, after, ascii, cut, nested):
    """A JSON Lines record is decoded by json's scanner when the line is one object and nothing else, else by
    json.loads: the same value or the same error, whatever is around the object or missing from it."""
    text = before + json.dumps(obj, ensure_ascii=ascii) + after
    if nested:
        text = '{"a": ' + "[" * 3000 + "]" * 3000 + "}"
    for candidate in (text, text[:cut] + text[cut + 1:], text.replace('"', "\\ud800\"", 1)):
        assert _decoded(candidate) == _decoded_by_json_loads(candidate)


def test_a_csv_value_may_be_as_long_as_a_line(tmp_path, monkeypatch):
    """Python's csv refused a field over 128 KiB ("field larger than field limit (131072)", at the line where the
    limit was crossed); a value may be as long as GEVAL_MAX_LINE_BYTES, and a longer one is named by the line its
    record starts on."""
    from geval_spec.dataset.readers import read_csv
    from geval_spec.files import ReadError

    path = tmp_path / "d.csv"
    long = "word " * 60_000  # 300 KB
    path.write_text(f'id,text\na,"short"\nb,"{long}\n{long}"\nc,x\n', encoding="utf-8")
    records = read_csv(path)
    assert [r["id"] for r in records.rows] == ["a", "b", "c"] and len(records.rows[1]["text"]) == 2 * len(long) + 1
    monkeypatch.setenv("GEVAL_MAX_LINE_BYTES", "100K")
    with pytest.raises(ReadError) as caught:
        read_csv(path)
    assert "record that starts on line 3" in str(caught.value) and caught.value.where == "line 3"


ON_DISK_LINES = [  # a byte-order mark, CRLF and LF, blank lines, text of every script, a line separator in a value
    '\ufeff{"meta": {"id": "x1", "doc": "g1"}, "ctx": ["erste Stelle", "z\u00fcrich"], "out": {"text": "\u00e9\u00e9n"}, '
    '"r1": 1, "r2": 2}\r\n',
    "\n",
    '{"meta": {"id": "x2", "doc": "g1"}, "ctx": ["\u0142\u00f3d\u017a \u2028 \U0001f600"], "out": {"text": 5}, '
    '"r1": 2, "r2": null}\n',
    "   \r\n",
    '{"meta": {"id": 3, "doc": "g2"}, "ctx": ["q"], "out": {"text": "last, no newline"}, "r1": null, "r2": null}',
]


def _on_disk_project(tmp: Path) -> Path:
    write(tmp, "jsonl")
    (tmp / "specs" / "data.jsonl").write_bytes("".join(ON_DISK_LINES).encode("utf-8"))
    return tmp


def test_a_json_lines_files_texts_stay_on_disk_and_are_read_again_as_they_were(tmp_path):
    from geval_spec.dataset.cases import Fields, OnDisk, with_texts

    parsed = load_spec(Project(_on_disk_project(tmp_path)).resolve("d"))
    full = read_cases(parsed).cases
    seen = []
    lean = read_cases(parsed, on_disk=True, on_case=seen.append).cases
    assert [c.id for c in full] == ["x1", "x2", "3"] and all(type(c.fields) is Fields for c in full)
    assert all(type(c.fields) is OnDisk for c in lean)
    assert seen == list(full)  # each case with its texts, as it is read
    assert [(c.id, c.row, c.human, c.group) for c in lean] == [(c.id, c.row, c.human, c.group) for c in full]
    assert with_texts(lean) == list(full)
    assert with_texts(list(reversed(lean))) == list(reversed(full))  # read in the file's order, given in any
    assert with_texts([lean[1], full[0]]) == [full[1], full[0]]
    assert [dict(c.fields) for c in lean] == [dict(c.fields) for c in full]  # looked at one by one, as a fallback
    assert full[1].fields["candidate"] == "5" and "\u2028" in full[1].fields["source"]
    # other formats are read whole
    write(tmp_path, "json")
    (tmp_path / "specs" / "d.yaml").write_text(SPEC.format(path="data.json"))
    whole = read_cases(load_spec(Project(tmp_path).resolve("d")), on_disk=True).cases
    assert all(type(c.fields) is Fields for c in whole)


CSV_SPEC = (SPEC.format(path="data.csv").replace("meta.id", "id").replace("meta.doc", "doc").replace("ctx", "src")
            .replace("out.text", "cand").replace("[r1, r2]", "score"))
ON_DISK_CSV = (  # a byte-order mark; CRLF, LF and a lone CR; quoted values across lines (CRLF, LF, CR inside);
    "\ufeffid,src,cand,score,doc\r\n"  # a quote doubled; a blank line; text of every script; no newline at the end
    'x1,"erste Stelle\r\nzweite ""Stelle""",\u00e9\u00e9n,1,g1\r\n'
    "\r\n"
    'x2,"\u0142\u00f3d\u017a \u2028 \U0001f600\nline two\rline three",5,2,g1\r'
    "x3,q,\"a, b\",,g2\n"
    "x4,last,no newline,1,g2")


def _csv_project(tmp: Path) -> Path:
    specs = tmp / "specs"
    specs.mkdir(exist_ok=True)
    (specs / "data.csv").write_bytes(ON_DISK_CSV.encode("utf-8"))
    (specs / "d.yaml").write_text(CSV_SPEC)
    return tmp


def test_a_csv_files_texts_stay_on_disk_and_are_read_again_as_they_were(tmp_path):
    """CSV was read whole, its texts held by every case through a run (about 2 KB a case: 200 MB at 100,000
    cases); now its records are read one at a time and their texts read again where they start, as JSON Lines'."""
    from geval_spec.dataset.cases import Fields, OnDisk, with_texts

    parsed = load_spec(Project(_csv_project(tmp_path)).resolve("d"))
    full = read_cases(parsed).cases
    seen = []
    lean = read_cases(parsed, on_disk=True, on_case=seen.append).cases
    assert [(c.id, c.row) for c in full] == [("x1", 1), ("x2", 2), ("x3", 3), ("x4", 4)]
    assert all(type(c.fields) is Fields for c in full) and all(type(c.fields) is OnDisk for c in lean)
    assert full[0].fields["source"] == 'erste Stelle\r\nzweite "Stelle"' and full[2].fields["candidate"] == "a, b"
    assert full[1].fields["source"] == "\u0142\u00f3d\u017a \u2028 \U0001f600\nline two\rline three"
    assert [c.human for c in full] == [(1.0,), (2.0,), (None,), (1.0,)]
    assert seen == list(full)
    assert with_texts(lean) == list(full)
    assert with_texts(list(reversed(lean))) == list(reversed(full))
    assert [dict(c.fields) for c in lean] == [dict(c.fields) for c in full]
    positions = {c.id: c.fields.line for c in lean}  # the line each record starts on, as csv counts lines
    assert positions == {"x1": 2, "x2": 5, "x3": 8, "x4": 9}


def _csv_reference(data: bytes) -> tuple[tuple[str, ...], list[tuple[dict, int]]]:
    """The records as the reader before streaming read them: the whole text through io.StringIO."""
    import csv
    import io

    reader = csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""), strict=True)
    header = next(reader, None)
    if header is None:
        return (), []
    rows, start = [], reader.line_num + 1
    for cells in reader:
        if cells:
            assert len(cells) == len(header)
            rows.append(({k: (v if v != "" else None) for k, v in zip(header, cells)}, start))
        start = reader.line_num + 1
    return tuple(header), rows


_CELL = st.text(alphabet=st.sampled_from(list('ab ,"\r\n\u00e9\u2028\U0001f600')), max_size=8)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.lists(_CELL, min_size=2, max_size=2), max_size=6),
       ends=st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=8, max_size=8),
       blank=st.integers(0, 7), bom=st.booleans(), last_end=st.booleans())
def test_csv_streamed_reads_what_the_whole_file_reader_read_and_each_record_again(tmp_path_factory, rows, ends,
                                                                                 blank, bom, last_end):
    import csv
    import io

    from geval_spec.dataset.readers import CsvRows, read_csv
    from geval_spec.files import LinesAgain

    lines = ["h1,h2"]
    for cells in rows:
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(cells)
        lines.append(out.getvalue())
    if 0 < blank < len(lines):
        lines.insert(blank, "")  # (a blank line, which is no record)
    text = "".join(line + ends[i % len(ends)] for i, line in enumerate(lines))
    if not last_end:
        text = text.rstrip("\r\n")  # (a quoted value's own line ends stay: its closing quote stops this)
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    path = tmp_path_factory.mktemp("csv") / "d.csv"
    path.write_bytes(data)
    try:
        header, want = _csv_reference(data)
    except (csv.Error, AssertionError):
        return  # (a cell's lone CR or a cut quote the writer's quoting does not cover: no valid CSV to compare)
    got = read_csv(path)
    assert got.columns == header and [(r, p) for r, p in zip(got.rows, got.positions)] == want
    opened: list = []
    stream = CsvRows(path, opened)
    triples = list(stream)
    with LinesAgain(path, "data file", opened[0]) as again:
        for row, n, start in reversed(triples):  # (out of order: each read from where it starts)
            assert stream.record_at(again, start, n) == row


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=40).map(lambda b: bytes(b"ab\r\n"[x % 4] for x in b)),
       cuts=st.lists(st.integers(1, 40), max_size=8), at=st.integers(0, 5))
def test_csv_lines_are_cut_as_io_cuts_them_wherever_the_chunks_end(data, cuts, at):
    """Lines end at \\n, \\r\\n or a lone \\r (io's newline=""), also when a chunk ends between a \\r and its \\n."""
    import io

    from geval_spec.dataset.readers import _byte_lines

    chunks, pos = [], 0
    for cut in sorted(set(cuts)):
        if pos < cut < len(data):
            chunks.append(data[pos:cut])
            pos = cut
    chunks.append(data[pos:])
    want = [line.encode("latin-1") for line in io.StringIO(data.decode("latin-1"), newline="")]
    got = list(_byte_lines([c for c in chunks if c], at))
    assert [line for line, _ in got] == want
    assert [start for _, start in got] == [at + sum(map(len, want[:i])) for i in range(len(want))]


def test_a_csv_record_is_read_again_from_its_own_bytes_whatever_its_lines_end_with(tmp_path, monkeypatch):
    """A file whose lines end in a lone CR has no \\n: each record read again was read to the file's end (3,000
    cases of 1 KB: a dry run took 87 s against 2.2 s with CRLF)."""
    from geval_spec.dataset.cases import with_texts
    from geval_spec.files import LinesAgain

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "d.yaml").write_text(CSV_SPEC)
    read = []
    real = LinesAgain.read
    monkeypatch.setattr(LinesAgain, "read", lambda self, start, size: read.append(real(self, start, size)) or read[-1])
    for end in ("\r", "\r\n", "\n"):
        rows = "".join(f"x{i},{'s' * 1000},c,1,g{i}{end}" for i in range(2000))
        (specs / "data.csv").write_text(f"id,src,cand,score,doc{end}{rows}", newline="")
        parsed = load_spec(Project(tmp_path).resolve("d"))
        read.clear()
        texts = with_texts(read_cases(parsed, on_disk=True).cases)
        assert texts == list(read_cases(parsed).cases)
        assert sum(map(len, read)) <= 2000 * 2 * 4096, end  # (each record's own few KB, not the rest of the file)


@pytest.mark.parametrize("data", [b"a\n" + b"\n" * 50_000, b"a\n" + b"\r" * 50_000, b"a\r" + b"x\r" * 50_000])
def test_reading_a_csv_file_holds_neither_it_nor_its_lines_places(tmp_path, data):
    """The places of every line read (one int each) and the pieces of a file whose only line end is a lone CR (one
    "line" to readline) were held: 1.3-1.6 GB for 32 MB files."""
    import tracemalloc

    from geval_spec.dataset.readers import CsvRows

    path = tmp_path / "d.csv"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        count = sum(1 for _ in CsvRows(path))  # (the records are not kept)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == (50_000 if b"x" in data else 0) and peak < 1 << 20, peak


def test_a_csv_record_is_read_again_under_its_own_field_limit_and_utf8_errors_name_their_byte(tmp_path,
                                                                                                monkeypatch):
    import csv

    from geval_spec.dataset.cases import with_texts
    from geval_spec.dataset.readers import read_csv
    from geval_spec.files import ReadError

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "d.yaml").write_text(CSV_SPEC)
    (specs / "data.csv").write_text(f"id,src,cand,score,doc\nx1,{'s' * 200_000},c,1,g\n")
    parsed = load_spec(Project(tmp_path).resolve("d"))
    lean = read_cases(parsed, on_disk=True).cases
    old = csv.field_size_limit(131072)  # another reader in the process set it since
    try:
        assert with_texts(lean) == list(read_cases(parsed).cases)
    finally:
        csv.field_size_limit(old)
    path = tmp_path / "x.csv"
    for data, byte, line in ((b"\xef\xbb\xbf\xff", 4, 1), (b"\xef\xbb\xbfa,b\n1,\xff\n", 10, 2),
                             (b"a,b\r1,2\r\xff\n", 9, 3)):
        path.write_bytes(data)
        with pytest.raises(ReadError) as caught:
            read_csv(path)
        assert f"not UTF-8 text (byte {byte})" in str(caught.value) and caught.value.where == f"line {line}"


@pytest.mark.parametrize("change", ["append", "rewrite", "replace", "same size", "time put back"])
def test_a_data_file_changed_while_its_texts_are_on_disk_is_an_error(tmp_path, change):
    import os

    from geval_spec.dataset.cases import with_texts

    parsed = load_spec(Project(_on_disk_project(tmp_path)).resolve("d"))
    lean = read_cases(parsed, on_disk=True).cases
    path = tmp_path / "specs" / "data.jsonl"
    data = path.read_bytes()
    if change == "append":
        with path.open("ab") as fh:
            fh.write(b"\n")
    elif change == "rewrite":
        path.write_bytes(data.replace(b"erste", b"first"))
    elif change == "replace":  # another file in its place, same bytes
        (tmp_path / "specs" / "new.jsonl").write_bytes(data)
        os.replace(tmp_path / "specs" / "new.jsonl", path)
    elif change == "same size":
        path.write_bytes(data.replace(b"erste", b"ERSTE"))
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1))
    else:  # as cp -p or rsync -t over it: the same size, the contents' time set back (the inode's time moves)
        before = path.stat()
        path.write_bytes(data.replace(b"erste", b"ERSTE"))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(DataError) as err:
        with_texts(lean)
    message = str(err.value.problems[0])
    assert "data.jsonl" in message and "changed while it was in use" in message


@pytest.mark.parametrize("change", ["append", "rewrite"])
def test_a_csv_file_changed_while_its_texts_are_on_disk_is_an_error(tmp_path, change):
    from geval_spec.dataset.cases import with_texts

    lean = read_cases(load_spec(Project(_csv_project(tmp_path)).resolve("d")), on_disk=True).cases
    path = tmp_path / "specs" / "data.csv"
    if change == "append":
        with path.open("ab") as fh:
            fh.write(b"\nx5,a,b,1,g3\n")
    else:
        path.write_bytes(path.read_bytes().replace(b"erste", b"first"))
    with pytest.raises(DataError) as err:
        with_texts(lean)
    message = str(err.value.problems[0])
    assert "data.csv" in message and "changed while it was in use" in message
