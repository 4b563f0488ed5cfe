"""Past one machine: 4 shard processes, merged, give the report of the run made in one go; Parquet export."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb

from conftest import cli
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig

from geval_spec.store.db import Store


def test_four_shards_merged_report_like_the_run_made_in_one_go(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        whole = make_project(tmp_path / "whole", srv.base_url, n=30, client="openai-http")
        one = cli("run", "demo", cwd=whole)
        assert one.code == 0, one.err
        sharded = make_project(tmp_path / "sharded", srv.base_url, n=30, client="openai-http")
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        procs = [subprocess.Popen([sys.executable, "-m", "geval_spec", "run", "demo", "--shard", f"{k}/4",
                                   "--db", f"shard{k}.duckdb"], cwd=sharded, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for k in range(1, 5)]
        sizes = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            sizes.append(int(out.split(" cases,")[0].split(": ")[-1]))
        assert sum(sizes) == 30 and all(size > 0 for size in sizes)
        merged = cli("merge", *[f"shard{k}.duckdb" for k in range(1, 5)], cwd=sharded)
        assert merged.code == 0, merged.err
        run_id = merged.out.strip().splitlines()[-1]
        assert run_id == one.out.strip().splitlines()[-1]  # the same run, by what it judges
        for fmt in ("md", "json", "html"):
            a = cli("report", run_id, "--format", fmt, "--out", "-", "--exit-zero", cwd=whole).out
            b = cli("report", run_id, "--format", fmt, "--out", "-", "--exit-zero", cwd=sharded).out
            assert a == b, fmt
        assert cli("merge", "shard1.duckdb", "shard2.duckdb", "--db", "partial.duckdb", cwd=sharded).code == 2


def test_export_parquet_writes_the_run_s_tables(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=6, client="openai-http")
        res = cli("run", "demo", cwd=root)
        run_id = res.out.strip().splitlines()[-1]
        out = cli("export", run_id, "--parquet", "out", cwd=root)
        assert out.code == 0, out.err
        con = duckdb.connect()
        assert con.execute(f"SELECT count(*) FROM '{root / 'out' / 'cases.parquet'}'").fetchone() == (6,)
        assert con.execute(f"SELECT count(*) FROM '{root / 'out' / 'judgments.parquet'}' WHERE valid").fetchone() == (6,)
        assert con.execute(f"SELECT count(*) FROM '{root / 'out' / 'responses.parquet'}' WHERE ok").fetchone() == (6,)
        assert cli("export", run_id, cwd=root).code == 2
        # a folder that is a file, a table file that is a folder, a folder that cannot be made: exit 2 (once 70)
        (root / "afile").write_text("x")
        (root / "d" / "cases.parquet").mkdir(parents=True)
        for target, words in (("afile", "it is a file, not a folder"), ("d", "is a directory"),
                              ("/proc/nothere", "cannot write Parquet file")):
            bad = cli("export", run_id, "--parquet", target, cwd=root)
            assert bad.code == 2 and words in bad.err and "internal error" not in bad.err, (target, bad.err)


def test_shards_whose_cases_share_a_prompt_merge_into_the_run_made_in_one_go(tmp_path):
    """Two cases in different shards render the same prompt (identical outputs are common in real data): each
    shard asked it once; merging them once failed on the run's request key (exit 70)."""
    import json

    from geval_spec.runner.run import in_shard

    with FakeOpenAI(ServerConfig()) as srv:
        roots = [make_project(tmp_path / name, srv.base_url, n=20, client="openai-http") for name in ("one", "two")]
        ids = [f"c{i:03d}" for i in range(20)]
        a = next(i for i in range(20) if in_shard(ids[i], (1, 2)))
        b = next(i for i in range(20) if in_shard(ids[i], (2, 2)))
        for root in roots:
            path = root / "specs" / "data" / "cases.jsonl"
            rows = [json.loads(line) for line in path.read_text().splitlines()]
            rows[b].update(src=rows[a]["src"], cand=rows[a]["cand"])
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        whole, sharded = roots
        one = cli("run", "demo", cwd=whole)
        assert one.code == 0, one.err
        for k in (1, 2):
            assert cli("run", "demo", "--shard", f"{k}/2", "--db", f"shard{k}.duckdb", cwd=sharded).code == 0
        merged = cli("merge", "shard1.duckdb", "shard2.duckdb", cwd=sharded)
        assert merged.code == 0, merged.err
        run_id = merged.out.strip().splitlines()[-1]
        assert run_id == one.out.strip().splitlines()[-1]
        for fmt in ("md", "json"):
            assert cli("report", run_id, "--format", fmt, "--out", "-", "--exit-zero", cwd=whole).out == \
                cli("report", run_id, "--format", fmt, "--out", "-", "--exit-zero", cwd=sharded).out, fmt


