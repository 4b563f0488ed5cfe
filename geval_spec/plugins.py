"""The one registry of extensions: language checkers, judge clients and finding kinds.

Plugins load from the ``geval_spec.plugins`` entry-point group; first-party
plugins (in ``plugins/``) load exactly like third-party ones. An entry point
names an object with a ``setup(registry)`` function (or a function taking the
registry). Through the :class:`Registry` a plugin can add:

- a language checker (``add_language(prefix, checker, kinds)``): called with
  the spec's ``language`` settings and a candidate text before the judge is
  called, it returns :class:`Finding` values; ``kinds`` names the finding kinds
  it can produce (what ``language.penalty`` may name);
- a judge client (``add_client(name, "module:Class")``), imported only when a
  request is due.

The built-in clients are registered here; entry points are loaded once per
process and only when something asks for a language or a client. A plugin
that fails to load is kept in :attr:`Registry.failed` and named in the error
of whatever needed it, never silently skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Protocol

from geval_spec.files import ReadError, read_bytes
from geval_spec.values import frozen

GROUP = "geval_spec.plugins"
MAX_ENTRY_POINTS_BYTES = 1 << 20  # an entry_points.txt is a few lines; a larger one is refused
MAX_METADATA_BYTES = 16 << 20  # a METADATA holds the project's description (PyPI refuses more than 10 MB in all)

BUILTIN_CLIENTS = {
    "litellm": "geval_spec.judge.clients.litellm_client:LitellmClient",
    "openai-http": "geval_spec.judge.clients.http_client:HttpClient",
    "replay": "geval_spec.judge.clients.replay:ReplayClient",
}


@frozen
class Finding:
    """One deterministic pre-check result about a candidate text.

    The same value is made by a plugin, rendered into the prompt, stored with
    the run and summarised in the report.
    """

    kind: str  # e.g. "formality", "compound"
    message: str
    start: int  # character offsets into the candidate
    end: int
    text: str  # the candidate text at [start, end)


class Checker(Protocol):
    def __call__(self, language: Any, text: str) -> list[Finding]: ...


@dataclass
class Registry:
    """What the loaded plugins (and the built-ins) provide."""

    languages: dict[str, Checker] = field(default_factory=dict)
    finding_kinds: dict[str, str] = field(default_factory=dict)  # kind -> the language prefix that makes it
    clients: dict[str, str] = field(default_factory=lambda: dict(BUILTIN_CLIENTS))  # name -> "module:Class"
    loaded: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # loaded entry point -> "distribution version"
    failed: list[tuple[str, str]] = field(default_factory=list)  # (entry point, error)

    def add_language(self, prefix: str, checker: Checker, kinds: tuple[str, ...] = ()) -> None:
        self.languages[prefix] = checker
        for kind in kinds:
            self.finding_kinds[kind] = prefix

    def add_client(self, name: str, target: str) -> None:
        self.clients[name] = target

    def checker_for(self, code: str) -> Checker | None:
        """The checker for ``nl-BE``: one registered for ``nl-BE``, else for ``nl``."""
        return self.languages.get(code) or self.languages.get(code.split("-")[0])

    def failures(self) -> str:
        """The plugins that failed to load, for error messages ('' when none did)."""
        return "; ".join(f"{name}: {error}" for name, error in self.failed)

    def missing_language(self, code: str) -> str | None:
        """Why no checker can check ``code`` (None when one can)."""
        if self.checker_for(code) is not None:
            return None
        failed = self.failures()
        return (f"no installed plugin checks language {code!r}"
                + (f" (plugins that failed to load: {failed})" if failed else "")
                + "; the Dutch rules install with: pip install -e plugins/nl")


_REGISTRY: Registry | None = None


@frozen
class EntryPoint:
    """One ``name = module:attr`` line of a distribution's entry_points.txt, in GROUP."""

    name: str
    value: str
    dist: str = ""  # the distribution that declares it: "name version", as its metadata says

    def load(self) -> Any:
        """The object the value names (``module``, ``module:attr`` or ``module:a.b``; extras in [] are ignored)."""
        import importlib

        match = _ENTRY_VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r}: {self.value!r} is not module:attribute")
        target = importlib.import_module(match["module"])
        for part in filter(None, (match["attr"] or "").split(".")):
            target = getattr(target, part)
        return target


# importlib.metadata.EntryPoint's pattern for a value
_ENTRY_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


Broken = list[tuple[str, str]]  # (distribution folder, what is wrong with its entry points)


