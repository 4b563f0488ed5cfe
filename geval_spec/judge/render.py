"""Spec + case -> the exact chat messages a judge receives.

Templates run in Jinja2's immutable sandbox with ``StrictUndefined`` and
limits (:mod:`geval_spec.judge.sandbox`): a spec from someone else's
repository cannot reach Python internals, build gigabytes or loop for hours,
and a misspelt variable is an error, not an empty string. Templates it
includes, imports or extends are read from inside the project only. A
template may define the blocks ``system`` and ``user`` (one message each, in
that order); without blocks its whole output is one user message.

A block that reads only spec variables (the built-in templates' system
message: task, criterion, steps, rubric) renders to the same text for every
case; from the third case on it is rendered once and reused, unless it could
differ (the ``random`` filter, ``lipsum``, ``self``, ``super``, another
template), and only while each name it reads holds the spec's own value.

Everything that is the same for every case must come first, so providers can
cache it. :meth:`Renderer.static_prefix` finds where case text starts by
rendering the template with sentinel values in place of every case variable.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from geval_spec.errors import Problem, TemplateError
from geval_spec.files import ReadError
from geval_spec.judge.messages import Message, Rendered, serialise
from geval_spec.plugins import Finding
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import VERDICT_LEVELS, Spec
from geval_spec.spec.template import BUILTIN_PREFIX, CASE_VARS, PAIR_VARS, SPEC_VARS, TemplateSource
from geval_spec.spec.yamldoc import Path as KeyPath

if TYPE_CHECKING:
    from geval_spec.judge.sandbox import Limits

LENGTH_CLAUSE = ("Do not reward length: extra sentences that add nothing the criterion asks for, repetition or "
                 "padding are faults and lower the score.")
_SENTINEL = "\ue000"
BUILTIN_LABELS = {"geval.j2": "G-Eval", "verdicts.j2": "TCVA", "pairwise.j2": "pairwise"}
KeyProblem = Callable[[KeyPath, str], Problem]


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


_COMPILED: dict[tuple[str, str], "_Compiled"] = {}  # templates without includes
ENV_OPTIONS = {"trim_blocks": True, "lstrip_blocks": True, "keep_trailing_newline": False, "autoescape": False}


REUSE_AFTER = 2  # renders before a block that reads nothing of the case is kept (validate renders two cases)


class _Compiled:
    """A compiled template with what the renderer needs to know about it."""

    def __init__(self, env: Any, template: Any, undeclared: frozenset[str], block_reads: Mapping[str, frozenset[str]],
                 tree: Any) -> None:
        self.env = env
        self.template = template
        self.undeclared = undeclared  # the names it reads from its context
        self.block_reads = block_reads  # block -> the names it reads from its context (globals included)
        self._tree = tree

    @cached_property
    def pure_blocks(self) -> frozenset[str]:
        """The blocks whose text depends on nothing but the names they read (see :func:`_pure_blocks`)."""
        return _pure_blocks(self._tree)


def _pure_blocks(tree: Any) -> frozenset[str]:
    """The blocks whose output is a function of the context names they read, and nothing else.

    Not one of them: with extends, include, import or from anywhere in the
    template (another template's code runs), a block that holds another block
    or reads ``self`` or ``super`` (another block's code, whose reads are not
    its own), and one that names the ``random`` filter or ``lipsum`` (a
    different text every time). Random text reached another way
    (``map('random')``) is caught as it is drawn: :class:`Budget` notes it.
    """
    from jinja2 import nodes

    if tree.find((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)) is not None:
        return frozenset()
    pure = set()
    for block in tree.find_all(nodes.Block):
        names = {n.name for n in block.find_all(nodes.Name)}
        if (block.find(nodes.Block) is not None or names & {"self", "super", "lipsum"}
                or any(f.name == "random" for f in block.find_all(nodes.Filter))):
            continue
        pure.add(block.name)
    return frozenset(pure)


def _constant_references(tree: Any) -> tuple[tuple[int, str], ...]:
    """(line, name) of every template that include, import, from and extends name with a constant."""
    from jinja2 import nodes

    refs = []
    for node in tree.find_all((nodes.Include, nodes.Extends, nodes.Import, nodes.FromImport)):
        names = [node.template] if not isinstance(node.template, (nodes.List, nodes.Tuple)) else node.template.items
        for item in names:
            if isinstance(item, nodes.Const) and isinstance(item.value, str):
                refs.append((node.lineno, item.value))
    return tuple(refs)


def _template_error(exc: BaseException) -> str:
    """What a template's failure says: a template it names that is not there says so (Jinja's words are the
    name alone), with the name cut to 80 characters (a name may be made of a case's text)."""
    from jinja2 import TemplateNotFound, TemplatesNotFound

    if isinstance(exc, (TemplateNotFound, TemplatesNotFound)):
        names = [str(n) for n in getattr(exc, "templates", None) or [exc.name]]
        shown = ", ".join(repr(n if len(n) <= 80 else n[:77] + "...") for n in names)
        return (f"template error: no template {shown} in the project (an include, import or extends names a file "
                "relative to the spec's template)")
    return f"template error: {exc}"


class Renderer:
    """A compiled template for one spec; render cases with :meth:`render`."""

    def __init__(self, spec: Spec, source: TemplateSource, steps: tuple[str, ...],
                 key_problem: KeyProblem | None = None):
        self.spec = spec
        self.source = source
        self.base = spec_context(spec, steps)
        self.case_vars = tuple(spec.data.fields) + CASE_VARS + (PAIR_VARS if spec.pairwise else ())
        self.key_problem = key_problem
        self._includes: dict[str, str] = {}
        cached = _COMPILED.get((source.name, source.text)) if source.read_include is None else None
        if cached is None:
            cached = self._compile()
            if source.read_include is None:
                _COMPILED[(source.name, source.text)] = cached
        self.env, self.template = cached.env, cached.template
        # the context a case's render starts from: the template's globals, then the spec's variables over them
        # (as Jinja's new_context merges them; merged once here, a render's context is shared with Jinja as it
        # is: merging per render went through the globals' ChainMap, 3.6 of a render's 13 us)
        self._start = {**dict(self.template.globals), **self.base}
        self._check_names(cached.undeclared)
        self.blocks = [b for b in ("system", "user") if b in self.template.blocks]
        # A block that reads nothing of the case renders to the same text for every case: from the third case on
        # it is rendered once and reused, so long as each name it reads is, in the case's context, the spec's own
        # value (BENCHMARKS.md, scale).
        self._compiled = cached
        self._renders = 0
        self._fixed: dict[str, frozenset[str]] = {}  # block -> the names it reads, for the blocks that may be kept
        self._same: dict[str, str] = {}  # block -> its output, as rendered (before strip)
        self._limits: Limits | None = None  # the render limits, read from the environment at the first render

    def _load(self, name: str) -> tuple[str, str, Callable[[], bool]] | None:
        """Jinja's loader: the template itself, or a file of the project it includes (never one outside)."""
        source = self.source
        if "\x00" in name:
            raise ReadError(f"template {name.split(chr(0))[0]!r}: the name contains a NUL byte; not allowed")
        if name == source.name:
            return source.text, source.name, lambda: True
        if source.read_include is None:
            return None
        try:
            display, text = source.read_include(name)  # OutsideProject / ReadError go up: they are errors
        except OSError:
            return None
        self._includes[display] = text
        return text, display, lambda: True

    def _compile(self) -> _Compiled:
        """Environment, template and the names it and its blocks read from their context."""
        from jinja2 import FunctionLoader, StrictUndefined, TemplateSyntaxError

        from geval_spec.judge.sandbox import LimitedSandbox

        source = self.source
        env: Any = LimitedSandbox(loader=FunctionLoader(self._load), undefined=StrictUndefined, **ENV_OPTIONS)
        try:  # parse once: the same tree is checked for unknown names and compiled
            tree = env.parse(source.text, name=source.name, filename=source.name)
            if source.read_include is not None:  # a built-in template includes nothing
                self._check_references(_constant_references(tree))
            code, undeclared = env.compile_tree(tree, source.name)
        except TemplateSyntaxError as exc:
            raise TemplateError(problems=[self._problem(exc.filename or source.name, exc.lineno,
                                                        f"template syntax error: {exc.message}")]) from None
        template: Any = env.template_class.from_code(env, code, env.make_globals(None))
        reads = {name: frozenset(names) for name, names in env.block_reads.items()}
        return _Compiled(env, template, undeclared, reads, tree)

    def _check_references(self, refs: tuple[tuple[int, str], ...]) -> None:
        """Templates named by include, import, from and extends with a constant name: inside the project."""
        problems = []
        for line, name in refs:
            try:
                self._load(name)
            except ReadError as exc:
                problems.append(self._problem(self.source.name, line, str(exc)))
        if problems:
            raise TemplateError(problems=problems)

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
        fields = ", ".join(self.spec.data.fields)
        for name in unknown:
            if self.source.is_builtin and self.key_problem is not None:
                problems.append(self._builtin_needs(name))
                continue
            line = next((n for n, text in enumerate(self.source.text.splitlines(), 1)
                         if _mentions(text, name)), None)
            problems.append(self._problem(
                self.source.name, line, f"template variable '{name}' is not defined",
                hint=f"map a column to it under data.fields (now: {fields}); spec variables: {', '.join(SPEC_VARS)}"))
        if problems:
            raise TemplateError(problems=problems)

    def _builtin_needs(self, name: str) -> Problem:
        """A variable the built-in template uses that data.fields does not provide, at the spec's data.fields."""
        assert self.key_problem is not None
        label = BUILTIN_LABELS.get(self.source.name[len(BUILTIN_PREFIX):], "built-in")
        problem = self.key_problem(("data", "fields"), f"the built-in {label} template needs `{name}`: map a column "
                                                       "to it under data.fields")
        return problem.with_hint(f"e.g. fields: {{{name}: <column>}}; the built-in templates use source and "
                                 "candidate (candidate_a and candidate_b come from pairwise.candidates)")

    # -- rendering ------------------------------------------------------------
    def context(self, fields: Mapping[str, str], findings: Sequence[Finding] = (),
                swapped: bool = False) -> dict[str, Any]:
        ctx = dict(self._start)
        ctx.update(fields)
        ctx["findings"] = list(findings)
        if self.spec.pairwise is not None:
            first, second = self.spec.pairwise.candidates
            a, b = fields.get(first, ""), fields.get(second, "")
            ctx["candidate_a"], ctx["candidate_b"] = (b, a) if swapped else (a, b)
        return ctx

    def _run(self, ctx: dict[str, Any], case_id: str) -> tuple[Message, ...]:
        from jinja2 import TemplateError as JinjaError

        from geval_spec.judge.sandbox import Budget, LimitExceeded, Limits

        if self._limits is None:  # (once per renderer, which a run makes per chunk: not once per case)
            self._limits = Limits.from_env()
        budget = Budget(self._limits)
        try:
            with self.env.limited(budget):
                try:
                    return self._messages(ctx, budget)
                except Exception:
                    self.env.handle_exception()  # re-raised with the template's file and line in the traceback
                    raise  # (not reached)
        except (LimitExceeded, ReadError, MemoryError) as exc:
            file, line = self._where(exc)
            reason = "the template needs more memory than there is" if isinstance(exc, MemoryError) else str(exc)
            raise TemplateError(problems=[self._problem(file, line, f"case {case_id!r}: {reason}")]) from None
        except (JinjaError, ArithmeticError, TypeError, ValueError, LookupError, AttributeError,
                RuntimeError) as exc:  # anything a template can cause is the template's error (cycler(): Runtime)
            file, line = self._where(exc)
            raise TemplateError(problems=[self._problem(file, line, _template_error(exc))]) from None

    def _messages(self, ctx: dict[str, Any], budget: Any) -> tuple[Message, ...]:
        """Render the whole template (one user message) or its blocks, counting the output as it comes."""
        if not self.blocks:
            return (Message("user", _collect(self.template.root_render_func(self.template.new_context(ctx, shared=True)),
                                             budget).strip()),)
        out = []
        self._renders += 1
        if self._renders == REUSE_AFTER + 1:
            pure = self._compiled.pure_blocks
            self._fixed = {b: self._compiled.block_reads.get(b, frozenset()) for b in self.blocks if b in pure}
        for block in self.blocks:
            same = self._same.get(block)
            if same is not None and self._spec_values_only(block, ctx):
                budget.output(same)
                raw = same
            else:
                budget.random = False
                raw = _collect(self.template.blocks[block](self.template.new_context(ctx, shared=True)), budget)
                if block in self._fixed and not budget.random and self._spec_values_only(block, ctx):
                    self._same[block] = raw
            text = raw.strip()
            if text:
                out.append(Message(block, text))
        return tuple(out)

    def _spec_values_only(self, block: str, ctx: Mapping[str, Any]) -> bool:
        """Whether every name ``block`` reads is, in ``ctx``, the spec's own value or a global (not the case's)."""
        start = self._start
        return all(name not in ctx or (name in start and ctx[name] is start[name]) for name in self._fixed[block])

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
        return Rendered(case_id=case_id, messages=self._run(self.context(fields, findings, swapped), case_id))

    def static_prefix(self) -> str:
        """The serialised text that every case's prompt starts with."""
        probe_fields = {name: _SENTINEL for name in self.spec.data.fields}  # (pair variables follow the fields)
        probe = [Finding(kind=_SENTINEL, message=_SENTINEL, start=0, end=0, text=_SENTINEL)]
        text = serialise(self._run(self.context(probe_fields, probe), "(static prefix probe)"))
        cut = text.find(_SENTINEL)
        return text if cut < 0 else text[:cut]


def _collect(chunks: Iterable[str], budget: Any) -> str:
    out = []
    for chunk in chunks:
        budget.output(chunk)
        out.append(chunk)
    text = "".join(out)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # (a string literal of the template such as "\ud800")
            raise ValueError(f"the prompt holds half of a character (a lone surrogate, {text[exc.start]!r}), "
                             "not text") from None
    return text


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
    return Renderer(parsed.spec, parsed.template, parsed.steps, key_problem=parsed.key_problem)
