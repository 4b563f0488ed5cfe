"""Secrets out of every text geval-spec keeps or prints: API keys, tokens, credentials in URLs.

A judge that refuses a key often echoes it ("Incorrect API key provided:
Bearer sk-..."), a server error body may quote the request's headers, and a
judge's own answer may repeat them. The clients pass every error message and
every response body through :func:`redact` / :func:`redact_json` before anything
else sees them, so no secret reaches the store, the journal, a cassette, a
report or the terminal; error messages and file excerpts are redacted again
when they are made (:mod:`geval_spec.errors`).

What is replaced by ``[redacted]``:

- the value of every environment variable that holds a credential: names
  ending in ``_API_KEY``, ``_APIKEY``, ``_TOKEN``, ``_SECRET``, ``_SECRET_KEY``,
  ``_ACCESS_KEY``, ``_PASSWORD`` or ``_CREDENTIALS`` (``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``,
  ``GITHUB_TOKEN``, ...), wherever it appears, when it is at least 8
  characters long;
- what follows ``Bearer``, ``Authorization``, ``api-key``, ``x-api-key`` and
  ``x-goog-api-key`` (header echoes);
- things shaped like provider keys (``sk-...``, ``sk-ant-...``, ``AIza...``,
  ``hf_...``, ``gsk_...``, ``xai-...``) and GitHub tokens (``ghp_...``,
  ``ghs_...``, ``gho_...``, ``ghu_...``, ``ghr_...``, ``github_pat_...``) even
  when no variable holds them;
- the user information of URLs (``https://user:key@host``) and the values of
  query parameters named like credentials (``?api_key=...``, ``&token=...``).

This module imports nothing of geval-spec: every layer may use it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any, Iterable
from urllib.parse import parse_qsl, urlsplit

MASK = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter values would mask ordinary words and numbers

SECRET_SUFFIXES = ("_API_KEY", "_APIKEY", "_TOKEN", "_SECRET", "_SECRET_KEY", "_ACCESS_KEY", "_PASSWORD",
                   "_CREDENTIALS")
SECRET_NAMES = frozenset({"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY",
                          "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN", "VERTEXAI_CREDENTIALS"})
# query parameters and header names whose values are credentials
SECRET_PARAMS = frozenset({"api_key", "apikey", "api-key", "key", "token", "access_token", "auth", "password",
                           "passwd", "secret", "client_secret", "sig", "signature", "x-api-key", "code"})

_HEADER = re.compile(
    r"(?i)(\b(?:authorization|x-api-key|x-goog-api-key|api[-_]key|apikey)\b['\"]?\s*[:=]\s*['\"]?"
    r"(?:bearer\s+|basic\s+)?)([^\s'\",;&)}\]]+)")
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9_~+/=-][A-Za-z0-9._~+/=-]{6,}[A-Za-z0-9_~+/=-])")
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|hf_[A-Za-z0-9]{20,}|gsk_[A-Za-z0-9]{20,}"
    r"|xai-[A-Za-z0-9]{20,}|r8_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s@'\"]+)@")  # group 2: user[:password]
_QUERY_SECRET = re.compile(r"(?i)([?&;](?:" + "|".join(re.escape(p) for p in sorted(SECRET_PARAMS)) + r")=)"
                           r"([^&#\s'\"]+)")


@lru_cache(maxsize=1024)
def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return upper in SECRET_NAMES or upper.endswith(SECRET_SUFFIXES)


def secret_values(environ: Iterable[tuple[str, str]] | None = None) -> tuple[str, ...]:
    """The values of the credential variables of the environment, longest first."""
    if environ is None:
        env = os.environ
        keys = getattr(env, "_data", None)  # CPython's encoded names: their tuple is cheap to make and compare
        names = _secret_names(tuple(keys)) if isinstance(keys, dict) else tuple(k for k in env if is_secret_name(k))
        raw = tuple(v for v in map(env.get, names) if v is not None)
    else:
        raw = tuple(v for k, v in environ if is_secret_name(k))
    return _longest_first(raw)


@lru_cache(maxsize=8)
def _secret_names(keys: tuple[bytes | str, ...]) -> tuple[str, ...]:
    """The credential variables among the environment's names (as os.environ keeps them), asked once per set of
    names instead of decoding every name for every response."""
    names = (os.fsdecode(k) for k in keys)
    return tuple(n for n in names if is_secret_name(n))


# a provider key's public prefix: what follows it is the secret, and a server may echo that alone (only the known
# prefixes: any word and a dash made "credentials.json" of my-gcp-project-credentials.json a secret everywhere)
_PUBLIC_PREFIX = re.compile(r"^(?:sk-(?:proj-|ant-(?:api\d+-|admin\d+-)?|svcacct-|admin-)?|gsk_|xai-|hf_|r8_|"
                            r"gh[pousr]_|github_pat_|AIza)(?=.{16,}$)", re.DOTALL)


@lru_cache(maxsize=8)
def _longest_first(raw: tuple[str, ...]) -> tuple[str, ...]:
    found = set()
    for value in raw:
        value = value.strip()
        if len(value) >= MIN_SECRET_LENGTH:
            found.add(value)
            if (prefix := _PUBLIC_PREFIX.match(value)) is not None:
                found.add(value[prefix.end():])
    return tuple(sorted(found, key=lambda v: (-len(v), v)))


@lru_cache(maxsize=8)
def _values_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in values))


_SHAPES = (_HEADER, _BEARER, _URL_USERINFO, _QUERY_SECRET, _KEY_SHAPES)


def _scoped(rx: re.Pattern[str]) -> str:
    """A pattern as one alternative of a larger one: a leading ``(?i)`` becomes a group of its own."""
    return f"(?i:{rx.pattern[4:]})" if rx.pattern.startswith("(?i)") else f"(?:{rx.pattern})"


@lru_cache(maxsize=8)
def _screen(values: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern that matches somewhere in a text exactly when one of the secret patterns does.

    Most texts hold no secret; one search with the alternation of every
    pattern answers that in one pass instead of six (BENCHMARKS.md, scale).
    """
    parts = [_scoped(rx) for rx in _SHAPES]
    pattern = _values_pattern(values)
    if pattern is not None:
        parts.append(f"(?:{pattern.pattern})")
    return re.compile("|".join(parts))


