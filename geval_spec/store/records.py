"""The store's value types: what a run is, which judges it used, and one received response.

These are plain frozen values with their JSON forms; nothing here touches
DuckDB (that is :mod:`geval_spec.store.db`).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, field, fields
from datetime import datetime, timezone
from typing import Any, Literal, Sequence

from geval_spec.judge.types import Request, is_amount, request_key, token_count
from geval_spec.spec.fingerprint import canonical
from geval_spec.spec.load import ResolvedSpec
from geval_spec.spec.sections import Judge
from geval_spec.store.sql import encoder
from geval_spec.values import frozen

_TEXT = encoder(ensure_ascii=False)  # json.dumps(..., ensure_ascii=False), made once
OBJECT_BODIES = "requests_json"  # a planned line's requests with their bodies as JSON objects (Planned.line)

RunKind = Literal["run", "import"]
RunStatus = Literal["running", "completed", "failed", "interrupted"]


_SECOND: list[Any] = [None, ""]  # the last whole second formatted, so most calls format only microseconds


def now() -> str:
    """The UTC time as ``2026-12-01T08:38:11.123456Z`` (sorts as it reads)."""
    t = time.time()
    second = int(t)
    if _SECOND[0] != second:
        _SECOND[0], _SECOND[1] = second, datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{_SECOND[1]}.{int((t - second) * 1e6):06d}Z"


def new_run_id() -> str:
    return "run_" + datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S") + secrets.token_hex(3)


@frozen
class RunJudge:
    """A judge of a run as reports name it: its label, and its model and family when known."""

    label: str
    model: str | None = None
    family: str | None = None

    @classmethod
    def of(cls, judge: Judge) -> "RunJudge":
        return cls(label=judge.label, model=judge.model, family=judge.family)

    @classmethod
    def from_json(cls, value: Any) -> "RunJudge":
        """Read a stored judge: a label (imports), or a mapping (runs; older stores kept the whole judge)."""
        if isinstance(value, dict):
            label = value.get("label") or value.get("name") or value.get("model") or "?"
            return cls(label=str(label), model=value.get("model"), family=value.get("family"))
        return cls(label=str(value))

    def to_json(self) -> dict[str, str | None]:
        return asdict(self)


@frozen
class RunSettings:
    """How a run was made (what the command line asked for), kept for the record."""

    cases: int
    model: str | None = None
    split: str | None = None
    limit: int | None = None
    concurrency: int | None = None
    replay: str | None = None
    missing: int | None = None  # imports: cases of the spec without a line
    shard: str | None = None  # "K/N" for one shard of a run

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, data: Any) -> "RunSettings":
        data = data if isinstance(data, dict) else {}
        known = {f.name for f in fields(cls)}
        return cls(**{"cases": 0, **{k: v for k, v in data.items() if k in known}})


@frozen
class RunInfo:
    """A run as the store records it: spec, fingerprints, judges, data, settings and status."""

    run_id: str
    kind: RunKind
    spec_name: str
    spec_version: int
    spec_ref: str
    spec_file: str
    judging_fp: str
    analysis_fp: str
    resolved: ResolvedSpec
    judges: tuple[RunJudge, ...]
    method: str
    data_path: str
    data_sha256: str
    tool_version: str
    git_commit: str | None
    settings: RunSettings
    source_file: str | None = None
    source_sha256: str | None = None
    started_at: str = ""
    ended_at: str | None = None
    status: RunStatus = "running"
    error: str | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(j.label for j in self.judges)

    def partial(self, spec_labels: Sequence[str]) -> str | None:
        """Why this run is not its spec's whole run, or None: a shard, ``--split`` (not ``all``), a ``--limit``
        that cut the cases, or ``--model`` in place of the spec's own judges (``spec_labels``; none: the spec
        leaves the judge to ``--model``). An import is the spec's, whatever its label."""
        s = self.settings
        if s.shard is not None:
            return f"shard {s.shard}"
        if self.kind != "run":
            return None
        if s.split not in (None, "all"):
            return f"--split {s.split}"
        if s.limit is not None and s.cases >= s.limit:
            return f"--limit {s.limit}"
        if s.model is not None and spec_labels and self.labels != tuple(spec_labels):
            return f"--model {s.model}"
        return None


@frozen
class ResponseRecord:
    """One attempt's outcome: a received body (ok), kept as the text it arrived as, or a failure with its reason."""

    request_hash: str
    run_id: str
    attempt: int
    ok: bool
    status: int | None
    kind: str | None
    error: str | None
    body: str | None  # the response body exactly as received (JSON text)
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency_ms: float | None
    received_at: str = field(default_factory=now)
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    batch: bool = False  # received through a provider's batch API

    def header(self) -> dict[str, Any]:
        """Every field but the body."""
        return {"request_hash": self.request_hash, "run_id": self.run_id, "attempt": self.attempt, "ok": self.ok,
                "status": self.status, "kind": self.kind, "error": self.error, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost": self.cost, "latency_ms": self.latency_ms,
                "received_at": self.received_at, "cached_tokens": self.cached_tokens,
                "reasoning_tokens": self.reasoning_tokens, "batch": self.batch}

    @classmethod
    def of(cls, header: dict[str, Any], body: str | None) -> "ResponseRecord":
        if isinstance(header.get("body"), dict):  # journals written before bodies were kept as received
            body = json.dumps(header["body"], ensure_ascii=False)
        elif body is None and isinstance(header.get("body"), str):
            body = header["body"]
        known = {f.name for f in fields(cls)} - {"body"}
        values = {k: v for k, v in header.items() if k in known}
        for key in _COUNTS.intersection(values):  # (journals of releases that kept any whole number)
            values[key] = token_count(values[key])
        for key, kinds in _KINDS.items():  # a damaged journal's field of another type went into the store's insert
            if key in values and not (values[key] is None and None in kinds) and not _of(values[key], kinds):
                raise ValueError(f"journal field {key!r} holds {values[key]!r}"[:200])  # (exit 70, every command)
        if not isinstance(values.get("request_hash"), str) or not isinstance(values.get("run_id"), str):
            raise ValueError("a journal record needs request_hash and run_id as text")
        values["request_hash"] = request_key(values["request_hash"])  # (journals before schema 3: the whole SHA-256)
        return cls(body=body, **values)


