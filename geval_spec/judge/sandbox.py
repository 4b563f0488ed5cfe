"""Jinja's sandbox with limits: a template from someone else's pull request cannot eat the machine.

Jinja's ``SandboxedEnvironment`` keeps templates away from Python internals
and ``range()`` below 100,000 items, but not ``'x' * 10**9``, ``'{:>999999999}'
.format(1)``, ``center(2000000000)``, replace chains, ``10 ** 10 ** 10`` or
loops that run for hours. This environment (the immutable sandbox: lists and
dicts cannot be changed in place) adds:

- a size check *before* every operation that can build a large value (``*``,
  ``+``, ``%``, ``**``, ``~``, ``str.format``, ``center``/``ljust``/``rjust``/
  ``zfill``, ``replace``, ``join``, ``translate``, ``expandtabs`` and the
  filters ``center``, ``indent``, ``replace``, ``join``, ``format``, ``tojson``, ``batch``,
  ``slice``, ``lipsum``), and on the result of every call and filter;
- a time limit per render, checked in those hooks (every call, macros
  included, every attribute and item lookup, every operator) and at the start
  of every loop iteration (the code generator adds the check to loop bodies);
- the output is counted as it is produced (:meth:`Budget.output`).

Going over a limit raises :class:`LimitExceeded`; :mod:`geval_spec.judge.render`
turns it into a template error naming the template, its line and the case.
The limits come from the environment: ``GEVAL_RENDER_MAX_BYTES`` (characters
of one rendered prompt and of any value built on the way, default 1,000,000)
and ``GEVAL_RENDER_TIMEOUT`` (seconds per rendered case, default 2).
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
import types
from contextlib import contextmanager
from functools import wraps
from typing import Any, Callable, Iterable, Iterator

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.idtracking import VAR_LOAD_RESOLVE
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from markupsafe import Markup

from geval_spec.errors import InputError, Problem
from geval_spec.values import frozen

MAX_BYTES = 1_000_000
TIMEOUT = 2.0
RANDOM_FILTERS = frozenset({"random"})  # filters whose result is drawn at random (Budget.random)
MAX_INT_BITS = 16_384  # Python refuses to print integers of more than 4,300 digits anyway
BYTES_VAR = "GEVAL_RENDER_MAX_BYTES"
TIMEOUT_VAR = "GEVAL_RENDER_TIMEOUT"


class LimitExceeded(Exception):
    """A template went over a render limit."""


@frozen
class Limits:
    """The bounds of one render: output size and time."""

    max_bytes: int = MAX_BYTES
    timeout: float = TIMEOUT

    @classmethod
    def from_env(cls) -> "Limits":
        return cls(max_bytes=int(_number(BYTES_VAR, MAX_BYTES)), timeout=_number(TIMEOUT_VAR, TIMEOUT))


def _number(var: str, default: float) -> float:
    raw = os.environ.get(var)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise InputError(problems=[Problem(f"{var}={raw!r} must be a positive number")])
    return value


class Budget:
    """The limits of one render and the clock it runs against."""

    def __init__(self, limits: Limits, timed: bool = True) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.timeout if timed else math.inf
        self.written = 0
        self.random = False  # set when the render drew random text (the random filter, lipsum), by any route

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise LimitExceeded(f"rendering took longer than {self.limits.timeout:g} seconds (the limit; "
                                f"set {TIMEOUT_VAR} to change it)")

    def size(self, n: int, what: str = "a value") -> None:
        if n > self.limits.max_bytes:
            raise LimitExceeded(f"{what} would be {n:,} characters, more than the limit of "
                                f"{self.limits.max_bytes:,} (set {BYTES_VAR} to change it)")

    def output(self, chunk: str) -> None:
        self.written += len(chunk)
        self.size(self.written, "the rendered prompt")


def _size(obj: Any, cap: int, depth: int = 0) -> int:
    """About how many characters ``obj`` takes as text; stops counting once past ``cap``."""
    if isinstance(obj, (str, bytes, bytearray)):
        return len(obj)
    if isinstance(obj, bool) or obj is None:
        return 5
    if isinstance(obj, int):
        return obj.bit_length() // 3 + 1
    if isinstance(obj, float):
        return 24
    items: Any
    if isinstance(obj, dict):
        items = [*obj.keys(), *obj.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = obj
    else:
        return 16
    total = len(items)
    if depth >= 4:
        return total
    for item in items:
        total += _size(item, cap, depth + 1)
        if total > cap:
            break
    return total


def _int_bits(value: Any) -> float:
    return float(abs(value).bit_length()) if isinstance(value, int) and not isinstance(value, bool) else 0.0


def _is_seq(value: Any) -> bool:
    return isinstance(value, (str, bytes, bytearray, list, tuple))


_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")


def check_percent(budget: Budget, fmt: str, args: Any) -> None:
    """``fmt % args`` would stay within the limit (every conversion counted at its widest)."""
    values = list(args.values()) if isinstance(args, dict) else list(args) if isinstance(args, tuple) else [args]
    cap = budget.limits.max_bytes
    widest = max((_size(v, cap) for v in values), default=0)
    total = len(fmt)
    for width, precision, _ in _PERCENT.findall(fmt):
        if "*" in (width, precision):
            raise LimitExceeded("'*' widths in %-formatting are not allowed in templates")
        total += max(int(width or 0), int(precision or 0)) + widest
        budget.size(total, "a %-formatted text")


def check_binop(budget: Budget, operator: str, left: Any, right: Any) -> None:
    cap = budget.limits.max_bytes
    if operator == "*":
        seq, times = (left, right) if _is_seq(left) else (right, left)
        if _is_seq(seq) and isinstance(times, int):
            budget.size(_size(seq, cap) * max(0, times), "a repeated value")
        elif _int_bits(left) + _int_bits(right) > MAX_INT_BITS:
            raise LimitExceeded(f"a product of integers would exceed the limit of {MAX_INT_BITS:,} bits")
    elif operator == "+" and _is_seq(left) and _is_seq(right):
        budget.size(_size(left, cap) + _size(right, cap), "a joined value")
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        if right * math.log2(abs(left)) > MAX_INT_BITS:
            raise LimitExceeded(f"a power of integers would exceed the limit of {MAX_INT_BITS:,} bits")
    elif operator == "%" and isinstance(left, str):
        check_percent(budget, left, right)


def _check_spec(budget: Budget, spec: str) -> None:
    for number in re.findall(r"\d+", spec):
        budget.size(int(number), "a format width")


def check_str_method(budget: Budget, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Refuse str/bytes method calls that would build more than the limit; the arguments to call with."""
    owner = getattr(obj, "__self__", None)
    if not isinstance(owner, (str, bytes, bytearray)) or not isinstance(obj, types.BuiltinMethodType):
        return args
    name = obj.__name__
    cap = budget.limits.max_bytes
    first = args[0] if args else next(iter(kwargs.values()), None)
    if name in ("center", "ljust", "rjust", "zfill") and isinstance(first, int):
        budget.size(first, f"{name}()'s result")
    elif name == "expandtabs":
        tab = first if isinstance(first, int) else 8
        tab_char: Any = "\t" if isinstance(owner, str) else b"\t"
        budget.size(len(owner) + owner.count(tab_char) * max(0, tab), "a text")
    elif name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        hits = owner.count(old) if old else len(owner) + 1
        if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
            hits = min(hits, args[2])
        budget.size(len(owner) + hits * max(0, len(new) - len(old)), "replace()'s result")
    elif name == "join" and args:
        items = list(args[0])
        budget.size(sum(_size(x, cap) for x in items) + len(owner) * max(0, len(items) - 1), "join()'s result")
        return (items, *args[1:])
    elif name == "translate" and isinstance(first, dict):
        widest = max((_size(v, cap) for v in first.values()), default=1)
        budget.size(len(owner) * max(1, widest), "translate()'s result")
    return args


