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

import codecs
import csv
import json
import re
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from geval_spec.files import (LINE_LIMIT_VAR, MAX_LINE_BYTES, MAX_READ_BYTES, READ_LIMIT_VAR, FileIdentity, KeyTwice,
                              LinesAgain, ReadError, check_input, human_size, keys_once, read_chunks, read_lines_at,
                              read_text, size_limit)
from geval_spec.dataset.fields import Reread
from geval_spec.redact import SURROGATE, lone_surrogate
from geval_spec.values import frozen

FORMATS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}


@frozen
class Records:
    """A data file read whole: its records, its columns, and where each record stands."""

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
                   ) -> tuple[str, Iterator[tuple[dict[str, Any], int, int | None]], Reread | None]:
    """(unit, (record, position, the byte where it starts) triples, how a record is read again) of a data file.
    JSON Lines and CSV, the formats of large data, are decoded a record at a time as the triples are taken, so
    their records need not all be in memory at once (BENCHMARKS.md, scale), and a record can be read again from
    where it starts (``Reread``, with :class:`~geval_spec.files.LinesAgain`; ``opened`` receives the file's
    identity); the other formats are read whole, and their byte is None. Raises :class:`ReadError`, also while
    the triples are taken."""
    if fmt == "jsonl":
        return "line", jsonl_rows_at(path, opened), json_line_at
    if fmt == "csv":
        rows = CsvRows(path, opened)
        return "line", iter(rows), rows.record_at
    records = read_records(path, fmt)
    return records.unit, ((row, pos, None) for row, pos in zip(records.rows, records.positions)), None


def json_line_at(lines: LinesAgain, start: int, n: int) -> Any:
    """The JSON Lines record on line ``n``, which starts at byte ``start`` (None when it is no JSON any more).
    (json's own decoder: the line was checked in full as the file was read, and is the same.)"""
    try:
        return json.loads(lines.line(start, n))
    except ValueError:
        return None


# A line of a CSV file ends at \n, \r\n or a lone \r, as Python's io reads text with newline="" (what csv asks
# for). UTF-8 never uses the bytes 0x0A and 0x0D inside a character: a file's bytes are cut into lines before
# they are decoded.
_LINE_END = re.compile(rb"\r\n?|\n")
RECORD_READ = 4096  # bytes read at a time when a CSV record is read again (a record is about 2 KB)


class _NotUtf8(ReadError):
    """A line of a CSV file that is not UTF-8."""


def _byte_lines(chunks: Iterable[bytes], at: int) -> Iterator[tuple[bytes, int]]:
    """(a line's bytes with its end, its first byte) from consecutive chunks of a file that start at byte ``at``
    (:func:`~geval_spec.files.read_chunks`: each to its ``\n`` or a size), cut a line at a time as they are taken:
    a line is held whole, never the file."""
    held: list[bytes] = []  # a line begun in an earlier chunk
    for chunk in chunks:
        if not held and chunk.find(b"\n") == len(chunk) - 1 and chunk.find(b"\r", 0, len(chunk) - 2) < 0:
            yield chunk, at  # (the usual chunk: one whole line, no lone \r before its end)
            at += len(chunk)
            continue
        pos = 0
        if held and held[-1].endswith(b"\r") and not chunk.startswith(b"\n"):  # a lone \r ended the last chunk
            line = b"".join(held)
            held = []
            yield line, at
            at += len(line)
        for m in _LINE_END.finditer(chunk):
            end = m.end()
            if end == len(chunk) and m.group() == b"\r":  # (the next chunk may begin with its \n)
                break
            line = b"".join(held) + chunk[pos:end] if held else chunk[pos:end]
            held = []
            yield line, at
            at += len(line)
            pos = end
        if pos < len(chunk):
            held.append(chunk[pos:])
    if held:
        yield b"".join(held), at


