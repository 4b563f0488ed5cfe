"""Stage: what will be sent. Cases x samples -> request bodies with stable hashes.

A request's hash covers the model, the messages, every parameter that goes
into the request and the sample index, and nothing else: so an unchanged spec
maps to the same hashes on every machine, and a stored response answers its
request forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fingerprint import canonical, digest
from .model import Judge
from .render import Rendered


@dataclass(frozen=True)
class Request:
    hash: str
    case_id: str
    judge: str  # judge label
    sample: int  # sample index (0 when one request gives every sample)
    n: int  # completions asked for in this request
    purpose: str  # "judge", "swap" (position-swapped pairwise), "steps"
    body: dict[str, Any]  # what goes over the wire, minus credentials

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body["messages"]


def request_body(judge: Judge, messages: list[dict[str, str]], *, logprobs: bool, n: int = 1,
                 seed_offset: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"model": judge.model, "messages": messages, "temperature": judge.temperature,
                            "max_tokens": judge.max_tokens}
    if judge.seed is not None:
        body["seed"] = judge.seed + seed_offset
    if logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = judge.top_logprobs
    if n > 1:
        body["n"] = n
    if judge.json_mode:
        body["response_format"] = {"type": "json_object"}
    return body


def request_hash(body: dict[str, Any], sample: int) -> str:
    return digest({"body": body, "sample": sample})


def make_request(judge: Judge, rendered: Rendered, *, logprobs: bool, n: int = 1, sample: int = 0,
                 purpose: str = "judge") -> Request:
    body = request_body(judge, rendered.as_dicts(), logprobs=logprobs, n=n, seed_offset=sample)
    return Request(hash=request_hash(body, sample), case_id=rendered.case_id, judge=judge.label, sample=sample,
                   n=n, purpose=purpose, body=body)


def body_json(body: dict[str, Any]) -> str:
    return canonical(body)


@dataclass(frozen=True)
class Plan:
    """Everything a run will send, before anything is sent."""

    renderer: Any
    rendered: dict[str, tuple[Rendered, ...]]  # case id -> prompts (two for a position swap)
    requests: tuple[Request, ...]

    @property
    def cases(self) -> int:
        return len(self.rendered)


def method_requests(judge: Judge, rendered: Rendered, method: str, samples: int | None,
                    purpose: str = "judge") -> list[Request]:
    """The requests one scoring method needs for one prompt and one judge."""
    if method == "logprobs":
        return [make_request(judge, rendered, logprobs=True, purpose=purpose)]
    if method == "samples":
        n = samples or 2
        if judge.supports_n:
            return [make_request(judge, rendered, logprobs=False, n=n, purpose=purpose)]
        return [make_request(judge, rendered, logprobs=False, sample=i, purpose=purpose) for i in range(n)]
    return [make_request(judge, rendered, logprobs=False, purpose=purpose)]


def prepare_requests(parsed, cases, *, judges: tuple[Judge, ...] | None = None,
                     findings: dict[str, list] | None = None) -> Plan:
    """Render every case (with its pre-check findings) and list every judge's requests."""
    from .errors import SpecError

    if parsed.steps_pending:
        raise SpecError(problems=[parsed.key_problem(
            ("steps",), "the evaluation steps are not generated yet",
        ).with_hint(f"run: geval-spec run {parsed.name} (it writes {parsed.lock_path.name} first)")])
    spec = parsed.spec
    if findings is None:
        from .precheck import precheck

        findings = precheck(parsed, cases)
    renderer = parsed.renderer()
    panel = judges if judges is not None else spec.panel
    rendered: dict[str, tuple[Rendered, ...]] = {}
    requests: list[Request] = []
    for case in cases:
        found = [f.as_dict() for f in (findings or {}).get(case.id, [])]
        prompts = (renderer.render(case.id, case.fields, found),)
        if spec.pairwise is not None and spec.bias.position_swap:
            prompts += (renderer.render(case.id, case.fields, found, swapped=True),)
        rendered[case.id] = prompts
        for judge in panel:
            for k, prompt in enumerate(prompts):
                requests += method_requests(judge, prompt, spec.scoring.method, spec.scoring.samples,
                                            purpose="swap" if k else "judge")
    return Plan(renderer=renderer, rendered=rendered, requests=tuple(requests))
