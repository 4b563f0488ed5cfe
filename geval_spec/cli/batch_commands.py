"""``batches``: the batches that ``run --batch`` submitted and has not collected yet."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional

import typer

from geval_spec.cli.common import DB_HELP, app, db_path, echo, handled, shown
from geval_spec.errors import EXIT_OK

if TYPE_CHECKING:
    from geval_spec.store.batches import BatchRecord


def age_seconds(created_at: str, now: datetime | None = None) -> int | None:
    """Seconds since ``created_at`` (the store's UTC timestamps), or None when it cannot be read."""
    try:
        then = datetime.strptime(created_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return max(0, int(((now or datetime.now(timezone.utc)) - then).total_seconds()))


def fmt_age(seconds: int | None) -> str:
    if seconds is None:
        return "?"
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}d{h:02d}h" if d else (f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s"))


def _entry(b: BatchRecord) -> dict[str, object]:
    return {"spec": b.spec_name, "run": b.run_id, "batch": b.batch_id, "status": b.status, "requests": b.requests,
            "age_seconds": age_seconds(b.created_at), "created_at": b.created_at, "client": b.client,
            "model": b.model, "api_base": b.api_base}


@app.command()
@handled
def batches(
    fmt: Literal["table", "json"] = typer.Option("table", "--format", help="table, or json (a list of objects)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> int:
    """The open batches of run --batch: submitted, not collected yet.

    One line per batch: spec, run, batch id, the status last seen (when its
    run last polled it), requests, and age. `geval-spec run REF --batch`
    again collects a spec's batches without submitting anything twice. With
    --format json: a list of objects with spec, run, batch, status, requests,
    age_seconds, created_at, client, model and api_base.

    \b
    Examples:
      geval-spec batches
      geval-spec batches --format json | jq -r '.[].batch'

    \b
    Exit codes:
      0  listed (also when there are none)
      2  the results database cannot be read
    """
    from geval_spec.store.db import Store

    path = db_path(db)
    found: list[BatchRecord] = []
    if path.exists():
        with Store(path) as store:
            found = store.batches()
    if fmt == "json":
        echo(json.dumps([_entry(b) for b in found], indent=2, ensure_ascii=False))
        return EXIT_OK
    if not found:
        echo(f"no open batches in {shown(path)}")
        return EXIT_OK
    rows = [("spec", "run", "batch", "status", "requests", "age")]
    rows += [(b.spec_name, b.run_id, b.batch_id, b.status, str(b.requests), fmt_age(age_seconds(b.created_at)))
             for b in found]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        echo("  ".join(cell.ljust(w) if i < len(row) - 1 else cell for i, (cell, w) in enumerate(zip(row, widths))))
    echo(f"{len(found)} open batch(es); geval-spec run REF --batch collects them")
    return EXIT_OK
