"""The store's value types: what a run is, which judges it used, and one received response.

These are plain frozen values with their JSON forms; nothing here touches
DuckDB (that is :mod:`geval_spec.store.db`).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Literal

from geval_spec.spec.load import ResolvedSpec
from geval_spec.spec.sections import Judge

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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class RunInfo:
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


@dataclass(frozen=True)
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
        return cls(body=body, **{k: v for k, v in header.items() if k in known})


@dataclass(frozen=True)
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
