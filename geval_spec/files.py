"""Files in and out: bounded reads of regular files, atomic writes, output paths checked before work starts.

Specs and data may come from other people's repositories, so nothing here
reads what is not a regular file (a device, a FIFO or a socket could hang or
never end), and every write goes to a temporary file next to its target and
is renamed into place, so a killed process never leaves half a report.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class ReadError(Exception):
    """A file that cannot be read; ``where`` names the line or record when known."""

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.where = where

    @property
    def line(self) -> int | None:
        if self.where and self.where.startswith("line "):
            return int(self.where.split()[1])
        return None


def check_regular(path: Path, what: str = "file") -> None:
    """Refuse anything that is not a regular file (devices, FIFOs, sockets, folders) before reading it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ReadError(f"{what} not found") from None
    except OSError as exc:
        raise ReadError(f"cannot read {what}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise ReadError(f"{what} is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise ReadError(f"{what} is not a regular file (a device, FIFO or socket); refusing to read it")


def read_text(path: Path, what: str = "file") -> str:
    """A regular file's text, decoded as UTF-8 (a byte-order mark is dropped)."""
    check_regular(path, what)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ReadError(f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ReadError(f"{what} is not UTF-8 text (byte {exc.start + 1})", where=f"line {line}") from None


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed into place (folders are created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