def _csv_lines(lines: Iterable[tuple[bytes, int]], starts: deque[int] | None) -> Iterator[str]:
    """The lines csv reads, decoded as UTF-8 (a byte-order mark at the file's start dropped); each line's first
    byte is appended to ``starts`` as the line is taken."""
    for k, (raw, at) in enumerate(lines, 1):
        if starts is not None:
            starts.append(at)
        try:
            yield raw.decode("utf-8-sig" if at == 0 else "utf-8")
        except UnicodeDecodeError as exc:  # (utf-8-sig counts from after the mark)
            byte = at + exc.start + 1 + (3 if at == 0 and raw.startswith(codecs.BOM_UTF8) else 0)
            raise _NotUtf8(f"data file is not UTF-8 text (byte {byte})", where=f"line {k}") from None


class CsvRows:
    """A CSV file's records, read a record at a time (the file is never held whole, nor its lines' places), as
    (record, the line it starts on, the byte where it starts) triples: a dict of the header's columns, an empty
    cell None. The header is :attr:`header` once the first record is taken; :meth:`record_at` reads one record
    again. An error is raised where the reading meets it: a record before a byte that is not UTF-8 is read
    first (the whole-file reader decoded the file before it read any record)."""

    def __init__(self, path: Path, opened: list[FileIdentity] | None = None) -> None:
        self.path, self.opened = path, opened
        self.header: tuple[str, ...] = ()
        self.field_cap = size_limit(LINE_LIMIT_VAR, MAX_LINE_BYTES)  # a field as long as a JSON line may be

    def __iter__(self) -> Iterator[tuple[dict[str, Any], int, int]]:
        cap = self.field_cap
        csv.field_size_limit(cap)  # (Python's csv stopped at a fixed 128 KiB)
        starts: deque[int] = deque()  # the first byte of each line from line `first` on
        first = 1
        reader = csv.reader(_csv_lines(_byte_lines(read_chunks(self.path, "data file", self.opened), 0), starts),
                            strict=True)
        start = 1  # the line the current record starts on
        try:
            header = next(reader, None)
            if header is None:
                return
            if len(set(header)) != len(header):
                dupes = sorted({h for h in header if header.count(h) > 1})
                raise ReadError(f"duplicate column name(s) {', '.join(map(repr, dupes))}", where="line 1")
            self.header = tuple(header)
            start = reader.line_num + 1
            for cells in reader:
                if cells:
                    if len(cells) != len(header):
                        raise ReadError(f"ragged row: {len(cells)} values, expected {len(header)} (one per column "
                                        "of the header)", where=f"line {start}")
                    yield {k: (v if v != "" else None) for k, v in zip(header, cells)}, start, starts[start - first]
                start = reader.line_num + 1
                while first < start and starts:  # (the lines read: only the next record's first is needed)
                    starts.popleft()
                    first += 1
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                raise ReadError(f"unterminated quote: the record that starts on line {start} opens a quoted value "
                                "that never closes", where=f"line {start}") from None
            if "field larger than field limit" in str(exc):
                raise ReadError(f"a value of the record that starts on line {start} is longer than "
                                f"{human_size(cap)} (the limit of {LINE_LIMIT_VAR})", where=f"line {start}") from None
            raise ReadError(f"not valid CSV: {exc}", where=f"line {reader.line_num}") from None

    def record_at(self, lines: LinesAgain, start: int, n: int) -> dict[str, Any] | None:
        """The record that starts at byte ``start`` (line ``n``), read again as :meth:`__iter__` read it, a few KB
        at a time; None when no record of the header's columns starts there any more. (A failure to read the
        file is raised.)"""
        def chunks() -> Iterator[bytes]:
            at = start
            while chunk := lines.read(at, RECORD_READ):
                yield chunk
                at += len(chunk)

        csv.field_size_limit(self.field_cap)  # (the process's: another reader may have set it since)
        try:
            cells = next(csv.reader(_csv_lines(_byte_lines(chunks(), start), None), strict=True), None)
        except (csv.Error, _NotUtf8):
            return None
        if cells is None or len(cells) != len(self.header):
            return None
        return {k: (v if v != "" else None) for k, v in zip(self.header, cells)}


def read_csv(path: Path) -> Records:
    rows: list[dict[str, Any]] = []
    positions: list[int] = []
    records = CsvRows(path)
    for row, n, _ in records:
        rows.append(row)
        positions.append(n)
    return Records(rows, records.header, "line", tuple(positions))


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
