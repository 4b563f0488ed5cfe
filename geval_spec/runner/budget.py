"""``run --max-cost USD``: what a run may spend, enforced before each request is sent.

A request is sent only when what this run has spent, plus the most the
requests in flight can still cost, plus the most this one can cost, stays
within the ceiling. The most a request can cost is its prompt counted
generously (a third of its characters as tokens, where real tokenizers give
about a quarter) plus ``max_tokens`` for each completion, at the model's
price (the batch price in batch mode). So the spend never passes the
ceiling; the last requests may be held back a little early. A model without
a price cannot be held to a ceiling: the run refuses to start.
"""

from __future__ import annotations

import math

from geval_spec.judge import costs
from geval_spec.judge.types import Request


def most(request: Request, batch: bool = False) -> float | None:
    """The most one request can cost, in USD; None when its model has no price."""
    price = costs.price(request.model)
    if price is None:
        return None
    chars = sum(len(m["content"]) for m in request.messages if isinstance(m.get("content"), str))
    prompt = math.ceil(chars / 3) + 8 * len(request.messages)
    out = int(request.body.get("max_completion_tokens") or request.body.get("max_tokens") or 0) * request.n
    return price.of(prompt, out, batch=batch)


class Ceiling:
    """The spend of one run against its ``--max-cost``."""

    def __init__(self, limit: float, batch: bool = False) -> None:
        self.limit = limit
        self.batch = batch
        self.total = 0.0  # spent by this run
        self.reserved: dict[str, float] = {}  # request hash -> the most it can still cost
        self.in_flight = 0.0  # the sum of the reservations
        self.held_back = 0  # requests not sent because of the ceiling

    def admit(self, request: Request) -> bool:
        """Reserve what ``request`` can cost; False (and nothing reserved) if that would pass the ceiling."""
        upper = most(request, self.batch)
        if upper is None:
            upper = 0.0  # refused before the run starts; a step or fallback request of a priced run
        if self.total + self.in_flight + upper > self.limit + 1e-12:
            self.held_back += 1
            return False
        self.reserved[request.hash] = upper
        self.in_flight += upper
        return True

    def settle(self, request: Request, cost: float | None) -> None:
        """The request ended: its reservation goes, what it cost (None: nothing, or unknown) counts."""
        self.in_flight = max(0.0, self.in_flight - self.reserved.pop(request.hash, 0.0))
        self.total += cost or 0.0
