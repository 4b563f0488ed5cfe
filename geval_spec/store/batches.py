"""The ``batches`` table: batches submitted to a provider's batch API, kept so that a later run collects them.

A run with ``--batch`` stores each batch the moment the provider has created
it, before it starts waiting, so a run that is stopped (Ctrl-C) or killed
finds its batches again and polls them instead of submitting the requests a
second time. A batch is open until its results are collected, or until it
ended without them (failed, expired, cancelled); ``geval-spec batches`` lists
the open ones.

:class:`BatchTable` is part of :class:`~geval_spec.store.db.Store` (a base
class, like a section of it): it uses the store's connection and imports no
database driver.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from geval_spec.store.records import now
from geval_spec.values import frozen

_COLUMNS = ("batch_id", "run_id", "spec_name", "client", "api_base", "model", "input_file_id", "output_file_id",
            "error_file_id", "status", "requests", "created_at", "finished_at")


@frozen
class BatchRecord:
    """One submitted batch: whose it is, where it went, and its last status seen."""

    batch_id: str
    run_id: str
    spec_name: str
    client: str  # the judge client whose batch API took it: litellm or openai-http
    api_base: str | None
    model: str  # the request bodies' model (a batch holds requests to one model)
    input_file_id: str
    requests: int
    status: str  # as the provider said, last time we asked
    created_at: str = field(default_factory=now)
    output_file_id: str | None = None
    error_file_id: str | None = None
    finished_at: str | None = None  # set when its results are collected, or it ended without them

    @property
    def open(self) -> bool:
        return self.finished_at is None


class BatchTable:
    """The store's methods for the ``batches`` table (see the module docstring)."""

    con: Any  # the store's DuckDB connection

    def add_batch(self, batch: BatchRecord) -> None:
        """Keep a batch the provider has just created (before anything waits for it)."""
        self.con.execute(f"INSERT OR REPLACE INTO batches ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * 13)})",
                         [batch.batch_id, batch.run_id, batch.spec_name, batch.client, batch.api_base, batch.model,
                          batch.input_file_id, batch.output_file_id, batch.error_file_id, batch.status,
                          batch.requests, batch.created_at, batch.finished_at])

    def update_batch(self, batch_id: str, status: str, output_file_id: str | None = None,
                     error_file_id: str | None = None, finished: bool = False) -> None:
        """Record a batch's status (and its result files); ``finished``: it is no longer open."""
        self.con.execute("UPDATE batches SET status = ?, output_file_id = coalesce(?, output_file_id), "
                         "error_file_id = coalesce(?, error_file_id), finished_at = CASE WHEN ? THEN ? "
                         "ELSE finished_at END WHERE batch_id = ?",
                         [status, output_file_id, error_file_id, finished, now(), batch_id])

    def batches(self, run_id: str | None = None, open_only: bool = True) -> list[BatchRecord]:
        """The batches of a run (or of every run), oldest first; only the open ones unless ``open_only`` is False."""
        where, args = [], []
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        if open_only:
            where.append("finished_at IS NULL")
        sql = f"SELECT {', '.join(_COLUMNS)} FROM batches"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self.con.execute(sql + " ORDER BY created_at, batch_id", args).fetchall()
        return [BatchRecord(**dict(zip(_COLUMNS, row))) for row in rows]

    def batch_answers(self, run_id: str) -> int:
        """How many of a run's answers came through a batch API."""
        row = self.con.execute("SELECT count(*) FROM answers WHERE run_id = ? AND batch", [run_id]).fetchone()
        return int(row[0]) if row else 0
