"""Two fingerprints per spec, from a canonical serialisation.

- The **judging** fingerprint covers everything that changes what a judge is
  sent: task, criterion, steps (the frozen generated steps, when generated),
  rubric, the template's text, judge settings that go into requests, the
  scoring method, the language rules that render into the prompt, the prompt
  bias controls and which data columns fill the template. When it changes,
  new judge calls are needed.
- The **analysis** fingerprint covers what is computed from stored judgments:
  aggregation, splits, bootstrap, calibration, human columns, penalties,
  the samples a case needs and the estimate settings.
  When only it changes, results are recomputed from stored judgments at zero
  cost.

Name, version, description and execution settings (timeouts, retries, which
client, the server address) change neither. Both fingerprints are SHA-256 of
canonical JSON (sorted keys, no whitespace), so key order and YAML formatting
never matter.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from geval_spec.spec.sections import Spec

REQUEST_KEYS = ("model", "temperature", "max_tokens", "seed", "top_logprobs", "json_mode", "supports_n")
LATER_REQUEST_KEYS: dict[str, Any] = {"params": {}, "cache_prefix": False}  # in the fingerprint when set


# json.dumps makes an encoder per call when given options (a third of the time for a request's small dicts)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``."""
    return _CANONICAL.encode(value)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def judging_view(spec: Spec, steps: tuple[str, ...], template_text: str) -> dict[str, Any]:
    s = spec.model_dump(mode="json")
    scoring: dict[str, Any] = {"method": spec.scoring.method, "fallback": spec.scoring.fallback}
    if spec.scoring.method == "samples" or spec.scoring.fallback == "samples":
        scoring["samples"] = spec.scoring.samples
    language = s.get("language")
    if language is not None:
        language.pop("penalty", None)
    return {
        "task": spec.task,
        "criterion": s["criterion"],
        "steps": list(steps) if steps else s["steps"],
        "rubric": s["rubric"],
        "template": hashlib.sha256(template_text.encode("utf-8")).hexdigest(),
        "judges": [_judge_view(j) for j in ([s["judge"]] if s.get("judge") else s.get("judges") or [])],
        "scoring": scoring,
        "language": language,
        "bias": {"position_swap": spec.bias.position_swap, "penalize_length": spec.bias.length == "penalize"},
        "pairwise": s.get("pairwise"),
        "data": {"path": spec.data.path, "id": spec.data.id, "fields": s["data"]["fields"]},
    }


def _judge_view(judge: dict[str, Any]) -> dict[str, Any]:
    view = {k: judge[k] for k in REQUEST_KEYS}
    view.update({k: judge[k] for k, default in LATER_REQUEST_KEYS.items() if judge.get(k, default) != default})
    return view


# Keys added after the first release enter a fingerprint only when they differ from their default, so an
# upgrade leaves every existing fingerprint (and every report that shows it) as it was.
LATER_DEFAULTS: dict[tuple[str, str], Any] = {("calibration", "rule"): "point",
                                              ("scoring", "min_valid_samples"): None}
LATER_SECTIONS = ("estimate",)  # top-level sections added later: left out when unset
# Judge keys added later, and their defaults; ``client`` was litellm by default before auto.
LATER_JUDGE_DEFAULTS: dict[str, Any] = {**LATER_REQUEST_KEYS, "limits": None, "client": "auto"}


def shown_dump(spec: Spec) -> dict[str, Any]:
    """The spec with every default filled, less what later releases added and this spec leaves unset."""
    s = spec.model_dump(mode="json")
    for (section, key), default in LATER_DEFAULTS.items():
        if isinstance(s.get(section), dict) and s[section].get(key, default) == default:
            s[section].pop(key, None)
    for section in LATER_SECTIONS:
        if s.get(section) is None:
            s.pop(section, None)
    for judge in ([s["judge"]] if s.get("judge") else s.get("judges") or []):
        for key, default in LATER_JUDGE_DEFAULTS.items():
            if judge.get(key, default) == default:
                judge.pop(key, None)
    return s


def _without_later_defaults(section: str, values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items()
            if (section, k) not in LATER_DEFAULTS or v != LATER_DEFAULTS[(section, k)]}


def analysis_view(spec: Spec) -> dict[str, Any]:
    s = spec.model_dump(mode="json")
    d = s["data"]
    view = {
        "aggregation": s["aggregation"],
        "ensemble": s["ensemble"],
        "split": s["split"],
        "bootstrap": s["bootstrap"],
        "calibration": _without_later_defaults("calibration", s["calibration"]),
        "data": {k: d[k] for k in ("group", "system", "category", "model_family", "human", "human_scale")},
        "length_report": spec.bias.length is not None,
        "penalty": (s.get("language") or {}).get("penalty") or {},
    }
    scoring = _without_later_defaults("scoring", {"min_valid_samples": s["scoring"]["min_valid_samples"]})
    if scoring:
        view["scoring"] = scoring
    if s.get("estimate") is not None:
        view["estimate"] = s["estimate"]
    return view


def fingerprints(spec: Spec, steps: tuple[str, ...], template_text: str) -> tuple[str, str]:
    return digest(judging_view(spec, steps, template_text)), digest(analysis_view(spec))


def short(fp: str) -> str:
    return fp[:10]
