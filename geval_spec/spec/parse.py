"""Plain YAML values -> a typed :class:`~geval_spec.spec.sections.Spec` (the "parsed" spec).

Pydantic does the type checking; this module turns each of its errors into a
:class:`~geval_spec.errors.Problem` that names the file, line, column and key,
says what was expected in plain words, and suggests the closest known key for
an unknown one. All problems of a file are reported together.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, JsonValue, ValidationError

from geval_spec.errors import Problem, SpecError
from geval_spec.spec.sections import IDENTIFIER, MODEL_STRING, NOT_BLANK, Spec
from geval_spec.spec.yamldoc import Path, YamlDocument


def _unwrap(ann: Any) -> Any:
    """Strip Annotated[...] and Optional[...] down to the interesting type."""
    while True:
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            ann = typing.get_args(ann)[0]
            continue
        if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            if len(args) == 1:
                ann = args[0]
                continue
        return ann


def _tagged_members(ann: Any) -> dict[str, Any]:
    """For a tagged union (Annotated[Union[Annotated[X, Tag(t)], ...], Discriminator]), map tag -> X."""
    members: dict[str, Any] = {}
    if typing.get_origin(ann) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:  # Optional[...] around the tagged union (an optional section such as split)
            ann = args[0]
    if typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    if typing.get_origin(ann) is not typing.Union:
        return members
    for arg in typing.get_args(ann):
        if typing.get_origin(arg) is typing.Annotated:
            inner, *meta = typing.get_args(arg)
            for m in meta:
                tag = getattr(m, "tag", None)
                if isinstance(tag, str):
                    members[tag] = inner
    return members


def _walk(loc: tuple[Any, ...]) -> tuple[Path, Any, bool]:
    """Follow a pydantic error location through the Spec model.

    Returns the location as a path into the YAML document (union tags and
    member names removed), the type found at the parent of the last element,
    and whether the error is about a mapping key rather than its value.
    """
    ann: Any = Spec
    clean: list[Any] = []
    parent: Any = None
    is_key = False
    tag_next = True  # inside a JsonValue, pydantic names the member (dict, list, float, ...) before each key
    for el in loc:
        if el == "[key]":  # (before JsonValue's alternation: a mapping's key, e.g. one of judge.params)
            is_key = True
            continue
        if ann is JsonValue:
            if not tag_next:  # a key of a mapping or an index of a list
                clean.append(el)
            tag_next = not tag_next
            continue
        tagged = _tagged_members(ann)
        if tagged and el in tagged:
            ann = tagged[el]
            continue
        ann = _unwrap(ann)
        if el == "[key]":
            is_key = True
            continue
        origin = typing.get_origin(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            parent = ann
            clean.append(el)
            field = ann.model_fields.get(el) if isinstance(el, str) else None
            ann = field.annotation if field is not None else None
            if field is not None and field.metadata:
                for m in field.metadata:
                    if type(m).__name__ == "Discriminator":
                        ann = typing.Annotated[ann, m]
        elif origin in (list, tuple):
            parent = ann
            clean.append(el)
            args = typing.get_args(ann)
            ann = args[0] if args else None
        elif origin is dict:
            parent = ann
            clean.append(el)
            ann = typing.get_args(ann)[1]
        elif origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            # smart-mode union: pydantic adds the member's name; skip it
            continue
        else:
            clean.append(el)
            parent = ann
            ann = None
    return tuple(clean), parent, is_key


_TYPE_WORDS = {
    "string_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping of keys to values",
    "model_type": "a mapping of keys to values",
    "model_attributes_type": "a mapping of keys to values",
}


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _message(err: dict[str, Any], parent: Any, path: Path) -> tuple[str, str | None]:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = err.get("input")
    if kind == "extra_forbidden":
        key = path[-1] if path else "?"
        hint = None
        if isinstance(parent, type) and issubclass(parent, BaseModel):
            known = list(parent.model_fields)
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            if close:
                hint = f"did you mean '{close[0]}'?"
            else:
                hint = "known keys here: " + ", ".join(known)
        return f"unknown key '{key}'", hint
    if kind == "missing":
        return f"missing required key '{path[-1]}'", None
    if kind in _TYPE_WORDS:
        hint = None
        if kind.startswith("bool") and isinstance(got, str):
            hint = "geval-spec reads YAML 1.2: yes, no, on, off and quoted values are text; write true or false"
        return f"expected {_TYPE_WORDS[kind]}, got {_show(got)}", hint
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected')}, got {_show(got)}", None
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        return f"must be {op} {bound}, got {_show(got)}", None
    if kind == "string_pattern_mismatch":
        if ctx.get("pattern") == IDENTIFIER:
            what = "an empty name" if got == "" else _show(got)
            return (f"{what} is not a template variable name: use an identifier (letters, digits and _, "
                    "not starting with a digit)", "templates refer to it as {{ name }}, so it must be a plain "
                    "identifier; the column it maps to may be named anything")
        if ctx.get("pattern") == NOT_BLANK:
            return "must not be blank", None
        if ctx.get("pattern") == MODEL_STRING:
            return (f"{_show(got)} is not a model string: write provider/model without spaces, e.g. "
                    "openai/gpt-4.1-mini"), None
        return f"{_show(got)} does not match the pattern {ctx.get('pattern')}", None
    if kind == "string_too_short":
        return "must not be empty", None
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s)", None
    if kind == "too_long":
        return f"allows at most {ctx.get('max_length')} item(s)", None
    if kind == "union_tag_invalid":
        return f"unexpected shape {_show(got)}", None
    msg = err.get("msg", kind)
    return msg[0].lower() + msg[1:], None


def validation_problems(exc: ValidationError, doc: YamlDocument) -> list[Problem]:
    problems: dict[Path, list[Problem]] = {}
    errors = [(err, *_walk(tuple(err["loc"]))) for err in exc.errors(include_url=False)]
    # A misspelt key shows up twice: as unknown, and as the missing key it was meant to be.
    unknown = {(path[:-1], str(path[-1])) for err, path, _, _ in errors if err["type"] == "extra_forbidden" and path}
    meant: set[Path] = set()
    for err, path, _, _ in errors:
        if err["type"] == "missing" and path:
            typos = [k for parent, k in unknown if parent == path[:-1]]
            if difflib.get_close_matches(str(path[-1]), typos, n=1, cutoff=0.6):
                meant.add(path)
    for err, path, parent, is_key in errors:
        if err["type"] == "missing" and path in meant:
            continue
        message, hint = _message(dict(err), parent, path)
        if is_key:
            message = f"key {path[-1]!r}: {message}"
        prefer_key = err["type"] in ("extra_forbidden",) or is_key
        target = path[:-1] if err["type"] == "missing" else path
        problems.setdefault(path, []).append(doc.problem(target, message, hint=hint, prefer_key=prefer_key))
    out: list[Problem] = []
    for path, found in problems.items():
        if len(found) == 1:
            out.append(found[0])
        else:  # one value failed every member of a union: say so once
            expected = "; or ".join(dict.fromkeys(p.message.split(", got")[0] for p in found))
            first = found[0]
            out.append(Problem(message=f"{expected}", file=first.file, line=first.line, col=first.col,
                               key=first.key, hint=first.hint, source=first.source))
    out.sort(key=lambda p: (p.line or 0, p.col or 0))
    return out


def parse_spec(doc: YamlDocument) -> Spec:
    """Validate the document's values as a :class:`Spec` or raise :class:`SpecError`."""
    if not isinstance(doc.data, dict):
        what = "empty" if doc.data is None else f"a {type(doc.data).__name__}"
        raise SpecError(problems=[doc.problem((), f"a spec is a mapping of keys to values; this file is {what}")])
    try:
        return Spec.model_validate(doc.data)
    except ValidationError as exc:
        raise SpecError(problems=validation_problems(exc, doc)) from None