class _Formatter(SandboxedFormatter):
    """str.format in the sandbox, with every field's width and precision (after nesting) checked."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        budget = self._env.budget()  # type: ignore[attr-defined]
        _check_spec(budget, format_spec)
        out = super().format_field(value, format_spec)
        budget.size(len(out), "a formatted field")
        return out


class _CodeGenerator(CodeGenerator):
    """Jinja's code generator, with ``~`` (concatenation) going through the environment's checked join and a
    look at the clock at the start of every loop iteration (calls, macros included, look at it in the hooks)."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if self.optimizer is not None and not frame.eval_ctx.volatile:
            folded = self.optimizer.visit(node, frame.eval_ctx)
            if folded != node:
                self.visit(folded, frame)
                return
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timed: set[int] = set()  # the ids of the loop bodies being written

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        body = list(node.body)  # a list of our own: blockvisit knows it by its identity
        self._timed.add(id(body))
        try:
            super().visit_For(nodes.For(node.target, node.iter, body, node.else_, node.test, node.recursive,
                                        lineno=node.lineno, environment=self.environment), frame)
        finally:
            self._timed.discard(id(body))

    def blockvisit(self, body: Iterable[nodes.Node], frame: Frame) -> None:
        if id(body) in self._timed:
            self.writeline("environment.tick()")
        super().blockvisit(body, frame)

    def enter_frame(self, frame: Frame) -> None:
        """Note the names the template reads from its context, as jinja2.meta.find_undeclared_variables does,
        while the code is written (instead of a second pass over the tree)."""
        super().enter_frame(frame)
        env: Any = self.environment
        for action, param in frame.symbols.loads.values():
            if action == VAR_LOAD_RESOLVE:
                if frame.block is not None:  # a block's own function: what it reads, globals included
                    env.block_reads.setdefault(frame.block, set()).add(param)
                if param not in env.globals:
                    env.undeclared.add(param)


class LimitedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every operation that can build a large value checked first."""

    intercepted_binops = frozenset({"*", "+", "%", "**"})
    code_generator_class = _CodeGenerator

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._local = threading.local()
        self.undeclared: set[str] = set()  # filled by the code generator: see compile_tree
        self.block_reads: dict[str, set[str]] = {}  # block -> the names it reads from its context (the same)
        self._idle = Budget(Limits.from_env(), timed=False)  # compile-time constant folding: sizes only
        for name, func in list(self.filters.items()):
            self.filters[name] = _limited_filter(self, name, func)
        lorem: Any = self.globals["lipsum"]
        self.globals["lipsum"] = _limited_lipsum(self, lorem)

    def compile_tree(self, tree: nodes.Template, name: str) -> tuple[types.CodeType, frozenset[str]]:
        """The code of a parsed template, and the names it reads from its context (its undeclared variables)."""
        self.undeclared, self.block_reads = set(), {}
        code = self.compile(tree, name=name, filename=name)
        return code, frozenset(self.undeclared)

    def budget(self) -> Budget:
        current: Budget | None = getattr(self._local, "budget", None)
        return current if current is not None else self._idle

    @contextmanager
    def limited(self, budget: Budget) -> Iterator[Budget]:
        """Render under ``budget``: the hooks and every loop iteration check it."""
        previous = getattr(self._local, "budget", None)
        self._local.budget = budget
        try:
            yield budget
        finally:
            self._local.budget = previous

    def tick(self) -> None:
        self.budget().tick()

    def checked_concat(self, values: tuple[Any, ...]) -> str:
        budget = self.budget()
        budget.tick()
        cap = budget.limits.max_bytes
        total = 0
        for v in values:
            total += len(v) if isinstance(v, str) else _size(v, cap)
            budget.size(total, "a concatenated text")
        return "".join(v if isinstance(v, str) else str(v) for v in values)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = self.budget()
        budget.tick()
        check_binop(budget, operator, left, right)
        return _checked_result(budget, self.binop_table[operator](left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's names)
        budget = __self.budget()
        budget.tick()
        args = check_str_method(budget, __obj, args, kwargs)
        return _checked_result(budget, super().call(__context, __obj, *args, **kwargs))

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.budget().tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.budget().tick()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)) or \
                value.__name__ not in ("format", "format_map") or not isinstance(value.__self__, str):
            return None
        if isinstance(value.__self__, Markup):  # not made by these templates (autoescape is off); keep Jinja's
            return super().wrap_str_format(value)
        text: str = value.__self__
        vformat = _Formatter(self).vformat

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if value.__name__ == "format_map":
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            return vformat(text, args, kwargs)

        return wrapper


def _checked_result(budget: Budget, result: Any) -> Any:
    if isinstance(result, (str, bytes, bytearray, list, tuple, dict, set, frozenset)):
        budget.size(_size(result, budget.limits.max_bytes), "a value")
    return result


def _limited_filter(env: LimitedSandbox, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0  # context, eval context or environment come first

    drawn = name in RANDOM_FILTERS

    @wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        budget = env.budget()
        budget.tick()
        _check_filter(budget, name, args[skip:], kwargs)
        if drawn:
            budget.random = True
        return _checked_result(budget, func(*args, **kwargs))

    return run


def _check_filter(budget: Budget, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse filter calls whose arguments would build more than the limit."""
    if not args:
        return
    value, rest = args[0], args[1:]
    cap = budget.limits.max_bytes

    def arg(i: int, key: str, default: Any) -> Any:
        return rest[i] if len(rest) > i else kwargs.get(key, default)

    if name == "center":
        width = arg(0, "width", 80)
        if isinstance(width, int):
            budget.size(width + _size(value, cap), "center's result")
    elif name == "indent":
        width = arg(0, "width", 4)
        per_line = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        text = str(value) if isinstance(value, str) else ""
        budget.size(len(text) + (text.count("\n") + 1) * max(0, per_line), "indent's result")
    elif name == "replace" and isinstance(value, str):
        check_str_method(budget, value.replace, tuple(rest[:3]), {})
    elif name == "join" and not isinstance(value, (str, dict)):
        budget.size(_size(value, cap) + len(str(arg(0, "d", ""))) * max(0, _len(value) - 1), "join's result")
    elif name == "format" and isinstance(value, str):
        check_percent(budget, value, kwargs or tuple(rest))
    elif name in ("batch", "slice"):
        count = arg(0, "linecount" if name == "batch" else "slices", 1)
        if isinstance(count, int):
            budget.size(count, f"{name}'s result")
    elif name == "tojson":  # every value on a line of its own, indented once per level: indent=10**9 took 12 GB
        indent = arg(0, "indent", None)
        step = len(indent) if isinstance(indent, str) else indent if type(indent) is int else 0
        if step > 0:
            nodes, depth = _shape(value, cap)
            budget.size(_size(value, cap) + nodes * (depth * step + 1), "tojson's result")


def _shape(value: Any, cap: int) -> tuple[int, int]:
    """How many values (keys too) a JSON-like value holds and how deep it nests; counting stops past ``cap``."""
    nodes, deepest, stack = 0, 0, [(value, 1)]
    while stack and nodes <= cap:
        item, depth = stack.pop()
        nodes += 1
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((k, depth + 1) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
    return nodes, deepest


def _len(value: Any) -> int:
    try:
        return len(value)
    except TypeError:
        return 0


def _limited_lipsum(env: LimitedSandbox, func: Callable[..., str]) -> Callable[..., str]:
    @wraps(func)
    def lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002 (Jinja's names)
        budget = env.budget()
        budget.random = True
        if isinstance(n, int) and isinstance(max, int):
            budget.size(n * max * 12, "lipsum's text")
        return func(n, html, min, max)

    return lipsum
