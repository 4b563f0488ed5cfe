"""Answers requests from a cassette written by ``geval-spec export RUN --cassette FILE``.

A cassette is JSON Lines: a header line, then one line per answered request
with its hash, the request body and the recorded response. Replaying sends
nothing over the network; a request the cassette does not hold stops the run
with an error that names the case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from geval_spec.errors import DataError, Problem
from geval_spec.files import KeyTwice, ReadError, check_input, keys_once, lines, read_text
from geval_spec.redact import SURROGATE, lone_surrogate
from geval_spec.judge.clients.base import TransportError, completion_of
from geval_spec.judge.types import Completion, JsonObject, Recorded, is_amount, request_key, token_count

FORMAT = "geval-spec cassette"
VERSION = 2  # 2: requests named by 32 hex digits (store schema 3), which a reader of version 1 would not find;
# version 1 named them by 64, read here by their first 32 (judge.types.request_key)


def _amount(item: dict[str, Any], key: str, file: str, line: int) -> float | None:
    """A recorded cost or latency: absent or null, or a finite number of at least 0 (a cost of -1e308 or NaN went
    into the store and the progress line as it was); DataError at the line otherwise."""
    value = item.get(key)
    if value is None:
        return None
    if is_amount(value):
        return float(value)
    raise DataError(problems=[Problem(f"'{key}' must be a number of at least 0, or null: not {value!r}"[:200],
                                      file=file, line=line)])


def check_cassette(path: Path) -> None:
    """Before a run starts: the cassette is a regular file within the size limit; DataError naming it otherwise."""
    try:
        check_input(path, "cassette")
    except ReadError as exc:
        raise DataError(problems=[Problem(str(exc), file=str(path))]) from None


def read_cassette(path: Path) -> dict[str, Recorded]:
    """Request hash -> recorded response; raises DataError naming the file and line."""
    file = str(path)
    answers: dict[str, Recorded] = {}
    first: dict[str, int] = {}  # request hash -> the line that recorded it
    try:
        numbered = list(lines(read_text(path, "cassette"), "cassette"))
    except ReadError as exc:
        raise DataError(problems=[Problem(str(exc), file=file, line=exc.line)]) from None
    for n, line_text in numbered:
        if not line_text.strip():
            continue
        try:
            item = json.loads(line_text, object_pairs_hook=keys_once)
        except RecursionError:
            raise DataError(problems=[Problem("JSON nested too deeply", file=file, line=n)]) from None
        except KeyTwice as exc:  # (json.loads would keep the last value: a recorded answer may not be ambiguous)
            raise DataError(problems=[Problem(str(exc), file=file, line=n)]) from None
        except ValueError as exc:
            raise DataError(problems=[Problem(f"not JSON: {getattr(exc, 'msg', exc)}", file=file, line=n)]) from None
        if lone_surrogate(line_text, item):
            raise DataError(problems=[Problem(f"a value {SURROGATE}", file=file, line=n)])
        if n == 1:
            if not isinstance(item, dict) or item.get("format") != FORMAT:
                raise DataError(problems=[Problem("not a geval-spec cassette (first line lacks its header)",
                                                  file=file, line=1)])
            version = item.get("version", 0)
            if not isinstance(version, int) or version > VERSION:
                raise DataError(problems=[Problem(f"cassette version {version!r} is not one this geval-spec reads "
                                                  f"(up to {VERSION})", file=file, line=1)])
            continue
        if not isinstance(item, dict) or not isinstance(item.get("hash"), str) \
                or not isinstance(item.get("response"), dict):
            raise DataError(problems=[Problem("each line needs 'hash' (text) and 'response' (an object)",
                                              file=file, line=n)])
        request = item.get("request")
        key = request_key(item["hash"])  # (a cassette recorded before schema 3 names the whole SHA-256)
        if key in first:  # (a later line silently answered in place of the first)
            raise DataError(problems=[Problem(f"records request {key} again (line {first[key]} recorded it)",
                                              file=file, line=n)])
        first[key] = n
        answers[key] = Recorded(
            request_hash=key, response=item["response"], prompt_tokens=token_count(item.get("prompt_tokens")),
            completion_tokens=token_count(item.get("completion_tokens")), cost=_amount(item, "cost", file, n),
            latency_ms=_amount(item, "latency_ms", file, n), request=request if isinstance(request, dict) else None)
    return answers


class ReplayClient:
    name = "replay"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answers = read_cassette(path)

    async def complete(self, body: JsonObject, timeout: float, key: str | None = None) -> Completion:
        recorded = self.answers.get(key or "")
        if recorded is None:
            raise TransportError("replay_miss", str(self.path))
        return completion_of(recorded, str(body["model"]))

    async def close(self) -> None:
        return None


def cassette_lines(run_id: str, spec_name: str, judging_fp: str, rows: Sequence[Recorded]) -> list[str]:
    """A cassette's lines: the header, then one line per recorded response."""
    header = {"format": FORMAT, "version": VERSION, "run": run_id, "spec": spec_name,
              "judging_fingerprint": judging_fp}
    lines = [json.dumps(header, ensure_ascii=False, sort_keys=True)]
    for r in rows:
        lines.append(json.dumps({"hash": r.request_hash, "request": r.request, "response": r.response,
                                 "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                                 "cost": r.cost, "latency_ms": r.latency_ms}, ensure_ascii=False, sort_keys=True))
    return lines
