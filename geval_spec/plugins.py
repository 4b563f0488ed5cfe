"""Plugins: loaded from the ``geval_spec.plugins`` entry-point group.

First-party plugins (in ``plugins/``) load exactly like third-party ones. An
entry point names an object with a ``setup(registry)`` function; through the
registry a plugin can add:

- language checkers (``add_language(prefix, checker)``): a checker is called
  with the spec's ``language`` settings and a candidate text, before the judge
  is called, and returns findings (see :class:`Finding`);
- judge clients (``add_client(name, "module:Class")``).

Entry points are loaded once per process and only when something needs them.
A plugin that fails to load is reported, not silently skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

GROUP = "geval_spec.plugins"


@dataclass(frozen=True)
class Finding:
    """One deterministic pre-check result about a candidate text."""

    kind: str  # e.g. "formality", "compound"
    message: str
    start: int  # character offsets into the candidate
    end: int
    text: str  # the candidate text at [start, end)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "start": self.start, "end": self.end,
                "text": self.text}


class Checker(Protocol):
    def __call__(self, language: Any, text: str) -> list[Finding]: ...


class Registry:
    def __init__(self) -> None:
        self.languages: dict[str, Checker] = {}
        self.loaded: list[str] = []
        self.failed: list[tuple[str, str]] = []

    def add_language(self, prefix: str, checker: Checker) -> None:
        self.languages[prefix] = checker

    def add_client(self, name: str, target: str) -> None:
        from .clients import register

        register(name, target)

    def checker_for(self, code: str) -> Checker | None:
        """The checker for ``nl-BE``: one registered for ``nl-BE``, else for ``nl``."""
        return self.languages.get(code) or self.languages.get(code.split("-")[0])


_REGISTRY: Registry | None = None


def load_plugins() -> Registry:
    global _REGISTRY
    if _REGISTRY is not None:
        return _REGISTRY
    from importlib.metadata import entry_points

    registry = Registry()
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            target = ep.load()
            setup: Callable[[Registry], None] = getattr(target, "setup", target)
            setup(registry)
            registry.loaded.append(ep.name)
        except Exception as exc:  # a broken plugin must not take the tool down, but is reported
            registry.failed.append((ep.name, f"{type(exc).__name__}: {exc}"))
    _REGISTRY = registry
    return registry
