"""Files in and out: bounded reads of regular files, paths kept inside the project, output paths checked first.

Specs and data may come from other people's repositories, so nothing here
reads what is not a regular file (a device, a FIFO or a socket could hang or
never end), nothing reads more than a size limit, a path a spec names may
not lead out of the project (by ``..``, an absolute path or a symbolic link),
and every write goes to a temporary file next to its target and is renamed
into place, so a killed process never leaves half a report. Output paths are
checked (and their missing folders made) before a command starts its work.

Limits, each overridable by an environment variable (a number of bytes, or
with a suffix: ``64M``, ``2G``):

- ``GEVAL_MAX_READ_BYTES`` (default 256 MiB): the largest data, import or
  cassette file read;
- ``GEVAL_MAX_LINE_BYTES`` (default 16 MiB): the longest line (one JSON line,
  one CSV record) of such a file.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping

from geval_spec.errors import InputError, Problem

MAX_READ_BYTES = 256 << 20
MAX_LINE_BYTES = 16 << 20
READ_LIMIT_VAR = "GEVAL_MAX_READ_BYTES"
LINE_LIMIT_VAR = "GEVAL_MAX_LINE_BYTES"
_SIZE = re.compile(r"^\s*([0-9]+)\s*([kKmMgG]i?[bB]?|[bB])?\s*$")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


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


class OutsideProject(ReadError):
    """A path that leads out of the folder it must stay in."""


class KeyTwice(ValueError):
    """A JSON object names one key twice (``json.loads`` would keep the last value silently)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} is given twice in one object (which one is meant?)")
        self.key = key


def keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json``: the object, or :class:`KeyTwice` when it names a key twice."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise KeyTwice(key)
            seen.add(key)
    return out


def size_limit(var: str, default: int) -> int:
    """A size limit from the environment variable ``var`` (bytes, or 64M, 2G, ...), else ``default``."""
    raw = os.environ.get(var)
    if raw is None or not raw.strip():
        return default
    m = _SIZE.match(raw)
    if m is None or int(m.group(1)) <= 0:
        raise InputError(problems=[Problem(f"{var}={raw!r} is not a size", hint="give bytes, or e.g. 64M or 2G")])
    return int(m.group(1)) * _UNITS[(m.group(2) or "")[:1].lower()]


