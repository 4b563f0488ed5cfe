"""Compiled templates kept between commands, so that ``validate`` and ``render`` do not parse and compile again.

Compiling a template (Jinja's parser, the sandbox's code generator, Python's
``compile``) takes about 8 ms a template; loading the stored code takes a
twentieth of that (BENCHMARKS.md, validate). An entry holds the code Jinja
generated, the names the template reads from its context, and the names it
includes with a constant name (checked again on every load: they must stay
inside the project).

The key is a SHA-256 of everything the code depends on: the template's name
and text, the environment's options, the Python and Jinja versions, and the
source of the sandbox's code generator. A changed template is a new entry;
nothing is ever looked up by name alone.

The cache lives in ``$GEVAL_CACHE_DIR`` when that is set (an empty value
turns the cache off), else in ``$XDG_CACHE_HOME/geval-spec/templates`` or
``~/.cache/geval-spec/templates``. The folder is made readable by its owner
only, and a folder that belongs to someone else or that others can write is
not read: stored code is loaded as code. Any failure to read or write (a
read-only home, a full disk, a damaged entry) only means compiling again.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import types
from pathlib import Path

CACHE_VAR = "GEVAL_CACHE_DIR"
FORMAT = "1"  # bump when an entry's layout changes
MAX_ENTRIES = 500  # past this many, the least recently written are removed (down to 400)

Entry = tuple[types.CodeType, frozenset[str], tuple[tuple[int, str], ...]]  # code, names read, constant includes


def cache_dir() -> Path | None:
    """Where entries are kept, or None when the cache is off."""
    raw = os.environ.get(CACHE_VAR)
    if raw is not None:
        return Path(raw).expanduser() if raw.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "geval-spec" / "templates"


def entry_key(*parts: str) -> str:
    """The key of a compiled template: a hash of everything its code depends on (see the module's docstring)."""
    import jinja2

    h = hashlib.sha256()
    for part in (FORMAT, sys.version, jinja2.__version__, _generator_source(), *parts):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


_GENERATOR: list[str] = []


def _generator_source() -> str:
    """A hash of the sandbox module's source, which holds the code generator (read once per process)."""
    if not _GENERATOR:
        from geval_spec.judge import sandbox

        try:
            digest = hashlib.sha256(Path(sandbox.__file__).read_bytes()).hexdigest()
        except (OSError, TypeError):
            digest = f"unreadable-{os.getpid()}"  # a key of this process alone: the cache is off in effect
        _GENERATOR.append(digest)
    return _GENERATOR[0]


def _trusted(folder: Path) -> bool:
    """The folder is ours and nobody else can write to it."""
    try:
        st = folder.stat()
    except OSError:
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return not st.st_mode & 0o022


def load(key: str) -> Entry | None:
    """The entry stored under ``key``, or None (absent, unreadable, damaged, or the folder is not trusted)."""
    folder = cache_dir()
    if folder is None or not _trusted(folder):
        return None
    try:
        value = marshal.loads((folder / key).read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not (isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], types.CodeType)
            and isinstance(value[1], tuple) and all(isinstance(n, str) for n in value[1])
            and isinstance(value[2], tuple)
            and all(isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], int) and isinstance(r[1], str)
                    for r in value[2])):
        return None
    return value[0], frozenset(value[1]), value[2]


def store(key: str, entry: Entry) -> None:
    """Keep ``entry`` under ``key``; failures are ignored (the next command compiles again)."""
    folder = cache_dir()
    if folder is None:
        return
    code, names, refs = entry
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _trusted(folder):
            return
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_bytes(marshal.dumps((code, tuple(sorted(names)), refs)))
        os.replace(tmp, folder / key)
        _prune(folder)
    except (OSError, ValueError):
        return


def _prune(folder: Path) -> None:
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda p: p.stat().st_mtime)
    for p in entries[:len(entries) - MAX_ENTRIES + 100]:
        p.unlink(missing_ok=True)