def _scan() -> tuple[list[EntryPoint], Broken]:
    """The installed entry points of GROUP (as ``importlib.metadata.entry_points(group=GROUP)`` finds them), and
    the distributions whose entry points could not be read.

    Read straight from the ``*.dist-info`` and ``*.egg-info`` folders on
    ``sys.path``, in importlib.metadata's order and with its reading of the
    file, without importing importlib.metadata (which imports the email
    package: about a tenth of ``validate``'s start, BENCHMARKS.md). As there,
    a distribution installed twice counts once (the first on ``sys.path``).
    Where importlib.metadata would look further or decide by the metadata
    itself, it is asked instead: a zip archive or an ``.egg`` on
    ``sys.path``, an import hook that supplies distributions of its own, or
    a folder whose suffix is not lower case or whose name is empty. A test
    compares the two on a corpus of installed-looking folders.
    """
    import os
    import sys

    entries = [os.fspath(e) for e in sys.path if isinstance(e, (str, os.PathLike))]
    entries = [e for e in entries if isinstance(e, str)]
    if any(os.path.isfile(entry) or entry.lower().endswith(".egg") for entry in entries if entry) or \
            any(hasattr(f, "find_distributions") and not _searches_sys_path(f) for f in sys.meta_path):
        return _scan_with_importlib()
    found: list[EntryPoint] = []
    broken: Broken = []
    seen: set[str] = set()
    for entry in entries:
        try:
            children = os.listdir(entry or ".")
        except OSError:
            continue
        infos: dict[str, list[str]] = {}  # normalized name -> its folders, in order of first appearance
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                stem = low.rpartition(".")[0].partition("-")[0]
                if not stem or not child.endswith((".dist-info", ".egg-info")):
                    return _scan_with_importlib()  # importlib names such a distribution from its metadata
                infos.setdefault(re.sub(r"[-_.]+", "_", stem), []).append(child)
        for name, child in ((name, child) for name, folders in infos.items() for child in folders):
            if name in seen:
                continue
            seen.add(name)
            path = os.path.join(entry or ".", child, "entry_points.txt")
            if not os.path.lexists(path):  # most distributions have none
                continue
            try:  # bounded and never blocking: a FIFO or a huge file planted on sys.path is reported, not read
                raw = read_bytes(Path(path), "entry_points.txt", max_bytes=MAX_ENTRY_POINTS_BYTES)
            except ReadError as exc:
                if not os.path.isdir(path):  # (importlib skips a folder of that name too)
                    broken.append((child, str(exc)))
                continue
            if GROUP.encode() not in raw:
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                broken.append((child, _not_utf8(exc)))
                continue
            _collect(child, text, found, broken, partial(_dist_label, os.path.join(entry or ".", child)))
    return found, broken


def _dist_label(folder: str) -> str:
    """"name version" from a distribution folder's METADATA (PKG-INFO for .egg-info), as importlib.metadata reads
    them; the folder's name when they cannot be read."""
    import os

    meta = os.path.join(folder, "PKG-INFO" if folder.endswith(".egg-info") else "METADATA")
    try:
        head = read_bytes(Path(meta), "distribution metadata", max_bytes=MAX_METADATA_BYTES)
    except ReadError:
        return os.path.basename(folder)
    fields: dict[str, str] = {}
    for line in head.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("name", "version"):
            fields.setdefault(key.strip().lower(), value.strip())
    if "name" not in fields or "version" not in fields:
        return os.path.basename(folder)
    return f"{fields['name']} {fields['version']}"


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return f"entry_points.txt is not UTF-8 text ({exc.reason} at byte {exc.start})"


def _collect(folder: str, text: str | None, found: list[EntryPoint], broken: Broken,
             dist: Callable[[], str]) -> None:
    """The GROUP entries of one distribution's entry_points.txt into ``found`` (with ``dist()``, the distribution's
    name and version), its bad lines into ``broken``."""
    if text and GROUP in text:
        entries, problems = _group_entries(text)
        if entries:
            label = dist()
            found.extend(replace(e, dist=label) for e in entries)
        broken.extend((folder, problem) for problem in problems)


def _searches_sys_path(finder: Any) -> bool:
    """The standard finder of distributions on ``sys.path``, or the importlib_metadata backport's copy of it (which
    some libraries, litellm's dependencies among them, add to ``sys.meta_path``): they find what the scan reads."""
    from importlib.machinery import PathFinder

    kind = type(finder) if not isinstance(finder, type) else finder
    return finder is PathFinder or (kind.__module__ == "importlib_metadata" and kind.__name__ == "MetadataPathFinder")


def _group_entries(text: str) -> tuple[list[EntryPoint], list[str]]:
    """The GROUP section of an entry_points.txt, read as importlib.metadata reads it (``#`` comments, ``[section]``),
    and its lines that are not ``name = value``."""
    out: list[EntryPoint] = []
    problems: list[str] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == GROUP:
            name, sep, value = line.partition("=")
            if sep:
                out.append(EntryPoint(name.strip(), value.strip()))
            else:
                problems.append(f"entry_points.txt: {line[:80]!r} in [{GROUP}] is not name = value")
    return out, problems


def _scan_with_importlib() -> tuple[list[EntryPoint], Broken]:
    from importlib.metadata import distributions

    found: list[EntryPoint] = []
    broken: Broken = []
    seen: set[str] = set()
    for dist in distributions():
        name = getattr(dist, "_normalized_name", None) or (dist.metadata["Name"] or "").lower().replace("-", "_")
        if name in seen:
            continue
        seen.add(name)
        folder = getattr(getattr(dist, "_path", None), "name", None) or name
        try:
            text = dist.read_text("entry_points.txt")
        except UnicodeDecodeError as exc:
            broken.append((folder, _not_utf8(exc)))
            continue
        _collect(folder, text, found, broken,  # (importlib's own reading raises on a line without "=")
                 partial(_importlib_label, dist, folder))
    return found, broken


def _importlib_label(dist: Any, folder: str) -> str:
    """"name version" of a distribution importlib.metadata found; its folder's name without both."""
    meta = dist.metadata
    name, version = (meta["Name"], meta["Version"]) if meta is not None else (None, None)
    return f"{name} {version}" if name and version else folder


def load_plugins() -> Registry:
    """The registry, with every installed plugin loaded (once per process)."""
    global _REGISTRY
    if _REGISTRY is not None:
        return _REGISTRY
    registry = Registry()
    found, broken = _scan()
    registry.failed += broken
    for ep in sorted(found, key=lambda e: e.name):
        try:
            target = ep.load()
            setup: Callable[[Registry], None] = getattr(target, "setup", target)
            setup(registry)
            registry.loaded.append(ep.name)
            registry.versions[ep.name] = ep.dist
        except Exception as exc:  # a broken plugin must not take the tool down, but is reported
            registry.failed.append((ep.name, f"{type(exc).__name__}: {exc}"))
    _REGISTRY = registry
    return registry
