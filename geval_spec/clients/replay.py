"""Answers requests from a cassette written by ``geval-spec export RUN --cassette FILE``.

A cassette is JSON Lines: a header line, then one line per answered request
with its hash, the request body and the recorded response. Replaying sends
nothing over the network; a request the cassette does not hold stops the run
with an error that names the case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import DataError, Problem
from . import Completion, TransportError, completion_from_openai

FORMAT = "geval-spec cassette"
VERSION = 1


def read_cassette(path: Path) -> dict[str, dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataError(problems=[Problem(f"cannot read cassette: {exc.strerror}", file=str(path))]) from None
    answers: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise DataError(problems=[Problem(f"not JSON: {exc.msg}", file=str(path), line=n)]) from None
        if n == 1:
            if not isinstance(item, dict) or item.get("format") != FORMAT:
                raise DataError(problems=[Problem("not a geval-spec cassette (first line lacks its header)",
                                                  file=str(path), line=1)])
            if item.get("version", 0) > VERSION:
                raise DataError(problems=[Problem(f"cassette version {item.get('version')} is newer than this "
                                                  "geval-spec reads", file=str(path), line=1)])
            continue
        if not isinstance(item, dict) or "hash" not in item or "response" not in item:
            raise DataError(problems=[Problem("each line needs 'hash' and 'response'", file=str(path), line=n)])
        answers[item["hash"]] = item
    return answers


class ReplayClient:
    name = "replay"

    def __init__(self, path: Path):
        self.path = path
        self.answers = read_cassette(path)

    async def complete(self, body: dict[str, Any], timeout: float, key: str | None = None) -> Completion:
        item = self.answers.get(key or "")
        if item is None:
            raise TransportError("replay_miss", str(self.path))
        completion = completion_from_openai(item["response"], body["model"], float(item.get("latency_ms") or 0.0))
        return Completion(choices=completion.choices, prompt_tokens=item.get("prompt_tokens"),
                          completion_tokens=item.get("completion_tokens"), cost=item.get("cost"),
                          latency_ms=float(item.get("latency_ms") or 0.0), raw=item["response"])

    async def close(self) -> None:
        return None


def cassette_lines(header: dict[str, Any], rows) -> list[str]:
    lines = [json.dumps({"format": FORMAT, "version": VERSION, **header}, ensure_ascii=False, sort_keys=True)]
    for h, request, stored in rows:
        lines.append(json.dumps({"hash": h, "request": request, "response": stored["body"],
                                 "prompt_tokens": stored.get("prompt_tokens"),
                                 "completion_tokens": stored.get("completion_tokens"), "cost": stored.get("cost"),
                                 "latency_ms": stored.get("latency_ms")}, ensure_ascii=False, sort_keys=True))
    return lines
