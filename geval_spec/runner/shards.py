"""Past one machine: shards of a run made apart (``run --shard K/N``), merged back into one run (``merge``).

Each shard is an ordinary run of the cases whose id hashes to it, in its own
store (``--db``), in its own process or CI job. ``merge`` copies every
shard's rows into one store and, for each complete set of shards (1..N of
the same spec, data and judges), makes the run that judges all their cases:
its id is the id the run made in one go would have (ids are derived from
what a run judges), so its report is the same, byte for byte.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Sequence

from geval_spec.errors import InputError, Problem
from geval_spec.runner.run import run_id_for
from geval_spec.store.db import Store
from geval_spec.store.records import RunInfo
from geval_spec.values import frozen


@frozen
class Merged:
    runs: tuple[str, ...]  # the runs made of shards
    copied: tuple[str, ...]  # every run copied from the shard stores
    incomplete: tuple[str, ...]  # sets of shards with a shard missing, described
    stores: int  # the stores read (a file named twice is read once)


def _family(run: RunInfo) -> tuple[object, ...]:
    """What shards must share to make one run: the spec (and version), data and judges, and the options that
    choose the cases (--split, --limit): shards of runs made with other options were once combined into a run
    no unsharded run looks like, or failed on a duplicate key (exit 70). The shard count comes last."""
    return (run.spec_name, run.spec_version, run.judging_fp, run.analysis_fp, run.data_sha256, run.labels,
            run.settings.split, run.settings.limit, run.settings.model,
            run.settings.shard.split("/")[1] if run.settings.shard else None)


def merge(db: Path, sources: Sequence[Path]) -> Merged:
    if not sources:
        raise InputError(problems=[Problem("merge needs at least one store to merge")])
    copied: list[str] = []
    sources = list(dict.fromkeys(source.resolve() for source in sources))  # (a file named twice is one store)
    with Store(db) as store:
        for source in sources:
            if source.resolve() == db.resolve():
                raise InputError(problems=[Problem(f"{source} is the store being merged into; merge other stores")])
            copied += [run_id for run_id in store.absorb(source) if run_id not in copied]
        shards = [r for r in (store.get_run(i) for i in copied) if r is not None and r.settings.shard]
        families: dict[tuple[object, ...], list[RunInfo]] = {}
        for run in shards:
            families.setdefault(_family(run), []).append(run)
        # the target's own shards of the same runs count too: a shard run into the target (the default store),
        # or merged in an earlier step, left every later merge of the others incomplete
        for spec_name, judging_fp in sorted({(r.spec_name, r.judging_fp) for r in shards}):
            for run in store.find_runs(spec_name=spec_name, judging_fp=judging_fp):
                if run.settings.shard and run.run_id not in copied and _family(run) in families:
                    families[_family(run)].append(run)
        made, incomplete = [], []
        for family, runs in sorted(families.items(), key=lambda kv: str(kv[0])):
            n = int(str(family[-1]))
            by_k: dict[int, RunInfo] = {}  # one completed run per shard (the newest)
            for r in sorted((r for r in runs if r.status == "completed"), key=lambda r: r.started_at or ""):
                by_k[int(str(r.settings.shard).split("/")[0])] = r
            if len(by_k) != n or not all(1 <= k <= n for k in by_k):  # (n from a store: no range of it is made,
                missing = list(islice((k for k in range(1, n + 1) if k not in by_k), 10))  # a run of 1/10**20 took
                more = " and more" if n - len(by_k) > len(missing) else ""                  # 22 GB here)
                incomplete.append(f"{runs[0].spec_name}: shard(s) {', '.join(f'{k}/{n}' for k in missing)}{more} "
                                  "missing or not completed")
                continue
            made.append(_combine(store, list(by_k.values())))
    return Merged(tuple(made), tuple(copied), tuple(incomplete), len(sources))


def _combine(store: Store, runs: list[RunInfo]) -> str:
    parts = sorted(runs, key=lambda r: int(str(r.settings.shard).split("/")[0]))
    ids = [r.run_id for r in parts]
    case_ids = store.case_ids_of(ids)
    first = parts[0]
    run_id = run_id_for((first.spec_name, first.spec_version), first.judging_fp, first.analysis_fp, first.data_sha256,
                        [(j.label, j.model) for j in first.judges], case_ids)
    settings = first.settings
    combined = type(settings)(cases=len(case_ids), model=settings.model, split=settings.split, limit=settings.limit,
                              concurrency=settings.concurrency, replay=settings.replay)
    store.combine(ids, run_id, combined)
    return run_id
