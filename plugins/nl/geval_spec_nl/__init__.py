"""Dutch language rules for geval-spec, loaded through the ``geval_spec.plugins`` entry point.

For a spec with ``language: {code: nl-NL | nl-BE | nl, ...}`` the checker runs
before the judge is called and returns findings with character positions:

- ``formality``: the form of address (formal ``u``/``uw``, informal
  ``je``/``jij``/``jou``/``jouw``/``jullie``) against the spec's
  ``formality``; with ``formality: any``, a text that mixes both forms;
- ``compound``: two adjacent words whose joined form (also with a linking
  ``s`` or ``e``) is a Dutch word far more frequent than the pair is plausible
  as two words (``language.compound_ratio``), e.g. "hoofd pijn";

Words and phrases of the shipped Flemish lexicon (for ``nl-BE``) and of the
spec's ``lexicon`` are never flagged, in any case and however their letters
are written (NFC or NFD, invisible format characters inside), whatever white
space stands between a phrase's words.
"""

from __future__ import annotations

from geval_spec.plugins import Registry

from .check import check


class _Plugin:
    name = "nl"

    def setup(self, registry: Registry) -> None:
        registry.add_language("nl", check, kinds=("formality", "compound"))


plugin = _Plugin()

__all__ = ["check", "plugin"]
