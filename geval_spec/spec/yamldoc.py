"""YAML text -> plain Python values with the line and column of every key (the "unparsed" spec).

We build values from ruamel.yaml's parse *events* ourselves instead of letting a
constructor do it. That gives us three things a constructor does not: the
position of every key and value (so every later error can point at a line), a
hard refusal of every explicit YAML tag (``!!python/object`` and friends never
reach a constructor), and YAML 1.2 core-schema scalars with no surprises
(``no`` is a string, ``1_000`` is a string).

Anything the parser raises, including its own internal failures on hostile
input, leaves this module as :class:`~geval_spec.errors.SpecError`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Iterator

from geval_spec.errors import Problem, Severity, SpecError
from geval_spec.values import frozen

Path = tuple[Any, ...]

MAX_BYTES = 5_000_000
MAX_NODES = 200_000  # after alias expansion: stops "billion laughs"
MAX_DEPTH = 100  # nested lists and mappings; a spec needs a handful
_FLOW = re.compile(r"""[\[\]{}]|'(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|#[^\n]*""")


@frozen
class Mark:
    """Where a key or value sits in a YAML file (1-based line and column)."""

    line: int  # 1-based
    col: int  # 1-based


@frozen
class YamlDocument:
    """A parsed YAML file: its values, its text, and where every key sits."""

    file: str
    text: str
    data: Any
    key_marks: dict[Path, Mark]
    value_marks: dict[Path, Mark]

    def mark(self, path: Path, prefer_key: bool = False) -> Mark | None:
        """Where ``path`` is, or the nearest enclosing key that exists."""
        path = tuple(path)
        while True:
            first, second = (self.key_marks, self.value_marks) if prefer_key else (self.value_marks, self.key_marks)
            if path in first:
                return first[path]
            if path in second:
                return second[path]
            if not path:
                return None
            path = path[:-1]

    def problem(self, path: Path, message: str, *, hint: str | None = None, prefer_key: bool = False,
                severity: Severity = "error") -> Problem:
        m = self.mark(path, prefer_key=prefer_key) or Mark(1, 1)
        return Problem(
            message=message,
            file=self.file,
            line=m.line,
            col=m.col,
            key=format_path(path) or None,
            hint=hint,
            severity=severity,
            source=self.text,
        )


def format_path(path: Path) -> str:
    return ".".join(str(p) for p in path)


# YAML 1.2 core schema, plain scalars only.
_NULL = {"", "~", "null", "Null", "NULL"}
_TRUE = {"true", "True", "TRUE"}
_FALSE = {"false", "False", "FALSE"}
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(inf|Inf|INF)$")
_NAN = re.compile(r"^\.(nan|NaN|NAN)$")


def _plain_scalar(value: str) -> Any:
    if value in _NULL:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if _INT10.match(value):
        return int(value)
    if _INT8.match(value):
        return int(value[2:], 8)
    if _INT16.match(value):
        return int(value[2:], 16)
    if _FLOAT.match(value):
        return float(value)
    if _INF.match(value):
        return -math.inf if value.startswith("-") else math.inf
    if _NAN.match(value):
        return math.nan
    return value


def _mark(ev: Any) -> Mark:
    return Mark(ev.start_mark.line + 1, ev.start_mark.column + 1)


