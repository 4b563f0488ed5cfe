"""The run's journal: every received response appended the moment it arrives, so a killed run loses nothing.

One ``write`` per response to ``<db>.journal/<run>.jsonl``: a JSON line with
the record's fields and the body's length in bytes, then the body exactly as
it was received (not escaped into JSON again), then a newline. Before any
request of a chunk is sent, the chunk's requests are written to
``<run>.planned`` beside it, one JSON line a chunk
(:meth:`~geval_spec.store.records.Planned.line`: each body as the JSON
object it is, under a key earlier releases skip; their lines hold it as a
string, and still read): the store gets them in the
run's next session, and a killed run's journal replays them with their
answers. (A file of its own: geval-spec releases before it read every line
of ``<run>.jsonl`` as a response, and would stop at the first other line.)

The run holds an exclusive ``flock`` on its journal while it is alive, so
another process can tell a live run's journal (leave it alone) from a killed
run's (replay it into the store, then remove it). The lock goes with the
process: a killed run's journal is free at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from geval_spec.errors import StoreError
from geval_spec.store.records import Planned, ResponseRecord
from geval_spec.store.sql import encoder

T = TypeVar("T")
_HEADER = encoder()  # json.dumps of a record's header (its fields but the body), made once


class Journal:
    """Append-only file of received responses; survives a killed process."""

    def __init__(self, path: Path) -> None:
        folder = path.parent
        if (folder.exists() or folder.is_symlink()) and not folder.is_dir():  # (FileExistsError: exit 70)
            raise StoreError(f"{folder} is in the way of the results database's journals: it must be a folder (or "
                             "absent); move it, or give --db another file")
        folder.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.planned_path = planned_path(path)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._planned_fd: int | None = None  # opened at the first chunk

    def write(self, record: ResponseRecord) -> None:
        if self._fd is None:
            return
        body = (record.body or "").encode("utf-8")
        header = record.header()
        header["body_bytes"] = len(body) if record.body is not None else None
        os.write(self._fd, _HEADER(header).encode("utf-8") + b"\n" + body + b"\n")

    def write_planned(self, planned: Planned) -> None:
        if self._fd is None:
            return
        if self._planned_fd is None:
            self._planned_fd = os.open(self.planned_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self._planned_fd, planned.line().encode("utf-8") + b"\n")

    def close(self) -> None:
        """Stop writing; the files stay (their records are merged into the store by whoever opens it next)."""
        if self._planned_fd is not None:
            os.close(self._planned_fd)
            self._planned_fd = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def discard(self) -> None:
        """Remove the journal: everything in it is in the store. (The planned file first: one left without its
        journal is replayed and removed by the next store that opens, see :func:`orphan_planned`.)"""
        self.planned_path.unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)
        self.close()


def journal_dir(db: Path) -> Path:
    """The folder of a results database's journals: ``<db>.journal`` beside it."""
    return db.with_name(db.name + ".journal")


def planned_path(journal: Path) -> Path:
    """The file of a journal's planned requests: ``<run>.planned`` beside ``<run>.jsonl``."""
    return journal.with_suffix(".planned")


def orphan_planned(folder: Path) -> list[Path]:
    """Planned files whose journal is gone: its run ended between removing the two, or a geval-spec release
    before planned files replayed the journal and left this file alone. Their rows are safe to replay."""
    return [p for p in sorted(folder.glob("*.planned")) if _regular(p) and not p.with_suffix(".jsonl").exists()]


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (not a link, folder, FIFO or device)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def abandoned(path: Path) -> bool:
    """True when no live process holds the journal (its run was killed or has ended)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


REPLAY_BATCH = 2_000  # responses written to the store at a time while a journal is replayed (memory stays bounded)
REPLAY_CHUNKS = 8  # planned chunks (up to 500 cases each) written at a time


def iter_planned(path: Path) -> Iterator[Planned]:
    """The chunks of a planned file (none when there is no file), read a line at a time; a chunk cut short by a
    kill ends the file. A damaged line before the end is skipped: the chunks after it are read."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    with fh:
        for line in fh:
            if not line.endswith(b"\n"):
                return
            try:
                chunk = Planned.from_json(json.loads(line))
            except (ValueError, TypeError, AttributeError, UnicodeDecodeError, RecursionError):
                continue
            yield chunk


def iter_responses(path: Path) -> Iterator[ResponseRecord]:
    """The responses of a journal, read one at a time. A record cut short by a kill ends the file. A record whose
    framing is damaged before the end (a line that is no header, a body's length the file does not hold or that
    does not end at a newline) is skipped, and reading goes on from the line after its header: the records after
    it are answers paid for (they stopped the replay, and the journal was then removed). A record whose fields are
    damaged (a field of another type) is skipped too."""
    total = os.path.getsize(path)
    with path.open("rb") as fh:
        while True:
            line = fh.readline()
            if not line.endswith(b"\n"):
                return
            after_header = fh.tell()
            try:
                header = json.loads(line)
                size = header.pop("body_bytes", None)
                body = None
                if size is not None:
                    if type(size) is not int or size < 0 or size + 1 > total - after_header:  # (a length the file
                        raise ValueError("a body's length the file does not hold")  # does not hold: not read)
                    raw = fh.read(size + 1)
                    if len(raw) != size + 1 or raw[-1:] != b"\n":
                        raise ValueError("a body that does not end where its length says")
                    body = raw[:-1].decode("utf-8")
            except (ValueError, TypeError, UnicodeDecodeError, AttributeError):
                fh.seek(after_header)  # (a record cut short at the end: its body's line, with no newline, ends it)
                continue
            try:
                record = ResponseRecord.of(header, body)
            except (ValueError, TypeError, AttributeError):
                continue
            yield record


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def replay_journals(folder: Path, write_planned: Callable[[Sequence[Planned]], None],
                    write_responses: Callable[[Sequence[ResponseRecord]], int]) -> tuple[int, set[str]]:
    """Write the journals in ``folder`` whose runs are gone (their requests, then their answers, a batch at a time:
    the journal of a long run is hundreds of MB) and remove them; then the planned files left without a journal.
    Returns (responses written, the runs whose journals they were). Killed midway, it is done again by the next
    store to open: what was written already is kept once."""
    recovered = 0
    gone: set[str] = set()
    if not folder.is_dir():
        return recovered, gone
    for path in sorted(folder.glob("*.jsonl")):
        if not _regular(path):  # a folder, FIFO or link put there: never ours (os.open of a FIFO waits forever)
            continue
        if abandoned(path):
            if _regular(planned_path(path)):
                for chunks in _batches(iter_planned(planned_path(path)), REPLAY_CHUNKS):
                    write_planned(chunks)
            for responses in _batches(iter_responses(path), REPLAY_BATCH):
                recovered += write_responses(responses)
            gone.add(path.stem)
            if not planned_path(path).is_dir():  # (a folder put there stays: unlinking it is an error)
                planned_path(path).unlink(missing_ok=True)
            path.unlink(missing_ok=True)
    for path in orphan_planned(folder):
        for chunks in _batches(iter_planned(path), REPLAY_CHUNKS):
            write_planned(chunks)
        path.unlink(missing_ok=True)
    return recovered, gone
