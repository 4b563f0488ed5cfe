"""A run killed with SIGKILL at any point loses nothing and resends nothing it received."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from conftest import cli
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig, candidate_of
from geval_spec.store.db import Store


def start_run(root):
    env = dict(os.environ)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-m", "geval_spec", "run", "demo", "--concurrency", "4"], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


@pytest.mark.parametrize("kill_after", [5, 23, 41])
def test_sigkill_midway_then_resume(tmp_path, kill_after):
    n = 60
    with FakeOpenAI(ServerConfig(latency=0.03)) as reference_server:
        ref_root = make_project(tmp_path / "reference", reference_server.base_url, n=n, client="openai-http")
        ref = cli("run", "demo", cwd=ref_root)
        assert ref.code == 0, ref.err
        with Store(ref_root / ".geval" / "results.duckdb") as store:
            expected = {j.case_id: j.score for j in store.judgments(ref.out.strip().splitlines()[-1])}

    with FakeOpenAI(ServerConfig(latency=0.03)) as srv:
        root = make_project(tmp_path / "killed", srv.base_url, n=n, client="openai-http")
        proc = start_run(root)
        deadline = time.monotonic() + 60
        while srv.state.ok < kill_after and time.monotonic() < deadline:
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert proc.returncode == -signal.SIGKILL
        sent_before = srv.state.total
        assert 0 < sent_before < n + 10

        # what the killed run received is kept (the journal is replayed when the store opens)
        with Store(root / ".geval" / "results.duckdb") as store:
            statuses = {r.status for r in store.find_runs()}
            received = {row[0] for row in store.con.execute(
                "SELECT DISTINCT rr.case_id FROM run_requests rr JOIN responses r "
                "ON r.request_hash = rr.request_hash WHERE r.ok").fetchall()}
        assert statuses == {"interrupted"}
        assert len(received) >= kill_after - 4  # at most the in-flight ones can be lost on the wire

        res = cli("run", "demo", "--concurrency", "4", cwd=root)
        assert res.code == 0, res.err
        sent_per_case = Counter(candidate_of(b) for b in srv.state.bodies)
        for case_id in received:
            n_case = int(case_id[1:])
            cand = next(c for c in sent_per_case if c.startswith(f"Summary {n_case} "))
            assert sent_per_case[cand] == 1, f"{case_id}: a received response was requested again"
        run_id = res.out.strip().splitlines()[-1]
        with Store(root / ".geval" / "results.duckdb") as store:
            got = {j.case_id: j.score for j in store.judgments(run_id)}
        assert got == expected
