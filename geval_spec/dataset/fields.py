"""A case's template variables: read from a record, in memory (:class:`Fields`) or left in a JSON Lines file
(:class:`OnDisk`) and read again when the case is planned."""

from __future__ import annotations

import json
from collections import abc
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from geval_spec.errors import DataError, Problem
from geval_spec.files import FileIdentity, LinesAgain, ReadError

if TYPE_CHECKING:
    from geval_spec.dataset.cases import Case


class _Missing:
    """The marker for a value that a record does not have."""


MISSING: Any = _Missing()


class Fields(abc.Mapping[str, str]):
    """A case's template variables, read-only: its values in a tuple, their names shared with every case of the
    file (a run reads every case before it plans them: about 130 bytes less a case than a dict behind a
    MappingProxyType)."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: Mapping[str, int], values: tuple[str | None, ...]) -> None:
        self._index = index  # name -> position in values (a value of None: the record has none)
        self._values = values

    def __getitem__(self, key: str) -> str:
        i = self._index.get(key)
        value = None if i is None else self._values[i]
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> abc.Iterator[str]:
        return (name for name, i in self._index.items() if self._values[i] is not None)

    def __len__(self) -> int:
        return sum(v is not None for v in self._values)

    def __repr__(self) -> str:
        return repr(dict(self))


def fields_json(cases: Iterable["Case"]) -> Iterator[str]:
    """Each case's fields as ``json.dumps(dict(case.fields), sort_keys=True, ensure_ascii=False)`` writes them
    (with json's own string encoding), made without a dict and a sort per case: a rerun keys every case, and at
    100,000 cases json.dumps took a tenth of its time."""
    encode = FieldsJson()
    for case in cases:
        yield encode(case)


class FieldsJson:
    """:func:`fields_json` of one case at a time (the sorted names of each file's fields are kept)."""

    def __init__(self) -> None:
        # id of a Fields index -> that index (held: its id stays its own) and its names, sorted and encoded
        self.orders: dict[int, tuple[Mapping[str, int], list[tuple[str, int]]]] = {}

    def __call__(self, case: "Case") -> str:
        f = case.fields
        if type(f) is not Fields:
            return json.dumps(dict(f), sort_keys=True, ensure_ascii=False)
        index, values = f._index, f._values
        known = self.orders.get(id(index))
        if known is None:
            known = self.orders[id(index)] = (index, [(encode_basestring(name) + ": ", i)
                                                      for name, i in sorted(index.items())])
        return "{" + ", ".join([name + encode_basestring(v) for name, i in known[1]
                                if (v := values[i]) is not None]) + "}"


Reread = Callable[[LinesAgain, int, int], Any]  # (the file, the byte where a record starts, its line) -> the record


class TextSource:
    """Where the texts of a JSON Lines or CSV file's cases are read again (:class:`OnDisk`): the file, as it was
    read (its identity), the spec's fields, and how a record is read again from where it starts (``reread``:
    (the file, the byte, the line) -> the record, None when none starts there any more)."""

    __slots__ = ("path", "display", "identity", "fields", "index", "reread")

    def __init__(self, path: Path, display: str, identity: FileIdentity, fields: tuple[tuple[str, str], ...],
                 index: Mapping[str, int], reread: Reread) -> None:
        self.path, self.display, self.identity, self.fields, self.index = path, display, identity, fields, index
        self.reread = reread

    def load(self, places: list[tuple[int, int]]) -> list[Fields]:
        """The fields of the records that start at these bytes ((byte, line) pairs), in their order."""
        out: list[Fields | None] = [None] * len(places)
        try:
            with LinesAgain(self.path, "data file", self.identity) as lines:
                for i in sorted(range(len(places)), key=places.__getitem__):  # (in the file's order)
                    start, n = places[i]
                    rec = self.reread(lines, start, n)
                    if type(rec) is not dict:
                        raise ReadError("changed while it was in use: no record starts any more where one did; "
                                        "run again to read it anew", where=f"line {n}")
                    values: list[str | None] = []
                    for _, dotted in self.fields:
                        value = lookup(rec, dotted)
                        if value is MISSING or value is None:
                            raise ReadError("changed while it was in use: the record has lost a field it had; "
                                            "run again to read it anew", where=f"line {n}")
                        values.append(value if type(value) is str else as_text(value))
                    out[i] = Fields(self.index, tuple(values))
        except ReadError as exc:
            where = f" ({exc.where})" if exc.where else ""
            raise DataError(problems=[Problem(f"{self.display}{where}: {exc}")]) from None
        return [f for f in out if f is not None]


class OnDisk(abc.Mapping[str, str]):
    """A case's template variables left in its JSON Lines or CSV file, where they are read again when the case is
    planned (:func:`with_texts`, a chunk at a time), so that a run holds its cases' ids, labels and groups but
    not their texts: about 2 KB a case for a summary and its source, 200 MB at 100,000 cases (BENCHMARKS.md,
    scale). Read here one at a time (each look opens the file), as a fallback only."""

    __slots__ = ("source", "start", "line")

    def __init__(self, source: TextSource, start: int, line: int) -> None:
        self.source, self.start, self.line = source, start, line

    def _fields(self) -> Fields:
        return self.source.load([(self.start, self.line)])[0]

    def __getitem__(self, key: str) -> str:
        return self._fields()[key]

    def __iter__(self) -> abc.Iterator[str]:
        return iter(self.source.index)  # (a case has every field: one without is refused as the file is read)

    def __len__(self) -> int:
        return len(self.source.index)

    def __repr__(self) -> str:
        return f"OnDisk({self.source.display}, line {self.line})"


def lookup(record: Any, dotted: str) -> Any:
    """Follow ``a.b.0.c`` through dicts and lists; MISSING when a step is absent."""
    if type(record) is dict and "." not in dotted:  # the common case, without the generic checks below
        return record.get(dotted, MISSING)
    value = record
    for part in dotted.split("."):
        if isinstance(value, abc.Mapping) and part in value:  # (collections.abc's: typing's isinstance is slow)
            value = value[part]
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def as_text(value: Any) -> str:
    """A data value as the text a prompt shows: a list as its items joined by blank lines, an object as JSON,
    true, false and null as JSON writes them (not Python's True and None), and bytes (a Parquet column of binary
    type, as some writers store text) decoded as UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n\n".join(as_text(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
