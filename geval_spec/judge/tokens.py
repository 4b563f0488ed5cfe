"""Counting prompt tokens offline.

We use tiktoken's ``o200k_base`` encoding (GPT-4o and GPT-4.1 family). Its
vocabulary file normally comes from the network; litellm ships a copy, so we
point tiktoken's cache at litellm's tokenizer folder (found without importing
litellm, which is slow). When no encoding can be loaded, counts fall back to
a documented estimate (4 characters per token) and ``exact`` is False.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

ENCODING = "o200k_base"


@lru_cache(maxsize=1)
def _encoder() -> Any:
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"
        if bundled.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING)
    except Exception:  # no vocabulary offline: estimate instead
        return None


def count(text: str) -> int:
    enc = _encoder()
    if enc is None:
        return max(1, (len(text) + 3) // 4) if text else 0
    return len(enc.encode(text, disallowed_special=()))


def exact() -> bool:
    return _encoder() is not None
