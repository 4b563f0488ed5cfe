"""Generated evaluation steps: ask the judge once, freeze the answer in ``specs/<name>.lock.yaml``.

With ``steps: {generate: true}`` the first run sends one request for the
steps (G-Eval's auto chain of thought) and writes the lock file; every case
of every run then uses those steps. The answer is stored like any response,
so asking again costs nothing unless ``--regenerate-steps`` asks for new ones.
"""

from __future__ import annotations

import time
from typing import Callable

from geval_spec.errors import InputError, JudgeError
from geval_spec.judge.clients.base import completion_of
from geval_spec.judge.outputs import parse_steps
from geval_spec.judge.requests import make_request
from geval_spec.judge.messages import Message, Rendered
from geval_spec.judge.types import Request
from geval_spec.runner.execute import Routes, Settings, send_all
from geval_spec.spec.load import ParsedSpec, load_spec
from geval_spec.spec.lock import write_lock
from geval_spec.spec.sections import GenerateSteps, Judge
from geval_spec.store.db import Store
from geval_spec.store.records import ResponseRecord, new_run_id

STEPS_SYSTEM = ("You design evaluation procedures for an expert judge. Write the steps a careful evaluator follows "
                "to judge one criterion, each step one imperative sentence, in the language of the task.")


def steps_request(parsed: ParsedSpec, judge: Judge, nonce: int) -> Request:
    spec = parsed.spec
    count = spec.steps.count if isinstance(spec.steps, GenerateSteps) else 5
    user = (f"Task: {spec.task}\n\nCriterion: {spec.criterion.name}\n{spec.criterion.description}\n\n"
            f"Write exactly {count} evaluation steps. Answer with one JSON object and nothing else: "
            '{"steps": ["<step 1>", "<step 2>", ...]}')
    rendered = Rendered(case_id="(steps)", messages=(Message("system", STEPS_SYSTEM), Message("user", user)))
    steps_judge = judge.model_copy(update={"top_logprobs": None})
    return make_request(steps_judge, rendered, logprobs=False, sample=nonce, purpose="steps")


def needs_steps(parsed: ParsedSpec, regenerate: bool) -> bool:
    if not isinstance(parsed.spec.steps, GenerateSteps):
        return False
    return parsed.steps_pending or regenerate or parsed.steps_stale


def generate_steps(parsed: ParsedSpec, judge: Judge, store: Store, routes: Routes, regenerate: bool,
                   say: Callable[[str], None]) -> ParsedSpec:
    """Ask the judge for the evaluation steps once; freeze them in the lock file; return the reloaded spec."""
    if parsed.source.rev is not None:
        raise InputError(problems=[parsed.key_problem(
            ("steps",), f"the steps of {parsed.source.display} are not generated; generate them in the working copy "
                        "and commit the lock file")])
    nonce = int(time.time()) if regenerate and parsed.lock is not None else 0
    request = steps_request(parsed, judge, nonce)
    stored = store.ok_responses([request.hash]).get(request.hash)
    if stored is None:
        say(f"generating evaluation steps with {judge.model}")
        run_id = new_run_id()
        journal = store.journal(run_id)

        def sink(record: ResponseRecord) -> None:
            store.write_responses([record])

        try:
            outcomes = send_all(routes, [request], run_id=run_id, journal=journal, sink=sink,
                                settings=Settings(concurrency=1, retry_budget=10))
        finally:
            journal.discard()
        completion = outcomes[request.hash].completion
        if completion is None:
            raise JudgeError(f"could not generate the evaluation steps: {outcomes[request.hash].error}")
        text = completion.choices[0].text
    else:
        text = completion_of(stored, request.model).choices[0].text
    steps = parse_steps(text)
    if isinstance(steps, str):
        raise JudgeError(f"the judge's evaluation steps are unusable ({steps}); its answer is stored. "
                         f"Retry with: geval-spec run {parsed.name} --regenerate-steps")
    write_lock(parsed.lock_path, parsed.spec, judge.model, steps)
    say(f"wrote {len(steps)} evaluation steps to {parsed.lock_path.name} (commit it)")
    return load_spec(parsed.source)
