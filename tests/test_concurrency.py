"""A run shares its store: one Ctrl-C stops it cleanly, readers and a second run get in while it writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from conftest import cli
from e2e_helpers import SPEC, make_project
from openai_server import FakeOpenAI, ServerConfig, candidate_of


def start_run(root: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-m", "geval_spec", "run", *args], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_one_ctrl_c_stops_sending_keeps_what_arrived_and_the_next_run_sends_only_the_rest(tmp_path):
    n = 40
    with FakeOpenAI(ServerConfig(latency=1.0)) as srv:
        root = make_project(tmp_path, srv.base_url, n=n, client="openai-http")
        proc = start_run(root, "demo", "--concurrency", "4")
        wait_for(lambda: srv.state.ok >= 6)
        proc.send_signal(signal.SIGINT)
        sent_at = time.monotonic()
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 130, err
        assert time.monotonic() - sent_at < 5
        assert "stopping:" in err and "in flight, press Ctrl-C again to abandon them" in err
        assert "Traceback" not in err
        received = srv.state.ok
        with duckdb.connect(str(root / ".geval" / "results.duckdb"), read_only=True) as con:
            stored = con.execute("SELECT count(*) FROM answers").fetchone()[0]
            status = con.execute("SELECT status FROM runs").fetchall()
        assert stored == received and status == [("interrupted",)]
        before = Counter(candidate_of(b) for b in srv.state.bodies)
        res = cli("run", "demo", "--concurrency", "8", cwd=root)
        assert res.code == 0, res.err
        after = Counter(candidate_of(b) for b in srv.state.bodies)
        assert sum(after.values()) - sum(before.values()) == n - received  # only the rest is sent
        assert all(count == 1 for count in after.values())


def test_readers_and_a_second_run_get_in_while_a_run_writes(tmp_path):
    with FakeOpenAI(ServerConfig(latency=0.25)) as srv:
        root = make_project(tmp_path, srv.base_url, n=8, client="openai-http")
        first = cli("run", "demo", cwd=root)
        assert first.code == 0, first.err
        second_spec = SPEC.format(name="other", method="logprobs", api_base=srv.base_url, client="openai-http",
                                  scoring_extra="", temperature=0, timeout=10, max_retries=4)
        (root / "specs" / "other.yaml").write_text(second_spec.replace("Read the source.", "Read the source again."))
        (root / "specs" / "demo.yaml").write_text((root / "specs" / "demo.yaml").read_text()
                                                  .replace("Read the source.", "Read the source first."))
        big = make_project(tmp_path / "big", srv.base_url, n=120, client="openai-http")
        (root / "specs" / "data" / "cases.jsonl").write_text((big / "specs" / "data" / "cases.jsonl").read_text())
        db = root / ".geval" / "results.duckdb"
        a = start_run(root, "demo", "--concurrency", "4")
        b = start_run(root, "other", "--concurrency", "4")
        wait_for(lambda: srv.state.ok >= 30)
        counts = []
        for _ in range(3):  # a plain DuckDB reader, between the runs' short sessions
            for _ in range(500):
                try:
                    with duckdb.connect(str(db), read_only=True) as con:
                        counts.append(con.execute("SELECT count(*) FROM answers").fetchone()[0])
                    break
                except duckdb.Error:
                    time.sleep(0.01)
            time.sleep(1.5)
        assert len(counts) == 3 and counts[0] < counts[-1]  # it saw the runs' answers arrive
        report = cli("report", first.out.strip().splitlines()[-1], "--out", "-", "--exit-zero", cwd=root)
        assert report.code == 0, report.err  # report gets in too
        for proc in (a, b):
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        with duckdb.connect(str(db), read_only=True) as con:
            done = con.execute("SELECT spec_name, status FROM runs ORDER BY started_at").fetchall()
        assert sorted(done[1:]) == [("demo", "completed"), ("other", "completed")]



def test_a_stream_that_stops_while_a_chunk_is_being_planned_ends():
    """The workers end (here on an error that stops the run, as an unreachable judge's does) while the planner waits
    with the queue full: the producer, cancelled, must not wait for room in a queue nobody reads (a run against an
    unreachable judge, stopped with Ctrl-C, hung there until kill -9)."""
    import asyncio

    import pytest

    from geval_spec.runner.execute import Executor, Progress, Settings

    class Route:
        def pace(self):
            return None

    executor = Executor(Route(), "run_x", None, lambda record: None, Settings(concurrency=2), Progress())
    planner_waits = asyncio.Event()

    async def one(request):
        await planner_waits.wait()  # answered once the planner is stuck with the queue full ...
        raise RuntimeError("the judge cannot be reached")  # ... and the run stops

    executor._one = one

    async def feed():
        for i in range(6):  # two in flight, four in the queue: full
            yield f"r{i}"
        planner_waits.set()
        await asyncio.Event().wait()  # the next chunk's planning never ends (a store session being waited for)
        yield "never"

    async def main():
        await asyncio.wait_for(executor.stream(feed(), lambda outcome: None), timeout=5)

    with pytest.raises(RuntimeError, match="cannot be reached"):
        asyncio.run(main())


@pytest.mark.parametrize("concurrency", [1, 2, 5, 64])
@pytest.mark.parametrize("extra", [0, 1, 3])
def test_every_request_of_the_feed_goes_out_once_in_order(concurrency, extra):
    """The producer refills the queue once half of it has gone out (not a request at a time): whatever the feed's
    length against the queue's size (2 x concurrency), every request is sent once, in the feed's order, with at
    most ``concurrency`` in flight, and every outcome reaches on_outcome."""
    import asyncio
    import random

    from geval_spec.runner.execute import Executor, Progress, Settings

    class Route:
        def pace(self):
            return None

    size = max(2, 2 * concurrency)
    for n in (0, 1, size - 1, size, size + 1, 3 * size + extra, 7 * size // 2 + extra):
        executor = Executor(Route(), "run_x", None, lambda record: None, Settings(concurrency=concurrency),
                            Progress())
        started, outcomes, flying = [], [], [0, 0]
        rng = random.Random(n * 100 + concurrency)

        async def one(request):
            started.append(request)
            flying[0] += 1
            flying[1] = max(flying[1], flying[0])
            for _ in range(rng.randrange(3)):
                await asyncio.sleep(0)
            flying[0] -= 1
            return request

        executor._one = one

        async def feed(n=n):
            for i in range(n):
                if rng.random() < 0.2:
                    await asyncio.sleep(0)  # planning a chunk
                yield i

        asyncio.run(asyncio.wait_for(executor.stream(feed(), outcomes.append), timeout=10))  # (a lost wake-up: hung)
        assert started == list(range(n)) and sorted(outcomes) == list(range(n)), (concurrency, n)
        assert flying[1] <= concurrency
