"""What is known about a judge model before anything is sent, from litellm's offline model map.

The map (read as data by :mod:`geval_spec.judge.costs`, without importing
litellm) names each model's provider and says whether it reasons and whether
it takes sampling parameters. From that:

- OpenAI's reasoning models (o1, o3, o4-mini, the gpt-5 family) return no
  logprobs and take only temperature 1, unless ``reasoning_effort: none``
  is passed (``judge.params``) to a model that supports it;
- models the map marks ``supports_sampling_params: false`` take only
  temperature 1;
- Anthropic and Bedrock return no logprobs at all;
- the providers that cache only marked prefixes (``judge.cache_prefix``)
  are the ones litellm injects ``cache_control`` for; OpenAI, DeepSeek and
  xAI cache by themselves.

A model the map does not know has no known constraints: the run finds out
from the provider's answers (a response without logprobs stops a
``fallback: none`` run at once).
"""

from __future__ import annotations

from typing import Any, Sequence

from geval_spec.errors import Problem
from geval_spec.judge.costs import model_entry
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import Judge
from geval_spec.values import frozen

NO_LOGPROBS = frozenset({"anthropic", "bedrock", "bedrock_converse", "vertex_ai-anthropic_models"})
SELF_CACHING = frozenset({"openai", "text-completion-openai", "azure", "deepseek", "xai"})
MARKED_CACHING = frozenset({"anthropic", "bedrock", "bedrock_converse", "vertex_ai", "vertex_ai-anthropic_models",
                            "vertex_ai-language-models", "gemini", "azure_ai", "openrouter", "databricks",
                            "dashscope", "minimax", "zai"})
CACHE_MARK = [{"location": "message", "role": "system"}]  # litellm's cache_control_injection_points


@frozen
class ModelFacts:
    """What the map says about one model; None where it says nothing."""

    model: str
    provider: str | None
    known: bool  # the map has the model
    reasoning: bool
    logprobs: bool | None
    fixed_temperature: float | None

    @property
    def needs_cache_mark(self) -> bool:
        return self.provider in MARKED_CACHING


def provider_of(model: str, entry: dict[str, Any] | None) -> str | None:
    if entry is not None and isinstance(entry.get("litellm_provider"), str):
        provider: str = entry["litellm_provider"]
        return provider
    if "/" in model:
        return model.split("/", 1)[0]
    return None


def facts(model: str, params: dict[str, Any] | None = None) -> ModelFacts:
    entry = model_entry(model)
    provider = provider_of(model, entry)
    e = entry or {}
    reasoning = e.get("supports_reasoning") is True
    no_reasoning = (params or {}).get("reasoning_effort") == "none" and e.get("supports_none_reasoning_effort") is True
    logprobs: bool | None = None
    fixed: float | None = None
    if provider in NO_LOGPROBS:
        logprobs = False
    if provider == "openai" and reasoning and not no_reasoning:
        logprobs, fixed = False, 1.0
    if e.get("supports_sampling_params") is False:
        fixed = 1.0
    return ModelFacts(model=model, provider=provider, known=entry is not None, reasoning=reasoning,
                      logprobs=logprobs, fixed_temperature=fixed)


def _where(parsed: ParsedSpec, judge: Judge, key: str, from_cli: bool) -> tuple[str | int, ...]:
    if from_cli:
        return ()
    spec = parsed.spec
    if spec.judges:
        for i, j in enumerate(spec.judges):
            if j.label == judge.label:
                return ("judges", i, key)
    return ("judge", key)


def model_problems(parsed: ParsedSpec, judges: Sequence[Judge], from_cli: bool = False) -> list[Problem]:
    """Requests the map knows a judge model will refuse, pointing at the key to change.

    ``from_cli``: the model came from ``--model`` (the problem names the flag, not a key).
    """
    spec = parsed.spec
    problems: list[Problem] = []
    for judge in judges:
        f = facts(judge.model, dict(judge.params))
        where = "--model " + judge.model if from_cli else judge.model
        if f.fixed_temperature is not None and judge.temperature != f.fixed_temperature:
            message = (f"{where} takes only temperature {f.fixed_temperature:g} (litellm's model map: "
                       f"{'a reasoning model' if f.reasoning else 'no sampling parameters'}); the spec asks for "
                       f"{judge.temperature:g}")
            problems.append(_problem(parsed, judge, "temperature", message, from_cli,
                                     f"set temperature: {f.fixed_temperature:g} for this judge"))
        wants_logprobs = spec.scoring.method == "logprobs"
        if wants_logprobs and f.logprobs is False and spec.scoring.fallback == "none":
            problems.append(_problem(
                parsed, judge, "model", f"{where} returns no logprobs (litellm's model map: provider "
                f"{f.provider}{', a reasoning model' if f.reasoning else ''}), and scoring.method logprobs has "
                "scoring.fallback: none", from_cli,
                "set scoring.fallback: samples (or direct) to score it by sampling, or pick a judge with logprobs"))
    return problems


def _problem(parsed: ParsedSpec, judge: Judge, key: str, message: str, from_cli: bool, hint: str) -> Problem:
    path = _where(parsed, judge, key, from_cli)
    if not path:
        return Problem(message, hint=hint)
    return parsed.key_problem(path, message).with_hint(hint)