# Substrings every match of a secret pattern contains: in any case for the patterns that ignore case, as written
# for the key shapes. A text holding none of them and no secret value holds no secret; `in` answers that for a
# long text several times faster than the patterns' search (about 180 ns a character; BENCHMARKS.md, scale).
_NEEDLES_API = ("api-key", "api_key", "apikey")  # _HEADER, with "authorization"; each holds "api"
_NEEDLES_PARAMS = tuple(sorted({f"{p}=" for p in SECRET_PARAMS}))  # _QUERY_SECRET; each holds "="
_NEEDLES_ANY_CASE = ("authorization", *_NEEDLES_API, "bearer", *_NEEDLES_PARAMS)  # asked two or three at a time
_NEEDLES = ("://",  # _URL_USERINFO
            "sk-", "AIza", "hf_", "gsk_", "xai-", "r8_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
            "github_pat_")  # _KEY_SHAPES
# The characters beyond ASCII that a pattern ignoring case takes for an ASCII letter (a test finds them all).
_ASCII_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_FOLDING = re.compile("[\u0130\u0131\u017f\u212a]")
_NEEDLES_FROM = 24  # characters from which the substrings are asked first


def may_hold_secret(text: str, values: tuple[str, ...]) -> bool:
    """False only when ``text`` holds no secret: it lacks every substring that a match of a pattern needs."""
    if any(n in text for n in _NEEDLES) or any(v in text for v in values):
        return True
    if not text.isascii() and _FOLDING.search(text) is not None:
        text = text.translate(_ASCII_FOLDS)
    lower = text.lower()
    if "authorization" in lower or "bearer" in lower:
        return True
    if "api" in lower and any(n in lower for n in _NEEDLES_API):
        return True
    return "=" in lower and any(n in lower for n in _NEEDLES_PARAMS)


