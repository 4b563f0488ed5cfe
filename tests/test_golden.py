"""Outputs that must not change by accident: every file in tests/golden/expected, byte for byte.

The files were captured by tests/golden/make_golden.py; when a change of
output is intended, rerun it into tests/golden/expected and say why in the
commit.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

from conftest import TESTS

sys.path.insert(0, str(TESTS / "golden"))

import make_golden  # noqa: E402

EXPECTED = TESTS / "golden" / "expected"


def test_outputs_are_byte_identical_to_the_captured_ones(tmp_path: Path) -> None:
    make_golden.make(tmp_path)
    produced = sorted(p.name for p in tmp_path.iterdir())
    assert produced == sorted(p.name for p in EXPECTED.iterdir())
    for name in produced:
        want = (EXPECTED / name).read_text(encoding="utf-8")
        got = (tmp_path / name).read_text(encoding="utf-8")
        if got != want:
            diff = "\n".join(list(difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "got",
                                                       lineterm=""))[:40])
            raise AssertionError(f"{name} differs from tests/golden/expected/{name}:\n{diff}")
