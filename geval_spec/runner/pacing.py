"""How fast one judge's requests go out: paced by declared limits, or adapted to the provider's answers.

**Declared limits** (``judge.limits`` or ``run --rpm/--tpm``) are paced
evenly, never spent in bursts: ``rpm: 120`` sends a request every 0.5 s. A
request's *rate cost* is counted the way providers count it before they
answer: a quarter of its messages' characters plus ``max_tokens`` for each
completion it asks for (:func:`rate_cost`). Each limit is a schedule
(the generic cell rate algorithm with no burst): a request may start when
every schedule allows it, and moves each schedule on by its cost divided by
the rate. Providers enforce per-minute limits over periods of a second or
so, so a full minute's worth sent at once is refused even when the minute's
total is within the limit; even pacing never is.

**Without declared limits** the pacer adapts (AIMD). At most ``window``
requests are in flight: the window starts at 8 (or the concurrency, if
lower), grows by two per answer until the first 429 (slow start: three
times as many in flight each round trip), then by one per window of
answers; each 429 halves it, once per round of requests (a 429 for a
request sent before the last cut does not cut again). A 429's
Retry-After holds every send of this judge until then. When answers carry
``x-ratelimit-limit-requests``/``-tokens`` headers (OpenAI, Azure and most
compatible servers send them), the limits they name are paced as if
declared, at a share that a 429 cuts by a fifth and each answer restores a
little; ``x-ratelimit-remaining-*`` at 0 holds sends until its ``reset-*``. Without
such headers, the first 429 starts pacing at nine tenths of the rate answers
were coming at; each later 429 cuts that pace by a tenth, and to nine
tenths of the rate answers came at over the last seconds (one at least)
when that is lower; each answer raises it by a thousandth, probing for the
limit.

The executor asks :meth:`Pacer.acquire` before every attempt and reports
each outcome to :meth:`Pacer.release`. One pacer serves every judge with the
same client, server and model: a provider's limit is per model and key.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass
from geval_spec.judge.types import JsonObject, RateInfo
from geval_spec.values import frozen

SLOW_START = 8  # requests in flight before the first answer (adaptive mode)
SLOW_START_GROWTH = 2.0  # the window's growth per answer until the first 429 (BENCHMARKS.md, rate limits)
CUT = 0.5  # the window after a 429
LEARNED_CUT = 0.8  # the share of a learned limit after a 429
LEARNED_FLOOR = 0.3
LEARNED_GAIN = 0.002  # share regained per answer
ESTIMATED_CUT = 0.9  # without headers: the pace after a 429, as a share of the rate answers came at
ESTIMATED_GAIN = 0.001  # ... probing upwards by this share per answer
ESTIMATED_CEILING = 4.0
ANSWERS_KEPT = 64  # answer times kept to estimate the rate
ESTIMATE_SPAN = 1.0  # seconds: later 429s measure the answers' rate over this long at least


def rate_cost(body: JsonObject) -> int:
    """Tokens a request counts against a tpm limit: ceil(characters / 4) of its messages + max_tokens x n."""
    chars = 0
    for message in body.get("messages", ()):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
    most = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return math.ceil(chars / 4) + int(most) * int(body.get("n") or 1)


class Schedule:
    """One per-minute limit paced evenly: the earliest time the next request may start."""

    def __init__(self, per_minute: float) -> None:
        self.per_minute = per_minute
        self.next_at = 0.0

    def earliest(self, now: float) -> float:
        return max(now, self.next_at)

    def book(self, start: float, cost: float, share: float = 1.0) -> None:
        self.next_at = max(self.next_at, start) + cost * 60.0 / (self.per_minute * share)


@frozen
class PaceState:
    """What progress shows about pacing."""

    mode: str  # "declared" (limits, or none to respect) or "adaptive"
    rpm: float | None  # the pace, requests per minute (None: not limited)
    tpm: float | None
    window: int  # requests allowed in flight
    learned: bool  # adaptive mode found limits in the provider's headers
    estimated: bool  # ... or estimated a pace from when 429s began (no headers)
    held: float  # seconds sends are held for a Retry-After or an exhausted budget


@dataclass
class Ticket:
    """Leave to send one request: when it was given and in which round."""

    sent_at: float
    round: int


class Pacer:
    """The pace of one judge model's requests (see the module docstring)."""

    def __init__(self, rpm: int | None, tpm: int | None, concurrency: int, adaptive: bool = True) -> None:
        self.declared = rpm is not None or tpm is not None or not adaptive  # (a cassette: never limited)
        self.requests = Schedule(rpm) if rpm is not None else None
        self.tokens = Schedule(tpm) if tpm is not None else None
        self.concurrency = max(1, concurrency)
        self.window = float(self.concurrency if self.declared else min(self.concurrency, SLOW_START))
        self.slow_start = not self.declared
        self.share = 1.0  # of learned (or estimated) limits
        self.learned = False  # limits from x-ratelimit headers
        self.estimated = False  # a pace from the rate answers came at when 429s began (no headers)
        self._answers: deque[float] = deque(maxlen=ANSWERS_KEPT)
        self.round = 0
        self.in_flight = 0
        self.hold_until = 0.0
        self._lock = asyncio.Lock()
        self._freed: asyncio.Event | None = None
        self._waiting = 0  # requests in acquire

    def take(self, body: JsonObject) -> Ticket | None:
        """A ticket at once when this request may be sent now and nobody waits in :meth:`acquire` (which keeps
        them first come first served); None otherwise. Most requests of a run go this way, without a coroutine
        or the lock."""
        if self._waiting or self.in_flight >= max(1, int(self.window)):
            return None
        now = time.monotonic()
        return self._book(now, body) if self._start(now) <= now + 1e-4 else None

    async def acquire(self, body: JsonObject) -> Ticket:
        """Wait until this request (``body``: what it counts against a tpm limit) may be sent; the caller must
        :meth:`release` the ticket."""
        self._waiting += 1
        try:
            async with self._lock:  # one waiter at a time, first come first served
                while True:
                    now = time.monotonic()
                    if self.in_flight >= max(1, int(self.window)):
                        self._freed = self._freed or asyncio.Event()
                        await self._freed.wait()
                        self._freed = None
                        continue
                    start = self._start(now)
                    if start > now + 1e-4:
                        await asyncio.sleep(start - now)
                        continue
                    return self._book(now, body)
        finally:
            self._waiting -= 1

    def _start(self, now: float) -> float:
        """The earliest time the next request may start: a hold, and the schedules of the limits."""
        start = max(now, self.hold_until)
        for schedule in (self.requests, self.tokens):
            if schedule is not None:
                start = max(start, schedule.earliest(now))
        return start

    def _book(self, now: float, body: JsonObject) -> Ticket:
        """Send a request now: its share of the limits' schedules (its tokens counted only under a tpm limit)."""
        share = 1.0 if self.declared else self.share
        if self.requests is not None:
            self.requests.book(now, 1, share)
        if self.tokens is not None:
            self.tokens.book(now, rate_cost(body), share)
        self.in_flight += 1
        return Ticket(sent_at=now, round=self.round)

    def release(self, ticket: Ticket, *, rate_limited: bool = False, retry_after: float | None = None,
                limits: RateInfo | None = None) -> None:
        """An attempt ended: answered, refused with 429 (``rate_limited``), or failed otherwise."""
        self.in_flight -= 1
        now = time.monotonic()
        if limits is not None and not self.declared:
            self._learn(limits, now)
        if rate_limited:
            if retry_after:
                self.hold_until = max(self.hold_until, now + min(retry_after, 300.0))
            if not self.declared and ticket.round == self.round:
                self.round += 1
                self.slow_start = False
                self.window = max(1.0, self.window * CUT)
                self._cut(now)
        elif not self.declared:
            self._answers.append(now)
            self.window = min(float(self.concurrency),
                              self.window + (SLOW_START_GROWTH if self.slow_start else 1.0 / max(1.0, self.window)))
            if self.estimated:
                self.share = min(ESTIMATED_CEILING, self.share + ESTIMATED_GAIN)
            else:
                self.share = min(1.0, self.share + LEARNED_GAIN)
        if self._freed is not None:
            self._freed.set()

    def _cut(self, now: float) -> None:
        """A 429 in adaptive mode: slow the learned pace, or (no headers) start pacing below the answer rate."""
        if self.learned:
            self.share = max(LEARNED_FLOOR, self.share * LEARNED_CUT)
        elif self.estimated:
            self.share = max(LEARNED_FLOOR, self.share * ESTIMATED_CUT)
            # once 429s have begun, the answers of the last seconds (over one at least: a burst is no rate) came
            # at what the provider lets through: never pace above nine tenths of that
            recent = self._recent(now)
            if self.requests is not None and len(recent) >= 3:
                measured = (len(recent) - 1) / max(ESTIMATE_SPAN, recent[-1] - recent[0]) * 60.0
                if measured * ESTIMATED_CUT < self.requests.per_minute * self.share:
                    self.requests = _rescheduled(self.requests, measured)
                    self.share = ESTIMATED_CUT
        else:
            recent = self._recent(now)
            if len(recent) >= 3 and recent[-1] > recent[0]:
                self.requests = Schedule((len(recent) - 1) / (recent[-1] - recent[0]) * 60.0)
                self.estimated, self.share = True, ESTIMATED_CUT

    def _recent(self, now: float) -> list[float]:
        """When the answers of the last 5 s came (of the last ANSWERS_KEPT)."""
        return [t for t in self._answers if t >= now - 5.0]

    def _learn(self, info: RateInfo, now: float) -> None:
        if info.limit_requests and (self.requests is None or self.requests.per_minute != info.limit_requests):
            self.requests = _rescheduled(self.requests, info.limit_requests)
            self.learned = True
        if info.limit_tokens and (self.tokens is None or self.tokens.per_minute != info.limit_tokens):
            self.tokens = _rescheduled(self.tokens, info.limit_tokens)
            self.learned = True
        if self.learned and self.estimated:
            self.estimated, self.share = False, min(self.share, 1.0)
        for remaining, reset in ((info.remaining_requests, info.reset_requests),
                                 (info.remaining_tokens, info.reset_tokens)):
            if remaining == 0 and reset:
                self.hold_until = max(self.hold_until, now + min(reset, 60.0))

    def state(self) -> PaceState:
        share = 1.0 if self.declared else self.share
        return PaceState(mode="declared" if self.declared else "adaptive",
                         rpm=self.requests.per_minute * share if self.requests else None,
                         tpm=self.tokens.per_minute * share if self.tokens else None,
                         window=max(1, int(self.window)), learned=self.learned, estimated=self.estimated,
                         held=max(0.0, self.hold_until - time.monotonic()))


def _rescheduled(old: Schedule | None, per_minute: float) -> Schedule:
    new = Schedule(per_minute)
    if old is not None:
        new.next_at = old.next_at
    return new
