"""The run's journal: every received response appended the moment it arrives, so a killed run loses nothing.

One ``write`` per response to ``<db>.journal/<run>.jsonl``; the store replays
journals left by killed runs when it is opened, then removes them.
"""

from __future__ import annotations

import os
from pathlib import Path

from geval_spec.store.records import ResponseRecord


class Journal:
    """Append-only file of received responses; survives a killed process."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def write(self, record: ResponseRecord) -> None:
        if self._fd is not None:
            os.write(self._fd, (record.to_json() + "\n").encode("utf-8"))

    def discard(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)


def read_journal(path: Path) -> list[ResponseRecord]:
    """The records of a journal; a line cut short by a kill is skipped."""
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(ResponseRecord.from_json(line))
        except (ValueError, TypeError):
            continue
    return records