def human_size(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


def _os_reason(exc: OSError, what: str) -> ReadError:
    if isinstance(exc, FileNotFoundError):
        return ReadError(f"{what} not found")
    if exc.errno == 36 or "too long" in str(exc).lower():  # ENAMETOOLONG
        return ReadError(f"{what}: the file name is too long")
    if isinstance(exc, IsADirectoryError):
        return ReadError(f"{what} is a directory, not a file")
    return ReadError(f"cannot read {what}: {exc.strerror or exc}")


def _kind_problem(mode: int, what: str) -> ReadError | None:
    if stat.S_ISDIR(mode):
        return ReadError(f"{what} is a directory, not a file")
    if not stat.S_ISREG(mode):
        return ReadError(f"{what} is not a regular file (a device, FIFO or socket); refusing to read it")
    return None


def check_regular(path: Path, what: str = "file") -> None:
    """Refuse anything that is not a regular file (devices, FIFOs, sockets, folders) before reading it."""
    if "\x00" in str(path):
        raise ReadError(f"{what}: the path contains a NUL byte")
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _os_reason(exc, what) from None
    problem = _kind_problem(mode, what)
    if problem is not None:
        raise problem


def check_input(path: Path, what: str = "file", max_bytes: int | None = None) -> None:
    """A regular file no larger than ``max_bytes`` (default ``GEVAL_MAX_READ_BYTES``); ReadError otherwise."""
    check_regular(path, what)
    cap = size_limit(READ_LIMIT_VAR, MAX_READ_BYTES) if max_bytes is None else max_bytes
    size = os.stat(path).st_size
    if size > cap:
        raise ReadError(f"{what} is too large: {human_size(size)}, more than the limit of {human_size(cap)} "
                        f"(set {READ_LIMIT_VAR} to read larger files)")


def _open_checked(path: Path, what: str, cap: int, settable: bool = True) -> tuple[int, ReadError]:
    """A regular file opened without blocking and checked after opening (so a FIFO swapped in after a check
    cannot hang the read), no larger than ``cap``: (fd, the error to raise if it grows past ``cap``)."""
    if "\x00" in str(path):
        raise ReadError(f"{what}: the path contains a NUL byte")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_BINARY", 0))  # (Windows: bytes as they are, no CRLF or Ctrl-Z in text mode)
    except OSError as exc:
        raise _os_reason(exc, what) from None
    try:
        info = os.fstat(fd)
        problem = _kind_problem(info.st_mode, what)
        if problem is not None:
            raise problem
        size, limit = human_size(max(info.st_size, cap + 1)), human_size(cap)
        if size == limit:  # (rounded alike: in bytes)
            size, limit = f"{max(info.st_size, cap + 1):,} bytes", f"{cap:,} bytes"
        too_large = ReadError(f"{what} is too large: {size}, more than the limit of {limit}" + (
            f" (set {READ_LIMIT_VAR} to read larger files)" if settable else " (a fixed limit)"))
        if info.st_size > cap:
            raise too_large
    except BaseException:
        os.close(fd)
        raise
    return fd, too_large


def read_bytes(path: Path, what: str = "file", max_bytes: int | None = None) -> bytes:
    """A regular file's bytes, at most ``max_bytes`` (default: ``GEVAL_MAX_READ_BYTES``), opened as
    :func:`_open_checked` says."""
    cap = size_limit(READ_LIMIT_VAR, MAX_READ_BYTES) if max_bytes is None else max_bytes
    fd, too_large = _open_checked(path, what, cap, settable=max_bytes is None)
    try:
        chunks = []
        got = 0
        while got <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > cap:
            raise too_large
        return b"".join(chunks)
    except OSError as exc:
        raise _os_reason(exc, what) from None
    finally:
        os.close(fd)


def read_lines(path: Path, what: str = "file") -> Iterator[tuple[int, str]]:
    """(line number, line) of a regular file of lines (JSON Lines), read a line at a time: the file is never held
    whole. Lines end at ``\n`` only, as :func:`lines` says; UTF-8, a byte-order mark dropped; bounded by
    ``GEVAL_MAX_READ_BYTES`` and ``GEVAL_MAX_LINE_BYTES``. Raises :class:`ReadError` while the lines are taken."""
    for n, line, _ in read_lines_at(path, what):
        yield n, line


# (device, inode, size, time of the last change to the contents and to the inode, in ns) of an open file: the
# inode's time (st_ctime_ns, on Windows the creation time) moves with any write, and no program can set it back
# as os.utime (cp -p, rsync -t) sets the contents' time back
FileIdentity = tuple[int, int, int, int, int]


def _identity(info: os.stat_result) -> FileIdentity:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def read_lines_at(path: Path, what: str = "file",
                  opened: list[FileIdentity] | None = None) -> Iterator[tuple[int, str, int]]:
    """(line number, line, the byte where the line starts) of a file of lines, read as :func:`read_lines` says.
    ``opened`` receives the identity of the file as it was opened, for :class:`LinesAgain`."""
    line_cap = size_limit(LINE_LIMIT_VAR, MAX_LINE_BYTES)
    got = 0
    for n, raw in enumerate(read_chunks(path, what, opened, line_cap + 2), 1):  # the line, its \r and its \n
        start, got = got, got + len(raw)
        yield n, _line_text(raw, start, n, what, line_cap), start


def read_chunks(path: Path, what: str = "file", opened: list[FileIdentity] | None = None,
                size: int = 1 << 16) -> Iterator[bytes]:
    """A regular file's bytes in consecutive pieces, each to the end of its line (``\n``) or ``size`` bytes long,
    bounded by ``GEVAL_MAX_READ_BYTES`` and opened as :func:`_open_checked` says; ``opened``: as
    :func:`read_lines_at`."""
    cap = size_limit(READ_LIMIT_VAR, MAX_READ_BYTES)
    fd, too_large = _open_checked(path, what, cap)
    with os.fdopen(fd, "rb") as fh:
        if opened is not None:
            opened.append(_identity(os.fstat(fd)))
        got = 0
        while True:
            try:
                chunk = fh.readline(size)
            except OSError as exc:
                raise _os_reason(exc, what) from None
            if not chunk:
                return
            got += len(chunk)
            if got > cap:
                raise too_large
            yield chunk


def _line_text(raw: bytes, start: int, n: int, what: str, line_cap: int) -> str:
    """A line read with its ``\n`` (and ``\r``) as text; ReadError if it is too long or not UTF-8."""
    ended = raw.endswith(b"\n")
    body = raw[:-1] if ended else raw
    if body.endswith(b"\r"):
        body = body[:-1]
    if len(body) > line_cap or (not ended and len(raw) == line_cap + 2):
        raise _too_long(n, what, None, line_cap)
    try:
        return body.decode("utf-8-sig" if start == 0 else "utf-8")
    except UnicodeDecodeError as exc:
        raise ReadError(f"{what} is not UTF-8 text (byte {start + exc.start + 1})", where=f"line {n}") from None


class LinesAgain:
    """Lines of a file read before with :func:`read_lines_at`, read again by where they start. The file must be
    the one read then, unchanged (device, inode, size, time of the last change): else :class:`ReadError` on
    opening. A context manager; :meth:`line` reads one line."""

    def __init__(self, path: Path, what: str, identity: FileIdentity) -> None:
        self.what = what
        self.line_cap = size_limit(LINE_LIMIT_VAR, MAX_LINE_BYTES)
        fd, _ = _open_checked(path, what, size_limit(READ_LIMIT_VAR, MAX_READ_BYTES))
        try:
            if _identity(os.fstat(fd)) != identity:
                raise ReadError(f"{what} changed while it was in use (it is not the file that was read: its size "
                                "or time of change differs); run again to read it anew")
            self._fh = os.fdopen(fd, "rb")
            self._at = 0
        except BaseException:
            os.close(fd)
            raise

    def line(self, start: int, n: int) -> str:
        """The line that starts at byte ``start`` (line ``n``, for messages)."""
        try:
            if start != self._at:  # (lines read in the file's order follow one another: no seek)
                self._fh.seek(start)
            raw = self._fh.readline(self.line_cap + 2)
        except OSError as exc:
            raise _os_reason(exc, self.what) from None
        self._at = start + len(raw)
        return _line_text(raw, start, n, self.what, self.line_cap)

    def read(self, start: int, size: int) -> bytes:
        """The bytes from byte ``start`` to the end of their line (``\n``), at most ``size`` (b"" at the end of the
        file)."""
        try:
            if start != self._at:
                self._fh.seek(start)
            raw = self._fh.readline(size)
        except OSError as exc:
            raise _os_reason(exc, self.what) from None
        self._at = start + len(raw)
        return raw

    def __enter__(self) -> "LinesAgain":
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()


def read_text(path: Path, what: str = "file", max_bytes: int | None = None) -> str:
    """A regular file's text, decoded as UTF-8 (a byte-order mark is dropped); bounded as :func:`read_bytes`."""
    return decode_text(read_bytes(path, what, max_bytes), what)


def decode_text(raw: bytes, what: str = "file") -> str:
    """Bytes as UTF-8 text (a byte-order mark is dropped); ReadError naming the line of the first bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ReadError(f"{what} is not UTF-8 text (byte {exc.start + 1})", where=f"line {line}") from None


def lines(text: str, what: str = "file", max_chars: int | None = None) -> Iterator[tuple[int, str]]:
    """(line number, line) of JSON Lines ``text``; a line longer than ``GEVAL_MAX_LINE_BYTES`` characters is an
    error.

    Lines end at ``\n`` only (a ``\r`` before it is dropped): a JSON string may hold U+2028, U+0085, a form
    feed and the other characters at which ``str.splitlines`` also breaks a line, and such a line is one record.
    """
    cap = size_limit(LINE_LIMIT_VAR, MAX_LINE_BYTES) if max_chars is None else max_chars
    start, n, size = 0, 0, len(text)
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        line = text[start:end - 1] if end > start and text[end - 1] == "\r" else text[start:end]
        start, n = end + 1, n + 1
        if len(line) > cap:
            raise _too_long(n, what, human_size(len(line)), cap)
        yield n, line


def _too_long(n: int, what: str, size: str | None, cap: int) -> ReadError:
    how = f"{size}, more" if size is not None else "more"
    return ReadError(f"line {n} of the {what} is too long: {how} than the limit of {human_size(cap)} "
                     f"(set {LINE_LIMIT_VAR} to allow longer lines)", where=f"line {n}")


def confine(base: Path, rel: str, root: Path, what: str = "file") -> Path:
    """``base / rel`` if it stays inside ``root`` (symbolic links followed); OutsideProject otherwise.

    ``..``, an absolute path and a link that leads out are all refused; so is a
    NUL byte. The path need not exist.
    """
    if "\x00" in rel:
        raise OutsideProject(f"{what} {rel.split(chr(0))[0]!r}: the path contains a NUL byte; not allowed")
    root_real = os.path.realpath(root)
    joined = os.path.normpath(os.path.join(os.path.abspath(base), rel))
    if not _within(joined, root_real) and not _within(joined, os.path.abspath(root)):
        raise OutsideProject(f"{what} {rel!r} is outside the project; only files inside it may be read")
    try:
        real = os.path.realpath(joined)
    except (OSError, ValueError) as exc:
        raise ReadError(f"{what} {rel!r}: {exc}") from None
    if not _within(real, root_real):
        raise OutsideProject(f"{what} {rel!r} is a symbolic link (or lies in a linked folder) that leads outside "
                             "the project; only files inside it may be read")
    inside = (os.path.relpath(real, root_real), os.path.relpath(joined, os.path.abspath(root)))
    if any(".git" in Path(p).parts for p in inside):
        raise OutsideProject(f"{what} {rel!r} is in a .git folder, which holds git's configuration (in CI, the job's "
                             "token); not allowed")
    return Path(joined)


def leads_outside(path: Path, root: Path) -> bool:
    """Whether ``path``'s folder, its links followed, lies outside ``root`` (the file itself may be a link: it is
    replaced, not followed, when written)."""
    return not _within(os.path.realpath(path.parent), os.path.realpath(root))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def prepare_output(path: Path, what: str = "output", keep: Mapping[Path, str] | None = None,
                   within: Path | None = None) -> Path:
    """Check that ``path`` can be written, making its missing folders; InputError naming it otherwise.

    Call it for every file a command will write before the command does its
    work, so nothing is half written (``report --format all``) and no work is
    lost because the last write fails. ``keep``: files, and folders whose files, an output never replaces (a
    user's ``--out``), each with what it is. ``within``: the folder a default path (``reports/``, ``.geval/``) must
    stay in once its folders' links are followed: a linked ``reports`` folder committed to a repository would
    send the outputs anywhere.
    """
    shown = str(path)

    def refuse(reason: str) -> InputError:
        return InputError(problems=[Problem(f"cannot write {what} {shown}: {reason}", file=shown)])

    if "\x00" in shown:
        raise refuse("the path contains a NUL byte")
    if within is not None and leads_outside(path, within):
        raise refuse(f"a folder on its way is a symbolic link that leads outside {within}; give the path "
                     "explicitly (--out, --db) to write there")
    try:
        if path.is_dir():
            raise refuse(f"{shown} is a directory")
        if path.exists() or path.is_symlink():
            if not path.is_file():
                raise refuse(f"{shown} exists and is not a regular file")
            kept = _kept(path, keep or {})
            if kept is not None:
                raise refuse(f"it is {kept}, which an output never replaces; write it elsewhere")
            if not os.access(path, os.W_OK):
                raise refuse("permission denied (the file is read-only)")
        folder = path.parent
        missing = []
        while not folder.exists():
            missing.append(folder)
            if folder.parent == folder:
                break
            folder = folder.parent
        if folder.exists() and not folder.is_dir():
            raise refuse(f"{folder} is a file, not a directory")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise refuse(f"permission denied: cannot write in {folder} (not writable)")
        if missing:
            missing[0].mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno == 36:
            raise refuse("the file name is too long") from None
        raise refuse(exc.strerror or str(exc)) from None
    try:  # the file is written next to its place and renamed there: try that (a folder such as /proc refuses it)
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=".geval-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise refuse(f"no file can be created in {path.parent} ({exc.strerror or exc})") from None
    return path


def _kept(path: Path, keep: Mapping[Path, str]) -> str | None:
    """What ``path`` is, when it is one of ``keep``'s files or in one of its folders (followed through links)."""
    real = path.resolve()
    for place, name in keep.items():
        where = place.resolve()
        if real == where or where in real.parents:
            return name
    return None


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed into place (folders are created).

    The temporary file has a short name of its own in the same folder (a fixed ``<name>.tmp`` was too long for
    a name near the file system's limit, was blocked by a folder of that name, and was shared by two writers of
    one report), and gets the mode a new file would have. A write that fails is an InputError naming the path.
    """
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".geval-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, _new_file_mode())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        reason = "the file name is too long" if exc.errno == 36 else (exc.strerror or str(exc))
        raise InputError(problems=[Problem(f"cannot write {path}: {reason}", file=str(path))]) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


@functools.cache
def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file under the process's umask (mkstemp's files are private); read once,
    since reading the umask sets it for a moment."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