def test_a_ref_means_the_merged_run_not_a_shard(tmp_path):
    """After merge, the store holds the shards' runs too: `report REF` once reported the newest shard (part of the
    cases). A store holding only shards says so."""
    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=20, client="openai-http")
        for k in (1, 2):
            assert cli("run", "demo", "--shard", f"{k}/2", "--db", f"shard{k}.duckdb", cwd=root).code == 0
        only = cli("report", "demo", "--db", "shard2.duckdb", "--out", "-", cwd=root)
        assert only.code == 2 and "only shards of demo" in only.err and "geval-spec merge" in only.err
        merged = cli("merge", "shard1.duckdb", "shard2.duckdb", "./shard1.duckdb", cwd=root)
        run_id = merged.out.strip().splitlines()[-1]
        # a store named twice is read once (it said "copied 3 run(s) from 3 store(s)" for the two shards' runs)
        assert merged.out.startswith("copied 2 run(s) from 2 store(s)"), merged.out
        by_ref = cli("report", "demo", "--format", "json", "--out", "-", "--exit-zero", cwd=root).out
        assert json.loads(by_ref)["run"]["id"] == run_id


def test_a_shard_merged_while_incomplete_merges_once_it_is_finished(tmp_path):
    """A shard interrupted (or still running), merged, then resumed and finished: the first copy's status and rows
    stayed in the merged store, and the set never merged (exit 2 for good)."""
    from geval_spec.store.db import Store

    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=20, client="openai-http")
        for k in (1, 2):
            assert cli("run", "demo", "--shard", f"{k}/2", "--db", f"s{k}.duckdb", cwd=root).code == 0
        with Store(root / "s1.duckdb") as store:
            store.con.execute("UPDATE runs SET status = 'interrupted'")
            store.con.execute("DELETE FROM judgments WHERE case_id IN (SELECT min(case_id) FROM judgments)")
        first = cli("merge", "s1.duckdb", "s2.duckdb", cwd=root)
        assert first.code == 2 and "1/2 missing or not completed" in first.err
        with Store(root / "s1.duckdb") as store:
            store.con.execute("UPDATE runs SET status = 'completed'")
        assert cli("run", "demo", "--shard", "1/2", "--db", "s1.duckdb", cwd=root).code == 0  # finishes it
        second = cli("merge", "s1.duckdb", "s2.duckdb", cwd=root)
        assert second.code == 0, second.err
        run_id = second.out.strip().splitlines()[-1]
        report = json.loads(cli("report", run_id, "--format", "json", "--out", "-", "--exit-zero", cwd=root).out)
        assert report["cases"]["n"] == 20 and report["cases"]["missing"] == 0 and report["cases"]["valid"] == 20


def test_shards_made_with_other_case_options_are_not_combined(tmp_path):
    """Shards of --split dev and --split test were combined into a run no unsharded run looks like; shards with and
    without --limit failed on a duplicate key (exit 70)."""
    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=30, client="openai-http")
        assert cli("run", "demo", "--shard", "1/2", "--split", "dev", "--db", "a.duckdb", cwd=root).code == 0
        assert cli("run", "demo", "--shard", "2/2", "--split", "test", "--db", "b.duckdb", cwd=root).code == 0
        mixed = cli("merge", "a.duckdb", "b.duckdb", "--db", "m.duckdb", cwd=root)
        assert mixed.code == 2 and "missing or not completed" in mixed.err
        assert cli("run", "demo", "--shard", "1/2", "--db", "c.duckdb", cwd=root).code == 0
        assert cli("run", "demo", "--shard", "1/2", "--limit", "10", "--db", "d.duckdb", cwd=root).code == 0
        assert cli("run", "demo", "--shard", "2/2", "--db", "e.duckdb", cwd=root).code == 0
        limited = cli("merge", "c.duckdb", "d.duckdb", "e.duckdb", "--db", "n.duckdb", cwd=root)
        assert limited.code == 2 and "Traceback" not in limited.err  # the --limit set lacks its 2/2
        whole = cli("run", "demo", cwd=root).out.strip().splitlines()[-1]
        assert whole in limited.out  # the complete set became the run made in one go


def test_an_empty_shard_is_a_completed_empty_run_and_the_set_merges(tmp_path):
    """With few cases (or --split test) some shards get none: such a shard exited 2, so the set could never be
    merged although every case was judged."""
    from geval_spec.runner.run import in_shard

    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=6, client="openai-http")
        ids = [f"c{i:03d}" for i in range(6)]
        empty = [k for k in range(1, 9) if not any(in_shard(c, (k, 8)) for c in ids)]
        assert empty, "some of 8 shards of 6 cases are empty"
        for k in range(1, 9):
            res = cli("run", "demo", "--shard", f"{k}/8", "--db", f"s{k}.duckdb", cwd=root)
            assert res.code == 0, res.err
            if k in empty:
                assert "no cases fall in this shard" in res.out + res.err
        merged = cli("merge", *[f"s{k}.duckdb" for k in range(1, 9)], cwd=root)
        assert merged.code == 0, merged.err
        whole = make_project(tmp_path / "whole", srv.base_url, n=6, client="openai-http")
        assert merged.out.strip().splitlines()[-1] == cli("run", "demo", cwd=whole).out.strip().splitlines()[-1]


