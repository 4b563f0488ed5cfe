"""Judge clients, behind the plugin registry and imported only when a call is due.

A judge's ``client: auto`` (the default) is ``openai-http`` for OpenAI
models, including any OpenAI-compatible server reached as ``openai/<name>``
with an ``api_base``, and ``litellm`` for every other provider
(:func:`client_name`). A run that will use litellm starts importing it in a
background thread while it reads the data and renders the first prompts
(:func:`warm_up`). Commands that send nothing never import litellm or aiohttp:

- ``litellm``: any provider litellm supports (:mod:`.litellm_client`, the only
  module that imports litellm);
- ``openai-http``: a direct client for OpenAI-compatible endpoints over one
  pooled aiohttp session (:mod:`.http_client`), with far less overhead per
  call;
- ``replay``: answers from a cassette recorded by ``geval-spec export``
  (:mod:`.replay`), so CI can run specs without keys or network.

Plugins add clients through the ``geval_spec.plugins`` entry-point group.
"""

from __future__ import annotations

import threading
from importlib import import_module

from geval_spec.judge.models import facts
from geval_spec.plugins import load_plugins


def client_class(name: str) -> type:
    """The client class registered as ``name``; KeyError when none is."""
    target = load_plugins().clients[name]
    module, _, attr = target.partition(":")
    cls: type = getattr(import_module(module), attr)
    return cls


def client_name(client: str, model: str) -> str:
    """The client a judge uses: as set, or for ``auto`` the direct client for OpenAI models, else litellm."""
    if client != "auto":
        return client
    if model.startswith("openai/") or ("/" not in model and facts(model).provider == "openai"):
        return "openai-http"
    return "litellm"


def warm_up(name: str) -> threading.Thread | None:
    """Start loading what client ``name`` needs (its ``warm_up``) in a background thread; None if nothing to do."""
    cls = client_class(name)
    prepare = getattr(cls, "warm_up", None)
    if prepare is None:
        return None
    thread = threading.Thread(target=prepare, name=f"warm-up {name}", daemon=True)
    thread.start()
    return thread
