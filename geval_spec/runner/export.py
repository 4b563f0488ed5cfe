"""``geval-spec export RUN``: a run's recorded responses as a cassette (for ``run --replay`` without network),
or its tables as Parquet (for DuckDB, Polars or Spark, e.g. on object storage)."""

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


def export_parquet(db: Path, run_id: str, folder: Path) -> list[Path]:
    """Write the run's tables as Parquet files; return their paths."""
    with Store.open_existing(db) as store:
        if store.get_run(run_id) is None:
            raise RefError(problems=[Problem(f"no run {run_id!r} in {db}")])
        return store.export_parquet(run_id, folder)