class _Builder:
    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.key_marks: dict[Path, Mark] = {}
        self.value_marks: dict[Path, Mark] = {}
        self.anchors: dict[str, tuple[Any, Path]] = {}
        self.nodes = 0

    def scalar(self, ev: Any, path: Path) -> Any:
        if ev.style or not ev.implicit[0]:
            return ev.value
        try:
            return _plain_scalar(ev.value)
        except ValueError:  # Python reads at most 4,300 decimal digits into an int
            raise self.fail(f"a number of {len(ev.value):,} characters is too long to be a value", _mark(ev),
                            path) from None

    def fail(self, message: str, mark: Mark | None, path: Path = (), hint: str | None = None) -> SpecError:
        return SpecError(problems=[Problem(message=message, file=self.file, line=mark.line if mark else None,
                                           col=mark.col if mark else None, key=format_path(path) or None,
                                           hint=hint, source=self.text)])

    def count(self, n: int = 1, mark: Mark | None = None) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            raise self.fail(f"the document expands to more than {MAX_NODES} values (aliases?)", mark)

    def check_tag(self, ev: Any, path: Path) -> None:
        tag = getattr(ev, "tag", None)
        if tag not in (None, "!"):
            shown = "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag
            raise self.fail(f"YAML tags are not allowed (found {shown!r})", _mark(ev), path,
                            hint="specs are plain data; remove the tag")

    def build(self, events: Iterable[Any]) -> Any:
        it = iter(events)
        docs: list[Any] = []
        for ev in it:
            name = type(ev).__name__
            if name == "DocumentStartEvent":
                if docs:
                    raise self.fail("a spec file holds exactly one YAML document; found a second '---'", _mark(ev))
                docs.append(self.node(it, next(it), (), 0))
            elif name in ("StreamStartEvent", "DocumentEndEvent", "StreamEndEvent"):
                continue
        return docs[0] if docs else None

    def node(self, it: Iterator[Any], ev: Any, path: Path, depth: int) -> Any:
        name = type(ev).__name__
        self.value_marks[path] = _mark(ev)
        self.count(mark=_mark(ev))
        if depth > MAX_DEPTH:
            raise self.fail(f"values nested more than {MAX_DEPTH} levels deep", _mark(ev), path[:3])
        if name == "AliasEvent":
            if ev.anchor not in self.anchors:
                raise self.fail(f"unknown alias *{ev.anchor}", _mark(ev), path)
            value, src = self.anchors[ev.anchor]
            self._copy_marks(src, path, _mark(ev))
            return value
        self.check_tag(ev, path)
        if name == "ScalarEvent":
            value = self.scalar(ev, path)
        elif name == "SequenceStartEvent":
            value = []
            for ev2 in it:
                if type(ev2).__name__ == "SequenceEndEvent":
                    break
                value.append(self.node(it, ev2, path + (len(value),), depth + 1))
        elif name == "MappingStartEvent":
            value = {}
            for ev2 in it:
                if type(ev2).__name__ == "MappingEndEvent":
                    break
                kmark = _mark(ev2)
                if type(ev2).__name__ != "ScalarEvent":
                    raise self.fail("keys must be plain scalars, not lists or mappings", kmark, path)
                self.check_tag(ev2, path)
                key = self.scalar(ev2, path)
                if key == "<<" and not ev2.style:
                    raise self.fail("YAML merge keys ('<<') are not supported", kmark, path,
                                    hint="write the keys out in full")
                if key is None or isinstance(key, float):
                    raise self.fail(f"key {ev2.value!r} is not a name or an integer", kmark, path)
                if isinstance(key, bool):
                    key = ev2.value  # `yes:`/`true:` as a key is meant as text
                if key in value:
                    first = self.key_marks.get(path + (key,))
                    at = f" (first at line {first.line})" if first else ""
                    raise self.fail(f"duplicate key {key!r}{at}", kmark, path + (key,))
                self.key_marks[path + (key,)] = kmark
                value[key] = self.node(it, next(it), path + (key,), depth + 1)
        else:  # pragma: no cover - the parser emits nothing else here
            raise self.fail(f"unexpected YAML event {name}", _mark(ev), path)
        anchor = getattr(ev, "anchor", None)
        if anchor:
            self.anchors[anchor] = (value, path)
        return value

    def _copy_marks(self, src: Path, dst: Path, at: Mark) -> None:
        n = len(src)
        for table in (self.key_marks, self.value_marks):
            for p in [p for p in table if p[:n] == src and len(p) > n]:
                table[dst + p[n:]] = at
                self.count(mark=at)


_NO_FAST_PARSE = object()


