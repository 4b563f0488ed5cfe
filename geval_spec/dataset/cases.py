"""A spec's data file -> frozen :class:`Case` values (a :class:`Dataset`).

Files are read by :mod:`geval_spec.dataset.readers` (JSON, JSON Lines, CSV,
Parquet). Template variables come from dotted paths into each record; a list
becomes its items joined by blank lines. Case ids must be unique, also
when compared without case, surrounding whitespace and Unicode normalisation;
group, system and category are optional. A case whose human value is empty
(null, "" or absent, or NaN) is unlabelled; an infinite one, one outside
``data.human_scale`` or (without a scale) one beyond 1e9 is an error. Every problem names the data file, the line or
record, and the spec key that asked for the value.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from geval_spec.dataset.fields import MISSING as _MISSING
from geval_spec.dataset.fields import (Fields, FieldsJson, OnDisk, TextSource, as_text, fields_json,  # noqa: F401
                                       lookup)
from geval_spec.dataset.readers import file_format, stream_records
from geval_spec.errors import DataError, Problem
from geval_spec.files import FileIdentity, ReadError
from geval_spec.spec.sections import HumanScale
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import SPLITS, SplitByField, Spec
from geval_spec.spec.yamldoc import Path as KeyPath
from geval_spec.values import frozen


KeyProblem = Callable[[KeyPath, str], Problem]
MAX_HUMAN = 1e9  # without data.human_scale, a human score beyond this is no rating anyone meant
# a number written as text (a CSV cell): ASCII digits, a point, an exponent, or nan / inf as float() reads them
_PLAIN_NUMBER = re.compile(r"\s*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf|infinity)\s*",
                           re.IGNORECASE | re.ASCII)


def with_texts(cases: Iterable["Case"]) -> list["Case"]:
    """``cases`` with the texts of those whose fields are :class:`OnDisk` read from their file (one open a file)."""
    out = list(cases)
    places = [(i, f) for i, c in enumerate(out) if type(f := c.fields) is OnDisk]
    sources = {id(f.source): f.source for _, f in places}
    for source in sources.values():
        mine = places if len(sources) == 1 else [(i, f) for i, f in places if f.source is source]
        for (i, _), loaded in zip(mine, source.load([(f.start, f.line) for _, f in mine])):
            out[i] = out[i].with_fields(loaded)
    return out


@dataclass(frozen=True, slots=True)  # slots: a run reads every case first (6 MB less at 100k cases)
class Case:
    """One case of the data: its id, record number, fields, human scores and labels."""

    id: str
    row: int  # 1-based record number in the file
    fields: Mapping[str, str]
    human: tuple[float | None, ...]  # one value per rater column
    group: str | None = None
    system: str | None = None
    category: str | None = None
    family: str | None = None
    split_value: str | None = None  # raw value of split.field, when the spec uses a column

    @property
    def human_mean(self) -> float | None:
        vals = [h for h in self.human if h is not None]
        return sum(vals) / len(vals) if vals else None

    @property
    def unit(self) -> str:
        return self.group if self.group is not None else self.id

    def with_fields(self, fields: Mapping[str, str]) -> "Case":
        """The case with these fields (as ``dataclasses.replace``, in a third of its time: a run makes two
        copies of every case)."""
        return Case(self.id, self.row, fields, self.human, self.group, self.system, self.category, self.family,
                    self.split_value)


@frozen
class Dataset:
    """The cases of a data file, with the file's path, digest and columns."""

    path: Path
    display: str
    cases: tuple[Case, ...]
    sha256: str
    columns: tuple[str, ...] = field(default=())

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}

    def without_texts(self) -> "Dataset":
        """The same cases without their template fields: ids, human scores, groups and splits, which is what the
        gate at the end of a run reads. A run makes these copies as it lets each case go (runner.run._TextFree),
        so that it does not hold every case's texts until it ends."""
        return replace(self, cases=tuple(without_texts(c) for c in self.cases))


_NO_FIELDS = Fields({}, ())


def without_texts(case: Case) -> Case:
    """``case`` without its template fields (see :meth:`Dataset.without_texts`)."""
    return case.with_fields(_NO_FIELDS)


