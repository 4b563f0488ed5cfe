"""Reading data files into plain records: JSON, JSON Lines and CSV with the standard library, Parquet with pyarrow.

Every reader returns the records (one dict per case, in file order), the
file's top-level column names, and for each record where it starts (the
line for JSON Lines and CSV, the position for JSON and Parquet), so errors
can name it. Only regular files are read: a device, a FIFO or a folder is
refused before anything is read, so ``/dev/zero`` cannot hang a run; files
and lines are bounded (``GEVAL_MAX_READ_BYTES``, ``GEVAL_MAX_LINE_BYTES``,
see :mod:`geval_spec.files`), and JSON nested too deeply is an error.

CSV cells are text; an empty cell is a missing value (None). JSON values
keep their types. Parquet needs pyarrow (``pip install 'geval-spec[parquet]'``);
nothing else here imports more than the standard library.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from geval_spec.files import (LINE_LIMIT_VAR, MAX_LINE_BYTES, MAX_READ_BYTES, READ_LIMIT_VAR, FileIdentity, KeyTwice,
                              ReadError, check_input, human_size, keys_once, read_lines_at, read_text, size_limit)
from geval_spec.redact import SURROGATE, lone_surrogate

FORMATS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}


@dataclass(frozen=True)
class Records:
    rows: list[dict[str, Any]]
    columns: tuple[str, ...]
    unit: str  # "line" or "record": how errors name a row
    positions: tuple[int, ...]  # per row: its line (line unit) or its 1-based index (record unit)


def file_format(path: Path, declared: str | None) -> str | None:
    return declared or FORMATS.get(path.suffix.lower())


# json's own scanner (its C one), which json.loads uses (typeshed does not declare the attribute); an object that
# names a key twice is an error, not its last value (KeyTwice)
_DECODER = json.JSONDecoder(object_pairs_hook=keys_once)
_SCAN: Callable[[str, int], tuple[Any, int]] = getattr(_DECODER, "scan_once")
_NOT_AN_OBJECT: Any = object()


def _an_object(text: str) -> Any:
    """``json.loads(text)`` for a text that is one JSON object and nothing around it (a JSON Lines file's every
    line, as a rule), from json's scanner without json.loads's checks around it: half the time of 100,000 lines.
    Anything else, and any error but a key given twice, returns the marker: json.loads then decides (and words
    the error)."""
    if text[:1] != "{":
        return _NOT_AN_OBJECT
    try:
        value, end = _SCAN(text, 0)
    except KeyTwice:
        raise
    except (ValueError, StopIteration, RecursionError):
        return _NOT_AN_OBJECT
    return value if end == len(text) else _NOT_AN_OBJECT


def _decode(text: str, where: str, whole: bool = False) -> Any:
    try:
        value = _an_object(text)
        if value is _NOT_AN_OBJECT:
            value = json.loads(text, object_pairs_hook=keys_once)
    except RecursionError:
        raise ReadError("JSON nested too deeply", where=where) from None
    except KeyTwice as exc:
        raise ReadError(str(exc), where=where) from None
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        line = getattr(exc, "lineno", None)  # (a whole file's error is named by its line, as a JSON line's is)
        raise ReadError(f"not valid JSON: {msg}", where=f"line {line}" if whole and line else where) from None
    if lone_surrogate(text, value):
        raise ReadError(f"a value {SURROGATE}", where=where)
    return value


def _columns(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(k for r in rows[:100] for k in r))


def read_json(path: Path) -> Records:
    value = _decode(read_text(path, "data file"), "the file", whole=True)
    items = value if isinstance(value, list) else [value]
    rows = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise ReadError(f"every record must be a JSON object, found {type(item).__name__}", where=f"record {n}")
        rows.append(item)
    return Records(rows, _columns(rows), "record", tuple(range(1, len(rows) + 1)))


def read_jsonl(path: Path) -> Records:
    rows: list[dict[str, Any]] = []
    positions: list[int] = []
    for item, n in jsonl_rows(path):
        rows.append(item)
        positions.append(n)
    return Records(rows, _columns(rows), "line", tuple(positions))


def jsonl_rows(path: Path) -> Iterator[tuple[dict[str, Any], int]]:
    """(record, line) of a JSON Lines file, read and decoded a line at a time: neither the file's text nor its
    records are held whole."""
    for item, n, _ in jsonl_rows_at(path):
        yield item, n


def jsonl_rows_at(path: Path, opened: list[FileIdentity] | None = None) -> Iterator[tuple[dict[str, Any], int, int]]:
    """(record, line, the byte where the line starts) of a JSON Lines file, as :func:`jsonl_rows` reads them
    (``opened``: see :func:`~geval_spec.files.read_lines_at`)."""
    for n, line, start in read_lines_at(path, "data file", opened):
        if not line.strip():
            continue
        item = _decode(line, f"line {n}")
        if not isinstance(item, dict):
            raise ReadError(f"every line must be a JSON object, found {type(item).__name__}", where=f"line {n}")
        yield item, n, start


def stream_records(path: Path, fmt: str, opened: list[FileIdentity] | None = None
                   ) -> tuple[str, Iterator[tuple[dict[str, Any], int, int | None]]]:
    """(unit, (record, position, the byte where its line starts) triples) of a data file. JSON Lines, the format
    of large data, is decoded a line at a time as the triples are taken, so its records need not all be in
    memory at once (BENCHMARKS.md, scale), and a record can be read again from where it starts
    (:class:`~geval_spec.files.LinesAgain`; ``opened`` receives the file's identity); the other formats are
    read whole, and their byte is None. Raises :class:`ReadError`, also while the triples are taken."""
    if fmt == "jsonl":
        return "line", jsonl_rows_at(path, opened)
    records = read_records(path, fmt)
    return records.unit, ((row, pos, None) for row, pos in zip(records.rows, records.positions))


def read_csv(path: Path) -> Records:
    text = read_text(path, "data file")
    cap = size_limit(LINE_LIMIT_VAR, MAX_LINE_BYTES)
    csv.field_size_limit(cap)  # a field as long as a JSON line may be (Python's csv stopped at a fixed 128 KiB)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1  # the line the current record starts on
    try:
        header = next(reader, None)
        if header is None:
            return Records([], (), "line", ())
        if len(set(header)) != len(header):
            dupes = sorted({h for h in header if header.count(h) > 1})
            raise ReadError(f"duplicate column name(s) {', '.join(map(repr, dupes))}", where="line 1")
        rows: list[dict[str, Any]] = []
        positions: list[int] = []
        start = reader.line_num + 1
        for cells in reader:
            if cells:
                if len(cells) != len(header):
                    raise ReadError(f"ragged row: {len(cells)} values, expected {len(header)} (one per column of "
                                    "the header)", where=f"line {start}")
                rows.append({k: (v if v != "" else None) for k, v in zip(header, cells)})
                positions.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise ReadError(f"unterminated quote: the record that starts on line {start} opens a quoted value "
                            "that never closes", where=f"line {start}") from None
        if "field larger than field limit" in str(exc):
            raise ReadError(f"a value of the record that starts on line {start} is longer than {human_size(cap)} "
                            f"(the limit of {LINE_LIMIT_VAR})", where=f"line {start}") from None
        raise ReadError(f"not valid CSV: {exc}", where=f"line {reader.line_num}") from None
    return Records(rows, tuple(header), "line", tuple(positions))


PARQUET_BATCH = 1024  # records decoded at a time


def read_parquet(path: Path) -> Records:
    check_input(path, "data file")
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ReadError("reading Parquet needs pyarrow: pip install 'geval-spec[parquet]'") from None
    cap = size_limit(READ_LIMIT_VAR, MAX_READ_BYTES)
    rows: list[dict[str, Any]] = []
    decoded = 0
    try:  # a batch at a time: a few hundred KB of Parquet (one long text, dictionary-encoded) can decode to GBs
        parquet = pq.ParquetFile(path)
        names = tuple(parquet.schema_arrow.names)
        twice = _named_twice(parquet.schema_arrow)
        if twice:  # a record would keep the last column of a name (CSV refuses a repeated header, JSON a key)
            raise ReadError(f"duplicate column name(s) {', '.join(map(repr, twice))}")
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH):
            decoded += batch.nbytes
            if decoded > cap:
                raise ReadError(f"decodes to more than {human_size(cap)} (the limit of {READ_LIMIT_VAR}) by record "
                                f"{len(rows) + batch.num_rows:,}", where=f"record {len(rows) + 1}")
            rows += batch.to_pylist()
    except ReadError:
        raise
    except Exception as exc:  # pyarrow raises many kinds for a bad file
        raise ReadError(f"not a Parquet file pyarrow can read: {str(exc).splitlines()[0]}") from None
    return Records(rows, names, "record", tuple(range(1, len(rows) + 1)))


def _named_twice(fields: Any, prefix: str = "") -> list[str]:
    """The names (dotted into structs) that a Parquet schema or struct gives two of its columns or fields."""
    import pyarrow as pa

    out: list[str] = []
    seen: set[str] = set()
    for field in fields:
        name = prefix + field.name
        if name in seen and name not in out:
            out.append(name)
        seen.add(name)
        if pa.types.is_struct(field.type):
            out += _named_twice(list(field.type), name + ".")
    return out


READERS = {"json": read_json, "jsonl": read_jsonl, "csv": read_csv, "parquet": read_parquet}


def read_records(path: Path, fmt: str) -> Records:
    """All records of a data file; raises :class:`ReadError`."""
    reader = READERS.get(fmt)
    if reader is None:
        raise ReadError(f"unknown data format {fmt!r}")
    return reader(path)
