"""Judge clients, behind the plugin registry and imported only when a call is due.

Commands that send nothing never import litellm or aiohttp:

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

from importlib import import_module

from geval_spec.plugins import load_plugins


def client_class(name: str) -> type:
    """The client class registered as ``name``; KeyError when none is."""
    target = load_plugins().clients[name]
    module, _, attr = target.partition(":")
    cls: type = getattr(import_module(module), attr)
    return cls
