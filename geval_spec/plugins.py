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

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

GROUP = "geval_spec.plugins"

BUILTIN_CLIENTS = {
    "litellm": "geval_spec.judge.clients.litellm_client:LitellmClient",
    "openai-http": "geval_spec.judge.clients.http_client:HttpClient",
    "replay": "geval_spec.judge.clients.replay:ReplayClient",
}


@dataclass(frozen=True)
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


def _entry_points() -> list[Any]:
    """The installed entry points of GROUP: ``importlib.metadata.entry_points(group=GROUP)``, in a third of the time.

    That function parses the entry points of every installed distribution; this
    one parses only those whose file names the group, which is all that can
    hold one. As there, a distribution installed twice counts once (the first
    on ``sys.path``).
    """
    from importlib.metadata import distributions

    found: list[Any] = []
    seen: set[str] = set()
    for dist in distributions():
        name = getattr(dist, "_normalized_name", None) or (dist.metadata["Name"] or "").lower().replace("-", "_")
        if name in seen:
            continue
        seen.add(name)
        text = dist.read_text("entry_points.txt")
        if text and GROUP in text:
            found.extend(dist.entry_points.select(group=GROUP))
    return found


def load_plugins() -> Registry:
    """The registry, with every installed plugin loaded (once per process)."""
    global _REGISTRY
    if _REGISTRY is not None:
        return _REGISTRY
    registry = Registry()
    for ep in sorted(_entry_points(), key=lambda e: e.name):
        try:
            target = ep.load()
            setup: Callable[[Registry], None] = getattr(target, "setup", target)
            setup(registry)
            registry.loaded.append(ep.name)
        except Exception as exc:  # a broken plugin must not take the tool down, but is reported
            registry.failed.append((ep.name, f"{type(exc).__name__}: {exc}"))
    _REGISTRY = registry
    return registry