def not_a_label(value: Any) -> str | None:
    """What a value is when it cannot be an id or a label (true/false, an object, a list), else None."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} (not a finite number)"
    return None


def _as_label(value: Any) -> str | None:
    if type(value) is str:
        return value
    if value is None or value is _MISSING:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (bytes, bytearray)):  # (text a writer stored as binary; else, as a UUID is, its hex digits)
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(value).hex()
    return str(value)


def _as_number(value: Any) -> Any:
    """A float (-0.0 is 0.0), None when the value is empty (unlabelled), or _MISSING when it is not a number."""
    if value is None or value is _MISSING or value == "":
        return None
    if isinstance(value, bool):
        return _MISSING
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value) + 0.0
    if isinstance(value, str):
        if not _PLAIN_NUMBER.fullmatch(value):  # (float() also takes 1_0 as 10, and digits of other scripts)
            return _MISSING
        number = float(value)
        return None if math.isnan(number) else number + 0.0
    if isinstance(value, Decimal):  # (a Parquet decimal column, as SQL exports write scores)
        return None if value.is_nan() else float(value) + 0.0
    return _MISSING


def _human_out_of_range(number: float, scale: HumanScale | None) -> str | None:
    """Why a human score cannot be meant (infinite, off data.human_scale, astronomically large), or None."""
    if not math.isfinite(number):
        return "is not a finite number"
    if scale is not None and not scale.min <= number <= scale.max:
        return f"is outside data.human_scale {scale.min:g}..{scale.max:g}"
    if scale is None and abs(number) > MAX_HUMAN:
        return f"is too large to be a rating (beyond +-{MAX_HUMAN:g}; set data.human_scale if it is one)"
    return None


def _near_duplicates(cases: list[Case], positions: dict[str, int], unit: str) -> list[str]:
    """Ids that differ only in case, surrounding whitespace or Unicode normalisation: they name one case."""
    groups: dict[str, list[str]] = {}
    for c in cases:  # (NFKC leaves ASCII as it is, and casefold is lower there)
        i = c.id
        groups.setdefault(i.strip().lower() if i.isascii() else unicodedata.normalize("NFKC", i).strip().casefold(),
                          []).append(i)
    return ["; ".join(f"{i!r} ({unit} {positions[i]})" for i in ids) for ids in groups.values() if len(ids) > 1]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _Collector:
    """Collects problems per spec key, listing at most a few records each."""

    def __init__(self, display: str, key_problem: KeyProblem) -> None:
        self.display = display
        self.key_problem = key_problem
        self.found: dict[tuple[tuple[str, ...], str], list[str]] = {}

    def add(self, key: tuple[str, ...], what: str, record: str) -> None:
        self.found.setdefault((key, what), []).append(record)

    def problems(self) -> list[Problem]:
        out = []
        for (key, what), records in self.found.items():
            shown = ", ".join(records[:5]) + (f" and {len(records) - 5} more" if len(records) > 5 else "")
            out.append(self.key_problem(key, f"{self.display}: {what} ({shown})"))
        return out


class _CaseReader:
    """Turns records into cases; what the spec asks for is looked up once per file, not once per record."""

    def __init__(self, spec: Spec, bad: "_Collector"):
        d = spec.data
        self.bad = bad
        self.fields = tuple(d.fields.items())
        self.index = {var: i for i, (var, _) in enumerate(self.fields)}  # shared by every case's Fields
        self.labels: dict[str, str] = {}  # one string for each group, system, category and family label
        self.humans_seen: dict[tuple[float | None, ...], tuple[float | None, ...]] = {}  # one tuple of each value
        humans = [d.human] if isinstance(d.human, str) else list(d.human)
        keys: list[KeyPath] = [("data", "human")] if isinstance(d.human, str) else \
            [("data", "human", i) for i in range(len(humans))]
        self.humans = tuple(zip(humans, keys))
        self.scale = d.human_scale
        self.optional = tuple((attr, getattr(d, attr)) for attr in ("group", "system", "category", "model_family"))
        split = spec.split
        # (isinstance, not hasattr: hasattr on a pydantic model goes through __getattr__ and is slow)
        self.split_field = split.field if isinstance(split, SplitByField) else None

    def case(self, rec: dict[str, Any], case_id: str, n: int, where: str) -> Case:
        """One record as a case; what is wrong with it goes to the collector."""
        bad = self.bad
        values: list[str | None] = []
        for var, dotted in self.fields:
            value = lookup(rec, dotted)
            if value is _MISSING:
                bad.add(("data", "fields", var), f"no value at '{dotted}'", where)
                values.append(None)
            elif value is None:
                bad.add(("data", "fields", var), f"'{dotted}' is null", where)
                values.append(None)
            else:
                values.append(value if type(value) is str else as_text(value))
        human: list[float | None] = []
        for col, key in self.humans:
            number = _as_number(lookup(rec, col))
            if number is _MISSING:
                bad.add(key, f"human score at '{col}' is not a number", f"{where}: {lookup(rec, col)!r}")
                human.append(None)
                continue
            wrong = None if number is None else _human_out_of_range(number, self.scale)
            if wrong is not None:
                bad.add(key, f"human score at '{col}' {wrong}", f"{where}: {number:g}")
                human.append(None)
            else:
                human.append(number)
        optional: dict[str, str | None] = {}
        for attr, col in self.optional:
            if col is None:
                optional[attr] = None
                continue
            value = lookup(rec, col)
            if value is _MISSING or value is None:
                bad.add(("data", attr), f"no value at '{col}'", where)
            elif (kind := not_a_label(value)) is not None:
                bad.add(("data", attr), f"the value at '{col}' is {kind}: a label is text or a number", where)
            label = _as_label(value)
            optional[attr] = label if label is None else self.labels.setdefault(label, label)
        split_value = None
        if self.split_field is not None:
            value = lookup(rec, self.split_field)
            if value is _MISSING or value is None:
                bad.add(("split", "field"), f"no split at '{self.split_field}'", where)
            else:
                split_value = _as_label(value)
                if split_value not in SPLITS:
                    bad.add(("split", "field"), f"split must be {', '.join(SPLITS[:-1])} or {SPLITS[-1]}",
                            f"{where}: {split_value!r}")
        scores = tuple(human)  # (the same few tuples for every case: 72 bytes a case, 7 MB at 100,000, kept once)
        return Case(id=case_id, row=n, fields=Fields(self.index, tuple(values)),
                    human=self.humans_seen.setdefault(scores, scores),
                    group=optional["group"], system=optional["system"], category=optional["category"],
                    family=optional["model_family"], split_value=split_value)


def load_dataset(spec: Spec, path: Path, display: str, key_problem: KeyProblem, on_disk: bool = False,
                 on_case: Callable[[Case], None] | None = None) -> Dataset:
    """Read the spec's data file into cases.

    ``key_problem(path_tuple, message)`` makes a Problem pointing at a key of
    the spec, so data errors lead back to the line that asked for the data.
    ``on_disk``: a JSON Lines or CSV file's cases leave their texts in the file
    (:class:`OnDisk`: a run reads them again a chunk at a time); other formats
    are read whole. ``on_case`` sees each case with its texts as it is read.
    """
    fmt = file_format(path, spec.data.format)
    if fmt is None:
        raise DataError(problems=[key_problem(("data", "path"),
                                              f"cannot tell the format of {display}; set data.format")])
    d = spec.data
    bad = _Collector(display, key_problem)
    reader = _CaseReader(spec, bad)
    cases: list[Case] = []
    seen: dict[str, int] = {}
    dupes: dict[str, list[int]] = {}
    present: set[str] = set()  # every top-level key of every record
    columns: dict[str, None] = {}  # the keys of the first 100 records, in order (the file's columns)
    count = 0
    opened: list[FileIdentity] = []
    source: TextSource | None = None
    try:  # one record at a time: a record is dropped once it is a case
        unit, rows, reread = stream_records(path, fmt, opened)
        for n, (rec, pos, start) in enumerate(rows, 1):
            count = n
            present.update(rec)
            if n <= 100:
                columns.update(dict.fromkeys(rec))
            raw_id = lookup(rec, d.id)
            if (kind := not_a_label(raw_id)) is not None:
                bad.add(("data", "id"), f"the id at '{d.id}' is {kind}: an id is text or a whole number",
                        f"{unit} {pos}")
                continue
            case_id = _as_label(raw_id)
            if case_id is None or case_id == "":
                bad.add(("data", "id"), f"no id at '{d.id}'", f"{unit} {pos}")
                continue
            if case_id in seen:
                dupes.setdefault(case_id, [seen[case_id]]).append(pos)
                continue
            seen[case_id] = pos
            case = reader.case(rec, case_id, n, f"{unit} {pos}")
            if on_case is not None:
                on_case(case)
            if on_disk and start is not None and reread is not None:
                if source is None:
                    source = TextSource(path, display, opened[0], reader.fields, reader.index, reread)
                case = case.with_fields(OnDisk(source, start, pos))
            cases.append(case)
    except ReadError as exc:
        where = f" ({exc.where})" if exc.where else ""
        raise DataError(problems=[key_problem(("data", "path"), f"{display}{where}: {exc}")]) from None
    if count == 0:
        raise DataError(problems=[key_problem(("data", "path"), f"{display} holds no records")])
    absent = _absent_columns(spec, present, display, key_problem)
    if absent:  # before anything about single records: a misspelt column would flag every one
        raise DataError(problems=absent)
    problems = bad.problems()
    if dupes:
        listed = "; ".join(f"{k!r} ({unit}s {', '.join(map(str, v))})" for k, v in list(dupes.items())[:10])
        more = f" and {len(dupes) - 10} more" if len(dupes) > 10 else ""
        problems.append(key_problem(("data", "id"), f"{display}: duplicate case ids: {listed}{more}"))
    near = _near_duplicates(cases, seen, unit)
    if near:
        more = f" and {len(near) - 10} more" if len(near) > 10 else ""
        problems.append(key_problem(("data", "id"), f"{display}: case ids that differ only in case, whitespace or "
                                                    f"Unicode normalisation name the same case: "
                                                    f"{' | '.join(near[:10])}{more}"))
    if problems:
        raise DataError(problems=problems)
    return Dataset(path=path, display=display, cases=tuple(cases), sha256=file_sha256(path),
                   columns=tuple(columns))


def _absent_columns(spec: Spec, present: set[str], display: str, key_problem: KeyProblem) -> list[Problem]:
    """A problem per column the spec names that no record has, listing the file's columns."""
    d = spec.data
    named: list[tuple[KeyPath, str]] = [(("data", "id"), d.id)]
    named += [(("data", "fields", var), dotted) for var, dotted in d.fields.items()]
    if isinstance(d.human, str):
        named.append((("data", "human"), d.human))
    else:
        named += [(("data", "human", i), col) for i, col in enumerate(d.human)]
    for attr in ("group", "system", "category", "model_family"):
        col = getattr(d, attr)
        if col is not None:
            named.append((("data", attr), col))
    if spec.split is not None and hasattr(spec.split, "field"):
        named.append((("split", "field"), spec.split.field))
    out = []
    for key, dotted in named:
        top = dotted.split(".")[0]
        if top in present:
            continue
        known = sorted(present)
        close = difflib.get_close_matches(top, known, n=1, cutoff=0.6)
        hint = (f"did you mean '{close[0]}'? " if close else "") + f"columns of {display}: {', '.join(known[:30])}"
        problem = key_problem(key, f"{display} has no column '{top}'")
        out.append(problem.with_hint(hint))
    return out


def read_cases(parsed: ParsedSpec, on_disk: bool = False, on_case: Callable[[Case], None] | None = None) -> Dataset:
    """The cases of a loaded spec, read from its data file (which must lie inside the project); ``on_disk``,
    ``on_case``: see :func:`load_dataset`."""
    try:
        path = parsed.source.inside(parsed.spec.data.path, "data file")
    except ReadError as exc:
        raise DataError(problems=[parsed.key_problem(("data", "path"), str(exc))]) from None
    return load_dataset(parsed.spec, path, parsed.data_display, parsed.key_problem, on_disk, on_case)
