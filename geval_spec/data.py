"""Stage: a spec's data file -> frozen :class:`Case` values.

Files are read through DuckDB (JSON, JSONL, CSV, Parquet; see
:func:`geval_spec.store.read_records`). Template variables come from dotted
paths into each record; a list becomes its items joined by blank lines. Case
ids must be unique; group, system and category are optional. Every problem
names the data file, the record and the spec key that asked for the value.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from .errors import DataError, Problem
from .model import Spec

FORMATS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
_MISSING = object()


@dataclass(frozen=True)
class Case:
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


@dataclass(frozen=True)
class Dataset:
    path: Path
    display: str
    cases: tuple[Case, ...]
    sha256: str
    columns: tuple[str, ...] = field(default=())

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}


def file_format(path: Path, declared: str | None) -> str | None:
    return declared or FORMATS.get(path.suffix.lower())


def lookup(record: Any, dotted: str) -> Any:
    """Follow ``a.b.0.c`` through dicts and lists; _MISSING when a step is absent."""
    value = record
    for part in dotted.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n\n".join(as_text(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _as_label(value: Any) -> str | None:
    if value is None or value is _MISSING:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _as_number(value: Any) -> float | None | object:
    if value is None or value is _MISSING:
        return None
    if isinstance(value, bool):
        return _MISSING
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return _MISSING
        return None if math.isnan(number) else number
    return _MISSING


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _Collector:
    """Collects problems per spec key, listing at most a few records each."""

    def __init__(self, display: str, key_problem):
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


def load_dataset(spec: Spec, path: Path, display: str, key_problem) -> Dataset:
    """Read the spec's data file into cases.

    ``key_problem(path_tuple, message)`` makes a Problem pointing at a key of
    the spec, so data errors lead back to the line that asked for the data.
    """
    from .store import read_records

    fmt = file_format(path, spec.data.format)
    if fmt is None:
        raise DataError(problems=[key_problem(("data", "path"),
                                              f"cannot tell the format of {display}; set data.format")])
    try:
        records, columns = read_records(path, fmt)
    except DataError as exc:
        raise DataError(problems=[key_problem(("data", "path"), f"{display}: {exc}")]) from None
    if not records:
        raise DataError(problems=[key_problem(("data", "path"), f"{display} holds no records")])
    d = spec.data
    bad = _Collector(display, key_problem)
    humans = [d.human] if isinstance(d.human, str) else list(d.human)
    cases: list[Case] = []
    seen: dict[str, int] = {}
    dupes: dict[str, list[int]] = {}
    unit = "line" if fmt in ("jsonl", "csv") else "record"
    for n, rec in enumerate(records, 1):
        where = f"{unit} {n + 1 if fmt == 'csv' else n}"
        raw_id = lookup(rec, d.id)
        if raw_id is _MISSING or raw_id is None or raw_id == "":
            bad.add(("data", "id"), f"no id at '{d.id}'", where)
            continue
        case_id = _as_label(raw_id)
        if case_id in seen:
            dupes.setdefault(case_id, [seen[case_id]]).append(n)
            continue
        seen[case_id] = n
        values: dict[str, str] = {}
        for var, dotted in d.fields.items():
            value = lookup(rec, dotted)
            if value is _MISSING:
                bad.add(("data", "fields", var), f"no value at '{dotted}'", where)
            elif value is None:
                bad.add(("data", "fields", var), f"'{dotted}' is null", where)
            else:
                values[var] = as_text(value)
        human: list[float | None] = []
        for i, col in enumerate(humans):
            key = ("data", "human") if isinstance(d.human, str) else ("data", "human", i)
            raw = lookup(rec, col)
            if raw is _MISSING:
                bad.add(key, f"no human score at '{col}'", where)
                human.append(None)
                continue
            number = _as_number(raw)
            if number is _MISSING:
                bad.add(key, f"human score at '{col}' is not a number", f"{where}: {raw!r}")
                human.append(None)
            else:
                human.append(number)  # type: ignore[arg-type]
        optional = {}
        for attr in ("group", "system", "category", "model_family"):
            col = getattr(d, attr)
            if col is None:
                optional[attr] = None
                continue
            value = lookup(rec, col)
            if value is _MISSING or value is None:
                bad.add(("data", attr), f"no value at '{col}'", where)
            optional[attr] = _as_label(value)
        split_value = None
        split = spec.split
        if split is not None and hasattr(split, "field"):
            value = lookup(rec, split.field)
            if value is _MISSING or value is None:
                bad.add(("split", "field"), f"no split at '{split.field}'", where)
            else:
                split_value = _as_label(value)
                if split_value not in ("examples", "dev", "test"):
                    bad.add(("split", "field"), "split must be examples, dev or test", f"{where}: {split_value!r}")
        cases.append(Case(id=case_id, row=n, fields=MappingProxyType(values), human=tuple(human),
                          group=optional["group"], system=optional["system"], category=optional["category"],
                          family=optional["model_family"], split_value=split_value))
    problems = bad.problems()
    if dupes:
        listed = "; ".join(f"{k!r} ({unit}s {', '.join(map(str, v))})" for k, v in list(dupes.items())[:10])
        more = f" and {len(dupes) - 10} more" if len(dupes) > 10 else ""
        problems.append(key_problem(("data", "id"), f"{display}: duplicate case ids: {listed}{more}"))
    if problems:
        raise DataError(problems=problems)
    return Dataset(path=path, display=display, cases=tuple(cases), sha256=file_sha256(path), columns=tuple(columns))
