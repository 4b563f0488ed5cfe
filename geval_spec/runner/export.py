"""``geval-spec export RUN --cassette FILE``: a run's recorded responses, for ``run --replay`` without network."""

from __future__ import annotations

from pathlib import Path

from geval_spec.errors import Problem, RefError
from geval_spec.files import write_atomic
from geval_spec.judge.clients.replay import cassette_lines
from geval_spec.store.db import Store


def export_cassette(db: Path, run_id: str, cassette: Path) -> int:
    """Write the cassette; return how many responses it holds."""
    with Store.open_existing(db) as store:
        info = store.get_run(run_id)
        if info is None:
            raise RefError(problems=[Problem(f"no run {run_id!r} in {db}")])
        rows = store.export_responses(run_id)
    write_atomic(cassette, "\n".join(cassette_lines(info.run_id, info.spec_name, info.judging_fp, rows)) + "\n")
    return len(rows)
