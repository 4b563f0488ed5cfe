"""Token prices from litellm's offline cost map, read without importing litellm.

litellm ships ``model_prices_and_context_window_backup.json``; we read it as
data (importing litellm costs seconds). Prices are per token in USD. A model
the map does not know has no price: costs are then reported as unknown, not 0.
"""

from __future__ import annotations

import importlib.util
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from geval_spec.values import frozen

MAP_FILE = "model_prices_and_context_window_backup.json"


@lru_cache(maxsize=1)
def _map_text() -> str | None:
    """The cost map's text (None when litellm or the file is missing)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / MAP_FILE
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


@lru_cache(maxsize=1)
def _prices() -> dict:
    """The whole map, decoded ({} when it is missing or not an object)."""
    text = _map_text()
    try:
        table = json.loads(text) if text is not None else {}
    except ValueError:
        return {}
    return table if isinstance(table, dict) else {}


_DECODER = json.JSONDecoder()
_COLON = re.compile(r"[ \t\r\n]*:[ \t\r\n]*")  # after a JSON string, makes it a key (and is where its value begins)


@lru_cache(maxsize=256)
def _entry(name: str) -> Any:
    """``_prices().get(name)``, read where the name's key stands instead of decoding the whole map (3.5 MB: 33 ms
    of every run's start), when the map's text can only spell the key one way (an ASCII name, and no ``\\u`` or
    ``\\/`` escape anywhere in the map):

    - no key spelled so anywhere: the map has no such model;
    - one key spelled so, at the start of a line indented by fewer than eight spaces: that model's entry (a field
      of an entry is indented by eight: litellm writes the map with json.dump(..., indent=4), and patched entries
      start at column 0);
    - anything else (a key repeated, nested, or somewhere else; an entry that does not decode): the whole map
      decoded, as before.
    """
    text = _map_text()
    if text is None:
        return None
    if not name.isascii() or _escapes(text):
        return _prices().get(name)
    found = _keys(text, json.dumps(name))
    if not found:
        return None
    if len(found) == 1:
        at, value_at = found[0]
        line = text.rfind("\n", 0, at) + 1
        if text[line:at].strip(" ") == "" and at - line < 8:
            try:
                value, _ = _DECODER.raw_decode(text, value_at)
            except ValueError:
                return _prices().get(name)
            return value
    return _prices().get(name)


@lru_cache(maxsize=1)
def _escapes(text: str) -> bool:
    """Whether the map spells a character as ``\\u`` or ``\\/`` anywhere (a key could then be spelled two ways).

    Found by going from backslash to backslash (``str.find`` of one character: about 0.1 ms for the installed
    map, which has 82) rather than asking ``in`` for the two pairs (7 ms: a two-character pattern is searched for
    character by character)."""
    at = text.find("\\")
    while at >= 0:
        if text[at + 1:at + 2] in ("u", "/"):
            return True
        at = text.find("\\", at + 1)
    return False


def _keys(text: str, quoted: str) -> list[tuple[int, int]]:
    """Where ``quoted`` (a JSON string) stands as a key in ``text``: its start and where its value begins."""
    found = []
    at = text.find(quoted)
    while at >= 0:
        colon = _COLON.match(text, at + len(quoted))
        if colon is not None:
            found.append((at, colon.end()))
        at = text.find(quoted, at + 1)
    return found


@frozen
class Price:
    """USD per token of one model: input, output, cached input, and both at the batch rate."""

    input: float
    output: float
    cached_input: float  # prompt tokens read from the provider's cache (the input price when unknown)
    batch_input: float  # batch APIs (half the online price when the map does not say)
    batch_output: float

    def of(self, prompt: float, completion: float, cached: float | None = None, batch: bool = False) -> float:
        """The cost of one response; reasoning tokens are part of ``completion`` and billed as output.

        Batch requests are billed at the batch rates, with no separate cache discount.
        """
        if batch:
            return prompt * self.batch_input + completion * self.batch_output
        cached = min(max(cached or 0.0, 0.0), prompt)
        return (prompt - cached) * self.input + cached * self.cached_input + completion * self.output


def _number(entry: dict[str, Any], key: str, default: float) -> float:
    value = entry.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def model_entry(model: str) -> dict[str, Any] | None:
    """The map's entry for a litellm model string (tried as written, then without its provider prefix)."""
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    for name in candidates:
        entry = _entry(name)
        if isinstance(entry, dict):
            return entry
    return None


@lru_cache(maxsize=256)
def price(model: str) -> Price | None:
    """The model's prices, or None when the offline cost map does not know it."""
    entry = model_entry(model)
    if entry is None or "input_cost_per_token" not in entry:
        return None
    inp = _number(entry, "input_cost_per_token", 0.0)
    out = _number(entry, "output_cost_per_token", 0.0)
    return Price(input=inp, output=out, cached_input=_number(entry, "cache_read_input_token_cost", inp),
                 batch_input=_number(entry, "input_cost_per_token_batches", inp / 2),
                 batch_output=_number(entry, "output_cost_per_token_batches", out / 2))


def cost(model: str, prompt_tokens: int | None, completion_tokens: int | None, cached_tokens: int | None = None,
         batch: bool = False) -> float | None:
    p = price(model)
    if p is None or prompt_tokens is None or completion_tokens is None:
        return None
    return p.of(prompt_tokens, completion_tokens, cached_tokens, batch)
