"""One thread that does all of a run's store work, in short sessions, so other processes get their turn.

A run hands the gate operations (store these planned requests, write these
responses, these judgments; look up these answers). The gate's thread runs
them in batches, each in one :class:`~geval_spec.store.db.Store` session
(planned requests and their findings first, then responses, then judgments,
then the operations in the order given: a judgment is never stored before
the findings of its case, which a later run's reuse copies with it),
and closes the file between batches: at most about one session per
``interval`` seconds (the first too, an interval after the gate starts, so
that a run's first requests go out without it), sooner when someone waits
for an answer. Meanwhile
``report``, a second run or a plain DuckDB reader can open the file. Responses are in the run's journal before
they reach the gate, so a kill loses nothing.

After a session that fails, the gate writes nothing more: the run stops
with the error at its next call, and its journal stays for the next run.

Sessions run within a DuckDB memory limit (GEVAL_STORE_MEMORY). A store can
outgrow it (DuckDB holds the key indexes a statement touches in memory): the
store runs a statement or transaction that runs out of memory again with
twice the limit (:class:`~geval_spec.store.db.Store`), and the run's later
sessions keep it, rather than failing the run.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

from geval_spec.errors import InputError, Problem, StoreError
from geval_spec.judge.types import Judgment
from geval_spec.plugins import Finding
from geval_spec.store.db import Store
from geval_spec.store.sql import MEMORY_FLOOR, memory_bytes
from geval_spec.store.records import Planned, ResponseRecord

T = TypeVar("T")
Operation = Callable[[Store], Any]

INTERVAL = 2.0  # seconds between sessions while a run only writes (GEVAL_STORE_INTERVAL)
MAX_BATCH = 5000  # operations per session
# DuckDB memory of a run's store sessions. Unlimited (80% of RAM), the sessions' peak grew with the tables (their
# key indexes and buffers) and, since the allocator keeps what it had, so did the run's RSS: about 2.7 KB per case
# (BENCHMARKS.md). Past the limit DuckDB evicts or spills to disk.
MEMORY_LIMIT = "128MB"  # (GEVAL_STORE_MEMORY)


def store_settings() -> tuple[float, str]:
    """(seconds between sessions, DuckDB memory of a session) from GEVAL_STORE_INTERVAL and GEVAL_STORE_MEMORY."""
    interval_text = os.environ.get("GEVAL_STORE_INTERVAL")
    memory = os.environ.get("GEVAL_STORE_MEMORY", MEMORY_LIMIT)
    interval = INTERVAL
    if interval_text is not None:
        try:
            interval = float(interval_text)
        except ValueError:
            interval = -1.0
        if not 0 <= interval <= 3600:
            raise InputError(problems=[Problem(
                f"GEVAL_STORE_INTERVAL={interval_text!r} is not a number of seconds from 0 to 3600")])
    amount = memory_bytes(memory)
    if amount is None:
        raise InputError(problems=[Problem(f"GEVAL_STORE_MEMORY={memory!r} is not an amount of memory",
                                           hint="for example 128MB or 1GB")])
    if amount < MEMORY_FLOOR:
        raise InputError(problems=[Problem(f"GEVAL_STORE_MEMORY={memory!r} is less than the 4MB a store's session "
                                           "needs", hint="for example 128MB or 1GB")])
    return interval, memory.strip()


class StoreGate:
    """Runs store operations for one process in batched short sessions (see the module docstring)."""

    def __init__(self, path: Path, interval: float | None = None) -> None:
        env_interval, self.memory_limit = store_settings()
        self.path = path
        self.interval = env_interval if interval is None else interval
        self._ops: deque[tuple[Operation, Future[Any] | None]] = deque()
        self._planned: list[tuple[str, Planned, Mapping[str, Sequence[Finding]]]] = []  # run id, requests, findings
        self._responses: list[ResponseRecord] = []
        self._judgments: dict[str, list[Judgment]] = {}  # run id -> judgments
        self._cond = threading.Condition()
        self._urgent = False
        self._closing = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="geval-store", daemon=True)
        self._thread.start()

    def add_response(self, record: ResponseRecord) -> None:
        """Queue one response; all queued responses go into one insert in the next session."""
        self._raise_if_failed()
        with self._cond:
            self._responses.append(record)
            if len(self._responses) == 1:  # wake the thread only when it may be waiting for work, not per add
                self._cond.notify()

    def add_planned(self, run_id: str, planned: Planned, findings: Mapping[str, Sequence[Finding]]) -> None:
        """Queue a chunk of planned requests (journaled by the run already) and its cases' findings; they are
        written first in the next session."""
        self._raise_if_failed()
        with self._cond:
            self._planned.append((run_id, planned, findings))
            self._cond.notify()

    def add_judgments(self, run_id: str, judgments: list[Judgment]) -> None:
        """Queue judgments of a run (appended to what it has); each takes its case's reuse key from the run's
        cases in the store."""
        self._raise_if_failed()
        with self._cond:
            self._judgments.setdefault(run_id, []).extend(judgments)
            self._cond.notify()

    def put(self, op: Operation) -> None:
        """Queue a write; it is done in the next session."""
        self._raise_if_failed()
        with self._cond:
            self._ops.append((op, None))
            self._cond.notify()

    def call(self, op: Callable[[Store], T]) -> T:
        """Run ``op`` in a session as soon as possible (after what is queued) and return its result."""
        self._raise_if_failed()
        future: Future[Any] = Future()
        with self._cond:
            self._ops.append((op, future))
            self._urgent = True
            self._cond.notify()
        result: T = future.result()
        return result

    def nudge(self) -> None:
        """Start the next session now instead of after the interval (without waiting for it)."""
        with self._cond:
            self._urgent = True
            self._cond.notify()

    def flush(self) -> None:
        """Wait until everything queued so far is written."""
        self.call(lambda store: None)

    def close(self) -> None:
        """Write what is queued, stop the thread; raise if a write failed."""
        with self._cond:
            self._closing = True
            self._urgent = True
            self._cond.notify()
        self._thread.join()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise StoreError(f"cannot write to the results database: {self._error}")

    def _loop(self) -> None:
        # the first session too waits out the interval (or a call): a run's first requests go out meanwhile, not
        # slowed by it (NumPy's import: see Store.insert)
        last = time.monotonic()
        while True:
            with self._cond:
                while not self._pending() and not self._closing:
                    self._cond.wait()
                if not self._pending() and self._closing:
                    return
                deadline = last + self.interval  # every add notifies: wait out the interval, not just the next add
                while not self._urgent and not self._closing:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(timeout=remaining)
                batch = [self._ops.popleft() for _ in range(min(len(self._ops), MAX_BATCH))]
                planned, self._planned = self._planned, []
                responses, self._responses = self._responses, []
                judgments, self._judgments = self._judgments, {}
                self._urgent = False
            last = time.monotonic()
            self._run(planned, responses, judgments, batch)

    def _pending(self) -> bool:
        return bool(self._ops or self._planned or self._responses or self._judgments)

    def _run(self, planned: list[tuple[str, Planned, Mapping[str, Sequence[Finding]]]],
             responses: list[ResponseRecord], judgments: dict[str, list[Judgment]],
             batch: list[tuple[Operation, Future[Any] | None]]) -> None:
        if self._error is not None:  # after a failed session nothing more is written: its planned requests and
            self._fail(batch)        # their findings are lost to this run (the journal keeps the requests and the
            return                   # answers), and a judgment must not be stored without its case's findings
        try:
            with Store(self.path, recover=False, memory_limit=self.memory_limit, vacuum=False) as store:
                try:
                    store.write_planned([chunk for _, chunk, _ in planned])
                    found: dict[str, dict[str, Sequence[Finding]]] = {}
                    for run_id, _, findings in planned:
                        found.setdefault(run_id, {}).update(findings)
                    for run_id, findings in found.items():
                        store.save_findings(run_id, findings, replace_all=False)
                    store.write_responses(responses)
                    for run_id, queued in judgments.items():
                        store.save_judgments(run_id, queued, replace_all=False, keys_of_cases=True)
                    for op, future in batch:  # last: an operation sees everything queued before it
                        try:
                            result = op(store)
                        except BaseException as exc:
                            if future is None:
                                raise
                            future.set_exception(exc)
                        else:
                            if future is not None:
                                future.set_result(result)
                finally:  # a statement that ran out of memory raised the limit: the later sessions start there
                    if store.memory_limit is not None:
                        self.memory_limit = store.memory_limit
        except BaseException as exc:  # surfaced to the run on its next put, call or close
            self._error = exc
            self._fail(batch)

    def _fail(self, batch: list[tuple[Operation, Future[Any] | None]]) -> None:
        for _, future in batch:
            if future is not None and not future.done():
                future.set_exception(StoreError(f"cannot use the results database: {self._error}"))