def _build_fast(builder: _Builder, text: str) -> Any:
    """The document ``builder`` builds from libyaml's parse events (ruamel.yaml.clib), or _NO_FAST_PARSE.

    libyaml parses a spec about 30x faster than ruamel's pure-Python parser
    (BENCHMARKS.md, validate). Its events are the same classes with the same
    marks, so the builder and every check are shared. libyaml reads YAML 1.1
    and ruamel YAML 1.2, and the two disagree at the edges: the position of an
    empty value, anchor names, tags, block scalars (empty, at the top, or with
    a line of spaces in them), ``...`` markers, a colon glued to a quote or a
    bracket, control characters. Texts and events of those kinds go to the
    pure parser. So does every text libyaml refuses anywhere (all its events
    are read before anything is built), every text whose building raises a
    problem (the pure parser words it, or finds that there is none), every
    text over FAST_MAX_CHARS, and every text when the extension is not
    installed. What is left gives the same events and marks from both
    parsers: tests/test_yaml_loader.py compares them on the test corpora, on
    the edges found so far and on generated texts.
    """
    if len(text) > FAST_MAX_CHARS or _FAST_UNSURE.search(text):
        return _NO_FAST_PARSE
    try:
        from _ruamel_yaml import CParser
    except ImportError:
        return _NO_FAST_PARSE
    parser = CParser(text)
    events = []
    while True:
        try:
            ev = parser.get_event()
        except Exception:  # anything libyaml refuses: the pure parser says why
            return _NO_FAST_PARSE
        name = type(ev).__name__
        if name == "AliasEvent" or getattr(ev, "anchor", None) or getattr(ev, "tag", None) or \
                (name == "ScalarEvent" and ev.value == ""):
            return _NO_FAST_PARSE
        events.append(ev)
        if name == "StreamEndEvent":
            break
    try:
        return builder.build(events)
    except SpecError:  # the pure parser decides, in its own words
        return _NO_FAST_PARSE


FAST_MAX_CHARS = 128_000  # larger texts go to the pure parser (the events are held before building; specs are a few KB)
# text the fast parser leaves to the pure one: control and separator characters, directives, block scalar
# headers with a comment glued on or at the top level, lines of spaces only, document end markers, a colon
# glued to a closing bracket or quote
_FAST_UNSURE = re.compile(r"[\t\r\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff]|^%|[|>][-+0-9]*#"
                          r"|^\.\.\.|^[ ]+$|^(?:--- *)?[|>]|[\]}'\"]:\S", re.MULTILINE)


def _flow_depth_line(text: str) -> int | None:
    """The line where ``[`` and ``{`` nest deeper than MAX_DEPTH (quoted text and comments skipped), or None."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    depth = 0
    for m in _FLOW.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return text.count("\n", 0, m.start()) + 1
        elif c in "]}":
            depth = max(0, depth - 1)
    return None


def load_yaml(text: str, file: str) -> YamlDocument:
    """Parse ``text`` (the contents of ``file``) into a :class:`YamlDocument`.

    Raises :class:`SpecError` and nothing else.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise SpecError(problems=[Problem(f"file is larger than {MAX_BYTES // 1_000_000} MB", file=file)])
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    builder = _Builder(file, text)
    too_deep = _flow_depth_line(text)
    if too_deep is not None:  # before the parser, whose look-ahead takes seconds on thousands of open brackets
        raise builder.fail(f"values nested more than {MAX_DEPTH} levels deep", Mark(too_deep, 1))
    try:
        data = _build_fast(builder, text)
        if data is _NO_FAST_PARSE:
            builder = _Builder(file, text)
            data = builder.build(YAML(typ="safe", pure=True).parse(text))
    except SpecError:
        raise
    except MarkedYAMLError as exc:
        m = exc.problem_mark or exc.context_mark
        mark = Mark(m.line + 1, m.column + 1) if m is not None else None
        what = " ".join(x for x in (exc.context, exc.problem) if x) or "invalid YAML"
        raise builder.fail(f"YAML syntax error: {what}", mark) from None
    except (YAMLError, RecursionError, ValueError, IndexError, KeyError, TypeError, AttributeError) as exc:
        mark = None
        m = getattr(exc, "problem_mark", None) or getattr(exc, "mark", None)
        if m is not None and hasattr(m, "line"):
            mark = Mark(m.line + 1, getattr(m, "column", 0) + 1)
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if mark is None and "\x00" in text:  # the reader names no place for a NUL byte
            at = text.index("\x00")
            mark = Mark(text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at))
        raise builder.fail(f"cannot read YAML: {reason}", mark) from None
    return YamlDocument(file=file, text=text, data=data, key_marks=builder.key_marks,
                        value_marks=builder.value_marks)
