"""Spec + case -> the exact chat messages a judge receives.

Templates run in Jinja2's ``SandboxedEnvironment`` with ``StrictUndefined``:
a spec from someone else's repository cannot reach Python internals, and a
misspelt variable is an error, not an empty string. A template may define the
blocks ``system`` and ``user`` (one message each, in that order); without
blocks its whole output is one user message.

Everything that is the same for every case must come first, so providers can
cache it. :meth:`Renderer.static_prefix` finds where case text starts by
rendering the template with sentinel values in place of every case variable.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

from geval_spec.errors import Problem, TemplateError
from geval_spec.judge.types import Message, Rendered, serialise
from geval_spec.plugins import Finding
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import VERDICT_LEVELS, Spec
from geval_spec.spec.template import CASE_VARS, PAIR_VARS, SPEC_VARS, TemplateSource

LENGTH_CLAUSE = ("Do not reward length: extra sentences that add nothing the criterion asks for, repetition or "
                 "padding are faults and lower the score.")
_SENTINEL = "\ue000"


def spec_context(spec: Spec, steps: tuple[str, ...]) -> dict[str, Any]:
    """Template variables that are the same for every case."""
    all_steps = list(steps)
    if spec.bias.length == "penalize":
        all_steps.append(LENGTH_CLAUSE)
    rubric = None
    if spec.rubric is not None:
        rubric = {
            "min": spec.rubric.scale.min,
            "max": spec.rubric.scale.max,
            "anchors": [{"score": s, "description": a.description, "examples": list(a.examples)}
                        for s, a in sorted(spec.rubric.anchors.items())],
        }
    language = None
    if spec.language is not None:
        language = {"code": spec.language.code, "formality": spec.language.formality,
                    "lexicon": list(spec.language.lexicon)}
    return {
        "task": spec.task,
        "criterion": {"name": spec.criterion.name, "description": spec.criterion.description},
        "steps": all_steps,
        "rubric": rubric,
        "method": spec.scoring.method,
        "language": language,
        "verdict_levels": list(VERDICT_LEVELS),
        "pairwise": spec.pairwise is not None,
    }


_COMPILED: dict[tuple[str, str], tuple[Any, Any, frozenset[str]]] = {}  # templates without includes


class Renderer:
    """A compiled template for one spec; render cases with :meth:`render`."""

    def __init__(self, spec: Spec, source: TemplateSource, steps: tuple[str, ...]):
        from jinja2 import FunctionLoader, StrictUndefined, TemplateSyntaxError
        from jinja2.sandbox import SandboxedEnvironment

        self.spec = spec
        self.source = source
        self.base = spec_context(spec, steps)
        self.case_vars = tuple(spec.data.fields) + CASE_VARS + (PAIR_VARS if spec.pairwise else ())
        self._includes: dict[str, str] = {}

        def load(name: str) -> tuple[str, str, Callable[[], bool]] | None:
            if name == source.name:
                return source.text, source.name, lambda: True
            if source.read_include is None:
                return None
            try:
                display, text = source.read_include(name)
            except (OSError, UnicodeDecodeError):
                return None
            self._includes[display] = text
            return text, display, lambda: True

        cached = _COMPILED.get((source.name, source.text)) if source.read_include is None else None
        if cached is None:
            env: Any = SandboxedEnvironment(loader=FunctionLoader(load), undefined=StrictUndefined, trim_blocks=True,
                                       lstrip_blocks=True, keep_trailing_newline=False, autoescape=False)
            try:  # parse once: the same tree is checked for unknown names and compiled
                tree = env.parse(source.text, name=source.name, filename=source.name)
                code = env.compile(tree, name=source.name, filename=source.name)
            except TemplateSyntaxError as exc:
                raise TemplateError(problems=[self._problem(exc.filename or source.name, exc.lineno,
                                                            f"template syntax error: {exc.message}")]) from None
            template: Any = env.template_class.from_code(env, code, env.make_globals(None))
            from jinja2 import meta

            cached = (env, template, frozenset(meta.find_undeclared_variables(tree)))
            if source.read_include is None:
                _COMPILED[(source.name, source.text)] = cached
        self.env, self.template, undeclared = cached
        self._check_names(undeclared)
        self.blocks = [b for b in ("system", "user") if b in self.template.blocks]

    # -- problems -------------------------------------------------------------
    def _text_of(self, name: str) -> str | None:
        if name == self.source.name:
            return self.source.text
        return self._includes.get(name)

    def _problem(self, file: str, line: int | None, message: str, hint: str | None = None) -> Problem:
        return Problem(message=message, file=file, line=line, hint=hint, source=self._text_of(file))

    def _check_names(self, undeclared: frozenset[str]) -> None:
        known = set(self.base) | set(self.case_vars)
        unknown = sorted(undeclared - known)
        problems = []
        for name in unknown:
            line = next((n for n, text in enumerate(self.source.text.splitlines(), 1)
                         if _mentions(text, name)), None)
            fields = ", ".join(self.spec.data.fields)
            problems.append(self._problem(
                self.source.name, line, f"template variable '{name}' is not defined",
                hint=f"case variables come from data.fields ({fields}); spec variables: {', '.join(SPEC_VARS)}"))
        if problems:
            raise TemplateError(problems=problems)

    # -- rendering ------------------------------------------------------------
    def context(self, fields: Mapping[str, str], findings: Sequence[Finding] = (),
                swapped: bool = False) -> dict[str, Any]:
        ctx = dict(self.base)
        ctx.update(fields)
        ctx["findings"] = list(findings)
        if self.spec.pairwise is not None:
            first, second = self.spec.pairwise.candidates
            a, b = fields.get(first, ""), fields.get(second, "")
            ctx["candidate_a"], ctx["candidate_b"] = (b, a) if swapped else (a, b)
        return ctx

    def _run(self, ctx: dict[str, Any]) -> tuple[Message, ...]:
        from jinja2 import TemplateError as JinjaError

        try:
            if not self.blocks:
                return (Message("user", self.template.render(ctx).strip()),)
            out = []
            for block in self.blocks:
                text = "".join(self.template.blocks[block](self.template.new_context(ctx))).strip()
                if text:
                    out.append(Message(block, text))
            return tuple(out)
        except (JinjaError, ArithmeticError, TypeError, ValueError, LookupError, AttributeError,
                RecursionError) as exc:  # anything a template can cause is the template's error
            file, line = self._where(exc)
            raise TemplateError(problems=[self._problem(file, line, f"template error: {exc}")]) from None

    def _where(self, exc: BaseException) -> tuple[str, int | None]:
        tb = exc.__traceback__
        found = (self.source.name, getattr(exc, "lineno", None))
        names = {self.source.name, *self._includes}
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in names:
                found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
            tb = tb.tb_next
        return found

    def render(self, case_id: str, fields: Mapping[str, str], findings: Sequence[Finding] = (),
               swapped: bool = False) -> Rendered:
        return Rendered(case_id=case_id, messages=self._run(self.context(fields, findings, swapped)))

    def static_prefix(self) -> str:
        """The serialised text that every case's prompt starts with."""
        probe_fields = {name: _SENTINEL for name in self.spec.data.fields}  # (pair variables follow the fields)
        probe = [Finding(kind=_SENTINEL, message=_SENTINEL, start=0, end=0, text=_SENTINEL)]
        text = serialise(self._run(self.context(probe_fields, probe)))
        cut = text.find(_SENTINEL)
        return text if cut < 0 else text[:cut]


def _mentions(line: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", line) is not None and ("{{" in line or "{%" in line)


def prefix_share(prefix: str, messages: tuple[Message, ...]) -> tuple[int, int]:
    """(static prefix tokens, total tokens) of one rendered prompt."""
    from geval_spec.judge import tokens

    full = serialise(messages)
    common = prefix if full.startswith(prefix) else _common_prefix(prefix, full)
    return tokens.count(common), tokens.count(full)


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]



def renderer_for(parsed: ParsedSpec) -> Renderer:
    """The compiled template of a loaded spec (templates without includes are compiled once per process)."""
    return Renderer(parsed.spec, parsed.template, parsed.steps)
