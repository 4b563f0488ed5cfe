"""``geval-spec export RUN``: a run's recorded responses as a cassette (for ``run --replay`` without network),
or its tables as Parquet (for DuckDB, Polars or Spark, e.g. on object storage).

A cassette is often committed (CI replays it without keys), so its requests
and responses are redacted once more as they are written: a store made before
redaction existed, or by another tool, cannot put a key into a repository.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Mapping

from geval_spec.errors import InputError, Problem, RefError
from geval_spec.files import prepare_output, write_atomic
from geval_spec.judge.clients.base import redact_body
from geval_spec.judge.clients.replay import cassette_lines
from geval_spec.redact import redact_json
from geval_spec.store.db import Store


def prepare_exports(cassette: Path | None, folder: Path | None, keep: Mapping[Path, str] | None = None) -> None:
    """Check every file an export will write before any is written (InputError naming the first that cannot be):
    ``keep`` as for :func:`~geval_spec.files.prepare_output` (the project's specs and data, the results database)."""
    if cassette is not None:
        prepare_output(cassette, "cassette", keep=keep)
    if folder is not None:
        if folder.exists() and not folder.is_dir():
            raise InputError(problems=[Problem(
                f"cannot write Parquet files into {folder}: it is a file, not a folder", file=str(folder))])
        for name in PARQUET_TABLES:
            prepare_output(folder / f"{name}.parquet", "Parquet file", keep=keep)


def export_cassette(db: Path, run_id: str, cassette: Path, keep: Mapping[Path, str] | None = None) -> int:
    """Write the cassette; return how many responses it holds."""
    prepare_exports(cassette, None, keep)
    with Store.open_existing(db) as store:
        info = store.get_run(run_id)
        if info is None:
            raise RefError(problems=[Problem(f"no run {run_id!r} in {db}")])
        rows = store.export_responses(run_id)
    clean = [replace(r, response=redact_body(r.response),
                     request=None if r.request is None else redact_json(r.request)) for r in rows]
    write_atomic(cassette, "\n".join(cassette_lines(info.run_id, info.spec_name, info.judging_fp, clean)) + "\n")
    return len(rows)


PARQUET_TABLES = ("cases", "requests", "responses", "judgments", "verdicts")  # what export_parquet writes


def export_parquet(db: Path, run_id: str, folder: Path, keep: Mapping[Path, str] | None = None) -> list[Path]:
    """Write the run's tables as Parquet files; return their paths.

    Every file is checked (and the folder made) first, as for any output: a folder that is a file, a file that
    is a folder, or a folder that cannot be written is an InputError naming it (these once ended in exit 70)."""
    prepare_exports(None, folder, keep)
    with Store.open_existing(db) as store:
        if store.get_run(run_id) is None:
            raise RefError(problems=[Problem(f"no run {run_id!r} in {db}")])
        return store.export_parquet(run_id, folder)