_COUNTS = frozenset({"prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens"})
# what each field of a journal record may hold (None: may be null; "amount": a finite number of at least 0)
_KINDS: dict[str, tuple[Any, ...]] = {"attempt": (int,), "ok": (bool,), "status": (int, None), "kind": (str, None),
                                      "error": (str, None), "cost": ("amount", None), "latency_ms": ("amount", None),
                                      "received_at": (str,), "batch": (bool,)}


def _of(value: Any, kinds: tuple[Any, ...]) -> bool:
    for kind in kinds:
        if kind is int and _whole(value):
            return True
        if kind in (str, bool) and type(value) is kind:
            return True
        if kind == "amount" and is_amount(value):
            return True
    return False


def _whole(value: Any) -> bool:
    """A whole number the store's INTEGER columns hold (0 to 2**31 - 1)."""
    return type(value) is int and 0 <= value < 2**31
RequestRow = tuple[str, str, str, int, int, str]  # requests: hash, model, body_json, sample, n, created_at
LinkRow = tuple[str, str, str, str, str, int, int]  # run_requests: run_id, hash, case_id, judge, purpose, sample, position


@frozen
class Planned:
    """A chunk of a run's planned requests as the store keeps them: a ``requests`` row for each distinct request,
    and a ``run_requests`` row for each (request, judge, purpose) of the run, with its position.

    A run journals a chunk before it sends any of it, then hands it to the store's gate, which writes it at the start
    of its next session (before that session's answers and judgments): a killed run's journal replays the requests
    with their answers, and the run waits for no session before sending.
    """

    requests: tuple[RequestRow, ...]
    links: tuple[LinkRow, ...]

    @classmethod
    def of(cls, run_id: str, requests: Sequence[Request], start: int) -> "Planned":
        stamp = now()
        seen: dict[str, RequestRow] = {}
        keyed: dict[tuple[str, str, str], LinkRow] = {}
        for i, r in enumerate(requests):
            if r.hash not in seen:
                body = r.body_text or canonical(r.body)  # (canonical JSON either way: line() splices it in)
                seen[r.hash] = (r.hash, r.model, body, r.sample, r.n, stamp)
            keyed.setdefault((r.hash, r.judge, r.purpose), (run_id, r.hash, r.case_id, r.judge, r.purpose, r.sample,
                                                            start + i))
        return cls(tuple(seen.values()), tuple(keyed.values()))

    @classmethod
    def merged(cls, chunks: Sequence["Planned"]) -> "Planned":
        """One chunk of several: a request, or a (run, request, judge, purpose), kept once (its first row)."""
        if len(chunks) == 1:
            return chunks[0]
        requests: dict[str, RequestRow] = {}
        links: dict[tuple[str, str, str, str], LinkRow] = {}
        for chunk in chunks:
            for row in chunk.requests:
                requests.setdefault(row[0], row)
            for link in chunk.links:
                links.setdefault((link[0], link[1], link[3], link[4]), link)
        return cls(tuple(requests.values()), tuple(links.values()))

    def line(self) -> str:
        """The chunk as one line of JSON (the planned journal's): ``{"requests_json": [[hash, model, body, sample,
        n, created_at], ...], "links": [[...], ...]}``, each body the JSON object it is, its canonical text spliced
        in rather than escaped into a string again (which was half of a chunk's encoding: the bodies are most of
        it). Canonical JSON holds no line break. (Releases before 2026-12-03 wrote the requests under
        ``requests``, each body a string.)"""
        rows = ", ".join(f"[{_TEXT(h)}, {_TEXT(m)}, {b}, {s}, {n}, {_TEXT(t)}]" for h, m, b, s, n, t in self.requests)
        # under a key of its own: a release before this one reads "requests" and would take an object body for its
        # Python text; finding none, it skips the line instead
        return f'{{"{OBJECT_BODIES}": [{rows}], "links": {_TEXT(self.links)}}}'

    @classmethod
    def from_json(cls, data: Any) -> "Planned":
        """Read :meth:`line`'s form back (a body a JSON object, whose canonical text it was), or the earlier one (a
        body a string); a ValueError for anything else."""
        try:
            rows = data[OBJECT_BODIES] if OBJECT_BODIES in data else data["requests"]
            requests = tuple((request_key(str(h)), str(m), b if isinstance(b, str) else canonical(b), _small(s),
                              _small(n), str(t))
                             for h, m, b, s, n, t in rows)
            links = tuple((str(run), request_key(str(h)), str(c), str(j), str(p), _small(s), _small(pos))
                          for run, h, c, j, p, s, pos in data["links"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a planned chunk: {exc}") from None
        return cls(requests, links)


def _small(value: Any) -> int:
    """A count or position of a planned chunk: a whole number the store's INTEGER columns hold (a journal can be
    damaged or written by hand: 10**30 stopped every later command with exit 70)."""
    if not _whole(value):
        raise ValueError(f"{value!r} is not a whole number from 0 to 2**31 - 1")
    return int(value)


@frozen
class Usage:
    """What a run received and what it cost."""

    received: int
    failed_attempts: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None  # None when a received response has no price
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cached_by_model: tuple[tuple[str, int], ...] = ()  # prompt tokens read from the provider's cache, per model
