"""The store's value types: what a run is, which judges it used, and one received response.

These are plain frozen values with their JSON forms; nothing here touches
DuckDB (that is :mod:`geval_spec.store.db`).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Literal

from geval_spec.spec.load import ResolvedSpec
from geval_spec.spec.sections import Judge

RunKind = Literal["run", "import"]
RunStatus = Literal["running", "completed", "failed", "interrupted"]


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> "ResponseRecord":
        data = json.loads(line)
        if isinstance(data.get("body"), dict):  # journals written before bodies were kept as received
            data["body"] = json.dumps(data["body"], ensure_ascii=False)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


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
