"""The store's shards and exports: a part of :class:`~geval_spec.store.db.Store`.

Mixed into the store class (which holds the connection and the transaction
helpers): ``merge`` copies shard stores in and combines their runs into the
run made in one go; ``export --parquet`` writes a run's tables.
"""

from __future__ import annotations

import os

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from geval_spec.errors import StoreError
from geval_spec.store.records import RunSettings
from geval_spec.store.sql import IN, RUN_COLUMNS, dumps


class ShardTables:
    """Merging shard stores and exporting runs (methods of :class:`~geval_spec.store.db.Store`)."""

    con: Any

    if TYPE_CHECKING:
        def __init__(self, path: Path) -> None: ...

        def close(self) -> None: ...

        def transaction(self, work: Callable[[Any], None]) -> None: ...

    SHARED = ("requests", "answers", "failures")  # keyed by request: the same rows in every store
    PER_RUN = ("runs", "run_cases", "run_requests", "judgments", "verdicts", "findings")

    def absorb(self, other: Path) -> list[str]:
        """Copy every row of another store (a shard's) into this one; return the runs it held.

        A run this store holds already is replaced by the other store's when that one is completed and this
        one's is not: a shard interrupted, merged, then resumed and finished (its store now holds the whole
        run) is merged again whole; before, the first copy's status and rows stayed and the set never merged.
        A completed run here is kept.
        """
        if not other.is_file():
            raise StoreError(f"no results database at {other}" if not os.path.lexists(other) else
                             f"{other} is not a results database: not a regular file (a folder, FIFO or device)")
        type(self)(other).close()  # bring it to this schema version and replay its journals first
        quoted = str(other).replace("'", "''")
        self.con.execute(f"ATTACH '{quoted}' AS shard (READ_ONLY)")
        try:
            theirs = self.con.execute("SELECT run_id, status FROM shard.runs ORDER BY run_id").fetchall()
            ours = dict(self.con.execute("SELECT run_id, status FROM runs").fetchall())
            take = [run_id for run_id, status in theirs
                    if run_id not in ours or (ours[run_id] != "completed" and status == "completed")]

            # runs neither side has finished: what the other store has more of is added (keyed rows)
            add = [run_id for run_id, status in theirs if run_id in ours and ours[run_id] != "completed"
                   and status != "completed"]

            def work(c: Any) -> None:
                for table in self.SHARED:
                    c.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM shard.{table}")
                for table in self.PER_RUN:
                    c.execute(f"DELETE FROM {table} WHERE run_id {IN}", [take])
                    c.execute(f"INSERT INTO {table} SELECT * FROM shard.{table} WHERE run_id {IN}", [take])
                    if table != "runs":
                        c.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM shard.{table} WHERE run_id {IN}",
                                  [add])

            self.transaction(work)
        finally:
            self.con.execute("DETACH shard")
        return [run_id for run_id, _ in theirs]

    def case_ids_of(self, run_ids: Sequence[str]) -> list[str]:
        """The case ids of runs (shards of one run), in the order of the data file."""
        rows = self.con.execute(f"SELECT case_id FROM run_cases WHERE run_id {IN} ORDER BY position",
                                [list(run_ids)]).fetchall()
        return [r[0] for r in rows]

    def combine(self, parts: Sequence[str], run_id: str, settings: RunSettings) -> None:
        """Make one run ``run_id`` of the runs ``parts`` (shards): their cases, requests and judgments."""
        first = parts[0]
        columns = ", ".join(RUN_COLUMNS)
        values = ", ".join("?" if c in ("run_id", "options_json", "status") else c for c in RUN_COLUMNS)

        def work(c: Any) -> None:
            # the parts' rows are set apart first: a part can have the merged run's id itself (one shard held
            # every case, the others none), and deleting an older merged run would then delete that part
            for table in self.PER_RUN:
                c.execute(f"CREATE OR REPLACE TEMP TABLE part_{table} AS SELECT * FROM {table} WHERE run_id {IN}",
                          [list(parts)])
                c.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
            c.execute(f"INSERT INTO runs ({columns}, pid) SELECT {values}, pid FROM part_runs WHERE run_id = ?",
                      [run_id, dumps(settings.to_json()), "completed", first])
            for table in self.PER_RUN[1:]:
                names = [row[1] for row in c.execute(f"PRAGMA table_info('{table}')").fetchall()]
                select = ", ".join("?" if n == "run_id" else n for n in names)
                if table == "run_requests":
                    # cases in two shards can render the same prompt (a request asked once per run): the first
                    # shard's row stands, as the first case's does in a run made in one go
                    for part in parts:
                        c.execute(f"INSERT OR IGNORE INTO {table} SELECT {select} FROM part_{table} "
                                  "WHERE run_id = ? ORDER BY position", [run_id, part])
                else:
                    c.execute(f"INSERT INTO {table} SELECT {select} FROM part_{table}", [run_id])
            for table in self.PER_RUN:
                c.execute(f"DROP TABLE part_{table}")

        self.transaction(work)

    def export_parquet(self, run_id: str, folder: Path) -> list[Path]:
        """The run's cases, requests, responses, judgments and verdicts as Parquet files in ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        queries = {
            "cases": "SELECT * FROM run_cases WHERE run_id = $run ORDER BY position",
            "requests": "SELECT rr.*, q.model, q.body_json, q.n FROM run_requests rr JOIN requests q "
                        "ON q.request_hash = rr.request_hash WHERE rr.run_id = $run ORDER BY rr.position",
            "responses": "SELECT r.* FROM responses r WHERE r.request_hash IN (SELECT request_hash FROM "
                         "run_requests WHERE run_id = $run) ORDER BY r.request_hash, r.received_at",
            "judgments": "SELECT * FROM judgments WHERE run_id = $run ORDER BY case_id, judge",
            "verdicts": "SELECT * FROM verdicts WHERE run_id = $run ORDER BY case_id, judge, idx",
        }
        written = []
        for name, query in queries.items():
            target = folder / f"{name}.parquet"
            quoted = str(target).replace("'", "''")
            self.con.execute(f"COPY ({query}) TO '{quoted}' (FORMAT parquet)", {"run": run_id})
            written.append(target)
        return written