def test_a_shard_holding_every_case_merges_without_losing_it(tmp_path):
    """One shard held every case (the other none): its run id is the merged run's, and merge deleted it while
    making the merged run (exit 0, and 'no run' after). Empty shards of sets made with other options (--limit)
    also shared one id, so one set looked finished and the other lacked its shard."""
    from geval_spec.runner.run import in_shard

    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=2, client="openai-http")
        k_all = 1 if in_shard("c000", (1, 2)) else 2  # the shard of c000 (with --limit 1: every case)
        runs = {}
        for limit in ("1", "2"):
            for k in (1, 2):
                res = cli("run", "demo", "--shard", f"{k}/2", "--limit", limit, "--db", f"l{limit}s{k}.duckdb",
                          cwd=root)
                assert res.code == 0, res.err
                runs[(limit, k)] = res.out.strip().splitlines()[-1]
        empty = 3 - k_all
        assert runs[("1", empty)] != runs[("2", empty)] or in_shard("c001", (empty, 2))
        merged = cli("merge", "l1s1.duckdb", "l1s2.duckdb", cwd=root)
        assert merged.code == 0, merged.err
        run_id = merged.out.strip().splitlines()[-1]
        report = json.loads(cli("report", run_id, "--format", "json", "--out", "-", "--exit-zero", cwd=root).out)
        assert report["cases"]["n"] == 1 and report["cases"]["valid"] == 1


def test_shard_counts_are_bounded(tmp_path):
    """`run --shard 1/99999999999999999999` was accepted, and merging its store built a set of every shard number
    (killed at 22 GB); a store holding such a shard (made before the bound) merges with a short message now."""
    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=4, client="openai-http")
        for text in ("1/99999999999999999999", "1/10001", "\u00b9/2", "1/\u0662"):
            res = cli("run", "demo", "--shard", text, "--dry-run", cwd=root)
            assert res.code == 2 and "--shard" in res.err and "Traceback" not in res.err, (text, res.err)
        assert cli("run", "demo", "--shard", "1/10000", "--db", "a.duckdb", cwd=root).code == 0
        with Store(root / "a.duckdb") as store:
            store.con.execute("UPDATE runs SET options_json = replace(options_json, '1/10000', "
                              "'1/99999999999999999999')")
        res = cli("merge", "a.duckdb", "--db", "m.duckdb", cwd=root)
        assert res.code == 2 and "2/99999999999999999999" in res.err and "and more missing" in res.err, res.err


def test_shards_already_in_the_target_store_count_toward_the_set(tmp_path):
    """A shard run into the default store, the other into a file of its own: ``merge b2.duckdb`` said shard 1/2
    was missing, though the target held it, and so did merging in steps (two shards, then the third)."""
    with FakeOpenAI(ServerConfig()) as srv:
        whole = make_project(tmp_path / "whole", srv.base_url, n=24, client="openai-http")
        one = cli("run", "demo", cwd=whole)
        assert one.code == 0, one.err
        root = make_project(tmp_path / "p", srv.base_url, n=24, client="openai-http")
        assert cli("run", "demo", "--shard", "1/2", cwd=root).code == 0  # into .geval/results.duckdb
        assert cli("run", "demo", "--shard", "2/2", "--db", "b2.duckdb", cwd=root).code == 0
        merged = cli("merge", "b2.duckdb", cwd=root)
        assert merged.code == 0, merged.err
        assert merged.out.strip().splitlines()[-1] == one.out.strip().splitlines()[-1]
        report = json.loads(cli("report", "demo", "--format", "json", "--out", "-", "--exit-zero", cwd=root).out)
        assert report["cases"]["n"] == 24 and report["cases"]["missing"] == 0

        for k in (1, 2, 3):
            assert cli("run", "demo", "--shard", f"{k}/3", "--db", f"t{k}.duckdb", cwd=root).code == 0
        first = cli("merge", "t1.duckdb", "t2.duckdb", "--db", "m.duckdb", cwd=root)
        assert first.code == 2 and "3/3 missing or not completed" in first.err, first.err
        second = cli("merge", "t3.duckdb", "--db", "m.duckdb", cwd=root)
        assert second.code == 0, second.err
        assert second.out.strip().splitlines()[-1] == one.out.strip().splitlines()[-1]
