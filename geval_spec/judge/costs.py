"""Token prices from litellm's offline cost map, read without importing litellm.

litellm ships ``model_prices_and_context_window_backup.json``; we read it as
data (importing litellm costs seconds). Prices are per token in USD. A model
the map does not know has no price: costs are then reported as unknown, not 0.
"""

from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path

MAP_FILE = "model_prices_and_context_window_backup.json"


@lru_cache(maxsize=1)
def _prices() -> dict:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(list(spec.submodule_search_locations)[0]) / MAP_FILE
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


@lru_cache(maxsize=256)
def price(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token, or None when unknown."""
    table = _prices()
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    for name in candidates:
        entry = table.get(name)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
    return None


def cost(model: str, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    p = price(model)
    if p is None or prompt_tokens is None or completion_tokens is None:
        return None
    return prompt_tokens * p[0] + completion_tokens * p[1]
