"""A spec's prompt template as text: the built-in one for its method, or the file it names.

The text is part of the judging fingerprint, so it is read here, with the
spec. Compiling and rendering it is the judge's business
(:mod:`geval_spec.judge.render`).

What each built-in template needs from ``data.fields`` (any column can be
mapped onto these names, e.g. ``fields: {source: article, candidate: summary}``):
``geval.j2`` (score methods) and ``verdicts.j2`` (TCVA) need ``source`` and
``candidate``; ``pairwise.j2`` needs ``source`` and the two variables
``pairwise.candidates`` names (shown as ``candidate_a`` and ``candidate_b``).
All of them also use the spec variables below and ``findings``. (The
templates' own text carries no such note: it is fingerprinted, and a comment
there would change every spec's judging fingerprint.)
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Callable

from geval_spec.values import frozen

BUILTIN = {"score": "geval.j2", "verdicts": "verdicts.j2", "pairwise": "pairwise.j2"}
BUILTIN_PREFIX = "builtin:"

# The variables every template sees besides the spec's data.fields (which may not reuse these names).
SPEC_VARS = ("task", "criterion", "steps", "rubric", "method", "language", "verdict_levels", "pairwise")
CASE_VARS = ("findings",)
PAIR_VARS = ("candidate_a", "candidate_b")  # pairwise specs: the two candidates in the order shown

IncludeReader = Callable[[str], tuple[str, str]]  # template name -> (display name, text); raises OSError


@lru_cache(maxsize=4)
def builtin_text(name: str) -> str:
    return resources.files("geval_spec.spec").joinpath("templates", name).read_text(encoding="utf-8")


@frozen
class TemplateSource:
    """A template's text, how errors name it, and how to read the files it includes."""

    name: str  # display name (a path, or builtin:<file>)
    text: str
    read_include: IncludeReader | None = None

    @classmethod
    def builtin(cls, method: str, pairwise: bool = False) -> "TemplateSource":
        file = BUILTIN["pairwise" if pairwise else ("verdicts" if method == "verdicts" else "score")]
        return cls(name=f"{BUILTIN_PREFIX}{file}", text=builtin_text(file))

    @property
    def is_builtin(self) -> bool:
        return self.name.startswith(BUILTIN_PREFIX)
