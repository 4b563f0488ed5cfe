"""The run's journal: every received response appended the moment it arrives, so a killed run loses nothing.

One ``write`` per response to ``<db>.journal/<run>.jsonl``: a JSON line with
the record's fields and the body's length in bytes, then the body exactly as
it was received (not escaped into JSON again), then a newline. Before any
request of a chunk is sent, the chunk's requests are written too, as one JSON
line ``{"planned": ...}`` (:class:`~geval_spec.store.records.Planned`): the
store then gets them in the run's next session, and a killed run's journal
replays them with their answers. The run holds an
exclusive ``flock`` on its journal while it is alive, so another process can
tell a live run's journal (leave it alone) from a killed run's (replay it
into the store, then remove it). The lock goes with the process: a killed
run's journal is free at once.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from geval_spec.store.records import Planned, ResponseRecord


class Journal:
    """Append-only file of received responses; survives a killed process."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def write(self, record: ResponseRecord) -> None:
        if self._fd is None:
            return
        body = (record.body or "").encode("utf-8")
        header = record.header()
        header["body_bytes"] = len(body) if record.body is not None else None
        os.write(self._fd, json.dumps(header).encode("utf-8") + b"\n" + body + b"\n")

    def write_planned(self, planned: Planned) -> None:
        if self._fd is not None:
            os.write(self._fd, json.dumps({"planned": planned.to_json()}, ensure_ascii=False).encode("utf-8") + b"\n")

    def close(self) -> None:
        """Stop writing; the file stays (its records are merged into the store by whoever opens it next)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def discard(self) -> None:
        """Remove the journal: everything in it is in the store."""
        self.path.unlink(missing_ok=True)
        self.close()


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


def read_journal(path: Path) -> tuple[list[Planned], list[ResponseRecord]]:
    """The planned requests and the responses of a journal; a record cut short by a kill is left out (and what
    follows it: nothing is written after a kill)."""
    data = path.read_bytes()
    planned: list[Planned] = []
    records: list[ResponseRecord] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break
        try:
            header = json.loads(data[pos:end])
            if "planned" in header:
                planned.append(Planned.from_json(header["planned"]))
                pos = end + 1
                continue
            size = header.pop("body_bytes", None)
            body = None
            pos = end + 1
            if size is not None:
                if pos + size + 1 > len(data) or data[pos + size:pos + size + 1] != b"\n":
                    break  # cut short
                body = data[pos:pos + size].decode("utf-8")
                pos += size + 1
            records.append(ResponseRecord.of(header, body))
        except (ValueError, TypeError, UnicodeDecodeError):
            break
    return planned, records
