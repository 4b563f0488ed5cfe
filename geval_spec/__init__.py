"""geval-spec: LLM-as-a-judge evaluation as versioned, reviewable YAML specs.

The public Python API is imported lazily, so ``geval-spec validate`` stays fast:

- :func:`expected_score` (G-Eval's probability-weighted score, :mod:`geval_spec.judge.scoring`)
- :func:`power_mean`, :func:`temperature_to_p`, :func:`tcva_score` (TCVA, :mod:`geval_spec.judge.tcva`)
- :func:`audit_eval_split`, :func:`summarize_eval`, :func:`paired_bootstrap`
  (evaluation hygiene, :mod:`geval_spec.analysis.hygiene`)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_API = {
    "expected_score": "judge.scoring",
    "power_mean": "judge.tcva",
    "temperature_to_p": "judge.tcva",
    "tcva_score": "judge.tcva",
    "audit_eval_split": "analysis.hygiene",
    "summarize_eval": "analysis.hygiene",
    "paired_bootstrap": "analysis.hygiene",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'geval_spec' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