def secret_spans(text: str, values: tuple[str, ...] | None = None) -> list[tuple[int, int]]:
    """Where ``text`` holds secrets: sorted, merged (start, end) spans."""
    if not text:
        return []
    vals = secret_values() if values is None else values
    if len(text) >= _NEEDLES_FROM and not may_hold_secret(text, vals):
        return []
    if _screen(vals).search(text) is None:
        return []
    spans: list[tuple[int, int]] = []
    pattern = _values_pattern(vals)
    if pattern is not None:
        spans += [m.span() for m in pattern.finditer(text)]
    for rx in (_HEADER, _BEARER, _URL_USERINFO, _QUERY_SECRET):
        spans += [m.span(2) for m in rx.finditer(text)]
    spans += [m.span() for m in _KEY_SHAPES.finditer(text)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def mask(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by ``[redacted]``."""
    out = []
    pos = 0
    for start, end in spans:
        out.append(text[pos:start])
        out.append(MASK)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact(text: str, values: tuple[str, ...] | None = None) -> str:
    """``text`` with every secret replaced by ``[redacted]`` (and every lone surrogate by U+FFFD: see below)."""
    spans = secret_spans(text, values)
    out = mask(text, spans) if spans else text
    return out if out.isascii() or not _LONE.search(out) else _LONE.sub("\ufffd", out)


# An escape from \ud800 to \udfff standing alone decodes (json.loads) to half of a UTF-16 pair, a lone
# surrogate: not text, so it cannot be printed, hashed, sent or stored as UTF-8. Input files that hold one are
# refused at their line; what a judge answers is kept with U+FFFD in its place.
_LONE = re.compile("[\ud800-\udfff]")
SURROGATE = "holds an escape from \\ud800 to \\udfff that is half of a character (a lone surrogate), not text"


# Control characters (a terminal's escape sequences, carriage returns, C1 codes) and the marks that reorder text on
# screen: case text must not reach a terminal, a CI log or a report as them (reports and the CLI write them out).
UNSEEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def unseen_escaped(text: str) -> str:
    """``text`` with the characters of :data:`UNSEEN` written as ``\\u001b``-style escapes (in JSON text, the same
    string)."""
    return UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def lone_surrogate(text: str | None, value: Any) -> bool:
    """Whether ``value`` (decoded from the JSON ``text``; None: not known) holds a string or key with a lone
    surrogate. With ``text``, only a text that has a ``\\ud`` escape is looked through."""
    if text is not None and ("\\u" not in text or ("\\ud" not in text and "\\uD" not in text)):
        return False  # (most bodies have no \u escape at all: one search of the text then)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _LONE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def scrub_surrogates(value: Any) -> Any:
    """A copy of a JSON value with every lone surrogate in its strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_surrogates(v) for v in value]
    return value


def redact_json(value: Any, values: tuple[str, ...] | None = None) -> Any:
    """A JSON value with every string (keys included) redacted: the value itself when nothing is masked."""
    vals = secret_values() if values is None else values
    return _walk(value, vals)


def _walk(value: Any, values: tuple[str, ...]) -> Any:
    """``value`` redacted: the same object when nothing in it is masked, else a copy (the input is not changed)."""
    if isinstance(value, str):
        return redact(value, values)
    if isinstance(value, dict):
        return kept_dict(value, [(_walk(k, values) if isinstance(k, str) else k, _walk(v, values))
                                 for k, v in value.items()])
    if isinstance(value, list):
        return kept_list(value, [_walk(v, values) for v in value])
    return value


def kept_dict(original: dict[Any, Any], pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """``original`` itself when ``pairs`` (its items, redacted) are its own keys and values, else a new dict of
    them: nothing is copied for a value without a secret. (An unmasked item is the same object, which the list
    comparison takes as equal without looking inside it; a masked one differs.)"""
    return original if pairs == list(original.items()) else dict(pairs)


def kept_list(original: list[Any], items: list[Any]) -> list[Any]:
    """``original`` itself when ``items`` (its items, redacted) are its own, else ``items``."""
    return original if items == original else items


def url_credentials(url: str) -> str | None:
    """Why ``url`` carries credentials (user information, a key in the query), or None.

    The reason never contains the credential itself.
    """
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.username or parts.password or "@" in parts.netloc:
        return "user information (user:password@) in the URL"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() in SECRET_PARAMS:
            return f"the query parameter {name!r}"
    return None
