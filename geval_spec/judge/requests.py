"""What will be sent: cases x judges x samples x orders -> request bodies with stable hashes.

A request's hash covers the model, the messages, every parameter that goes
into the request and the sample index, and nothing else: so an unchanged spec
maps to the same hashes on every machine, and a stored response answers its
request forever.
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence

from geval_spec.dataset.cases import Case
from geval_spec.errors import SpecError
from geval_spec.judge.models import CACHE_MARK, facts
from geval_spec.judge.precheck import precheck
from geval_spec.judge.render import Renderer, renderer_for
from geval_spec.judge.messages import Rendered
from geval_spec.judge.types import HASH_CHARS, JsonObject, Method, Purpose, Request
from geval_spec.plugins import Finding
from geval_spec.spec.fingerprint import canonical, digest
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import Judge
from geval_spec.values import frozen


def request_body(judge: Judge, messages: list[dict[str, str]], *, logprobs: bool, n: int = 1,
                 seed_offset: int = 0) -> JsonObject:
    body: JsonObject = {"model": judge.model, "messages": messages, "temperature": judge.temperature,
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
    if judge.params:
        body.update(judge.params)  # keys geval-spec sets are refused when the spec is read
    if judge.cache_prefix and facts(judge.model).needs_cache_mark:
        body["cache_control_injection_points"] = CACHE_MARK
    return body


def request_hash(body: JsonObject, sample: int) -> str:
    """A request's identity: the first 128 bits of the SHA-256 of its body and sample number, in hex
    (:data:`~geval_spec.judge.types.HASH_CHARS`)."""
    return digest({"body": body, "sample": sample})[:HASH_CHARS]


def _hash_of(body_text: str, sample: int) -> str:
    """The same as :func:`request_hash`, from the body's canonical JSON (so it is encoded once)."""
    return hashlib.sha256(f'{{"body":{body_text},"sample":{sample}}}'.encode("utf-8")).hexdigest()[:HASH_CHARS]


def make_request(judge: Judge, rendered: Rendered, *, logprobs: bool, n: int = 1, sample: int = 0,
                 purpose: Purpose = "judge") -> Request:
    body = request_body(judge, rendered.as_dicts(), logprobs=logprobs, n=n, seed_offset=sample)
    text = canonical(body)
    return Request(hash=_hash_of(text, sample), case_id=rendered.case_id, judge=judge.label, sample=sample,
                   n=n, purpose=purpose, body=body, body_text=text)


@frozen
class Plan:
    """Everything a run will send, before anything is sent."""

    renderer: Renderer
    rendered: Mapping[str, tuple[Rendered, ...]]  # case id -> prompts (two for a position swap)
    requests: tuple[Request, ...]

    @property
    def cases(self) -> int:
        return len(self.rendered)


def method_requests(judge: Judge, rendered: Rendered, method: Method, samples: int | None,
                    purpose: Purpose = "judge") -> list[Request]:
    """The requests one scoring method needs for one prompt and one judge."""
    if method == "logprobs":
        return [make_request(judge, rendered, logprobs=True, purpose=purpose)]
    if method == "samples":
        n = samples or 2
        if judge.supports_n:
            return [make_request(judge, rendered, logprobs=False, n=n, purpose=purpose)]
        return [make_request(judge, rendered, logprobs=False, sample=i, purpose=purpose) for i in range(n)]
    return [make_request(judge, rendered, logprobs=False, purpose=purpose)]


def prepare_requests(parsed: ParsedSpec, cases: Sequence[Case], *, judges: tuple[Judge, ...] | None = None,
                     findings: Mapping[str, Sequence[Finding]] | None = None) -> Plan:
    """Render every case (with its pre-check findings) and list every judge's requests."""
    if parsed.steps_pending:
        raise SpecError(problems=[parsed.key_problem(
            ("steps",), "the evaluation steps are not generated yet",
        ).with_hint(f"run: geval-spec run {parsed.name} (it writes {parsed.lock_path.name} first)")])
    spec = parsed.spec
    if findings is None:
        findings = precheck(parsed, cases)
    renderer = renderer_for(parsed)
    panel = judges if judges is not None else spec.panel
    rendered: dict[str, tuple[Rendered, ...]] = {}
    requests: list[Request] = []
    for case in cases:
        found = tuple(findings.get(case.id, ()))
        prompts: tuple[Rendered, ...] = (renderer.render(case.id, case.fields, found),)
        if spec.pairwise is not None and spec.bias.position_swap:
            prompts += (renderer.render(case.id, case.fields, found, swapped=True),)
        rendered[case.id] = prompts
        for judge in panel:
            for k, prompt in enumerate(prompts):
                requests += method_requests(judge, prompt, spec.scoring.method, spec.scoring.samples,
                                            purpose="swap" if k else "judge")
    return Plan(renderer=renderer, rendered=rendered, requests=tuple(requests))


def unique(requests: Sequence[Request]) -> list[Request]:
    """Requests with distinct hashes, first occurrence kept."""
    seen: set[str] = set()
    out = []
    for r in requests:
        if r.hash not in seen:
            seen.add(r.hash)
            out.append(r)
    return out
