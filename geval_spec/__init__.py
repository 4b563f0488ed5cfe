"""geval-spec: LLM-as-a-judge evaluation as versioned, reviewable YAML specs.

The public Python API is imported lazily, so ``geval-spec validate`` stays fast:

- :func:`expected_score` (G-Eval's probability-weighted score, :mod:`geval_spec.scoring`)
- :func:`power_mean`, :func:`temperature_to_p`, :func:`tcva_score` (TCVA, :mod:`geval_spec.tcva`)
- :func:`audit_eval_split`, :func:`summarize_eval`, :func:`paired_bootstrap`
  (evaluation hygiene, :mod:`geval_spec.hygiene`)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_API = {
    "expected_score": "scoring",
    "power_mean": "tcva",
    "temperature_to_p": "tcva",
    "tcva_score": "tcva",
    "audit_eval_split": "hygiene",
    "summarize_eval": "hygiene",
    "paired_bootstrap": "hygiene",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'geval_spec' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
