"""``run --dry-run``: what a run would send and cost, with nothing sent.

Input tokens are counted offline (tiktoken ``o200k_base``, or an estimate of
4 characters per token when no vocabulary is available); output tokens are
bounded by ``max_tokens`` and estimated from earlier runs of the same judging
fingerprint when there are any; prices come from litellm's offline cost map.
"""

from __future__ import annotations

from typing import Sequence

from geval_spec.judge import costs, tokens
from geval_spec.judge.render import prefix_share
from geval_spec.judge.requests import Plan, unique
from geval_spec.judge.messages import Message, serialise
from geval_spec.judge.types import Request
from geval_spec.values import frozen


@frozen
class DryRun:
    """What a run would send and cost, as run --dry-run estimates it."""

    cases: int
    requests: int
    to_send: int
    cached: int
    input_tokens: int
    output_tokens_max: int
    output_tokens_typical: int | None
    cost_estimate: float | None
    cost_max: float | None
    unpriced_models: tuple[str, ...]
    static_prefix_share: float
    exact_tokens: bool


def estimate(plan: Plan, pending: Sequence[Request], typical: float | None) -> DryRun:
    """The plan's size, tokens and cost; ``typical`` is the mean completion tokens of earlier runs."""
    input_tokens = output_max = 0
    cost_est = cost_max = 0.0
    unpriced: set[str] = set()
    token_cache: dict[str, int] = {}
    for r in pending:
        text = serialise(tuple(Message(m["role"], m["content"]) for m in r.messages))
        n_in = token_cache.get(text)
        if n_in is None:
            n_in = token_cache[text] = tokens.count(text)
        out_max = int(r.body["max_tokens"]) * r.n
        input_tokens += n_in
        output_max += out_max
        price = costs.price(r.model)
        if price is None:
            unpriced.add(r.model)
            continue
        cost_max += price.of(n_in, out_max)
        cost_est += price.of(n_in, min(typical * r.n, out_max) if typical else out_max)
    share_num = share_den = 0
    first = next(iter(plan.rendered.values()))[0] if plan.rendered else None
    if first is not None:
        share_num, share_den = prefix_share(plan.renderer.static_prefix(), first.messages)
    every = len(unique(plan.requests))
    all_unpriced = bool(unpriced) and len(unpriced) == len({r.model for r in pending})
    return DryRun(cases=plan.cases, requests=every, to_send=len(pending), cached=every - len(pending),
                  input_tokens=input_tokens, output_tokens_max=output_max,
                  output_tokens_typical=None if typical is None else int(typical * sum(r.n for r in pending)),
                  cost_estimate=None if all_unpriced else cost_est, cost_max=None if unpriced else cost_max,
                  unpriced_models=tuple(sorted(unpriced)),
                  static_prefix_share=share_num / share_den if share_den else 0.0, exact_tokens=tokens.exact())
