"""The store's judgments, TCVA verdicts and language findings: a part of :class:`~geval_spec.store.db.Store`.

Mixed into the store class (which holds the connection and the
transaction helpers); kept apart so each module stays one reading.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from geval_spec.judge.types import NO_DETAILS, Details, Judgment, Verdict
from geval_spec.plugins import Finding
from geval_spec.store.sql import IN, KEY_OF_CASE, TRANSPORT_FAILED, dumps, loads


class JudgmentTables:
    """Judgments, verdicts and findings of runs (methods of :class:`~geval_spec.store.db.Store`)."""

    con: Any

    if TYPE_CHECKING:
        def transaction(self, work: Callable[[Any], None]) -> None: ...

        def insert(self, cursor: Any, table: str, rows: Iterable[tuple[Any, ...]], ignore: bool = False,
                   lists: bool = False, last: str | None = None) -> None: ...

        def insert_new(self, work: Callable[[Any, bool], None]) -> None: ...

    # -- judgments ---------------------------------------------------------------------
    def _judgment_rows(self, run_id: str, judgments: Sequence[Judgment], case_keys: Mapping[str, str] | None
                       ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        rows, vrows = [], []
        keys = case_keys or {}
        for j in judgments:
            dist = None if j.distribution is None else {str(k): v for k, v in j.distribution.items()}
            details = j.details if j.verdicts is None else replace(j.details, statements=len(j.verdicts))
            rows.append((run_id, j.case_id, j.judge, j.method, j.score, j.valid, j.reason, dumps(dist), j.valid_mass,
                         dumps(None if j.samples is None else list(j.samples)), j.spread,
                         dumps(details.to_json()), keys.get(j.case_id)))
            for i, v in enumerate(j.verdicts or ()):
                vrows.append((run_id, j.case_id, j.judge, i, v.statement, v.verdict, v.reason, v.support))
        return rows, vrows

    def save_judgments(self, run_id: str, judgments: Sequence[Judgment],
                       case_keys: Mapping[str, str] | None = None, replace_all: bool = True,
                       keys_of_cases: bool = False) -> None:
        """Store judgments (all of the run's, replacing any before, unless ``replace_all`` is False).

        Each judgment's case key is ``case_keys``'s for its case, or with ``keys_of_cases`` the one stored with
        the run's case (``run_cases.case_key``, which :meth:`create_run` wrote): a run then need not hold its
        cases' keys while it runs."""
        rows, vrows = self._judgment_rows(run_id, judgments, case_keys)
        last = KEY_OF_CASE if keys_of_cases else None

        def work(c: Any, ignore: bool = not replace_all) -> None:
            if replace_all:
                c.execute("DELETE FROM judgments WHERE run_id = ?", [run_id])
                c.execute("DELETE FROM verdicts WHERE run_id = ?", [run_id])
            self.insert(c, "judgments", rows, ignore=ignore, last=last)
            self.insert(c, "verdicts", vrows, ignore=ignore)

        if replace_all:
            self.transaction(work)
        else:  # added to a run: a case is judged once per run, so a key rarely refuses a row
            self.insert_new(work)

    def saved_gate(self, run_id: str, key: str) -> str | None:
        """The gate saved for a run by :meth:`save_gate` under the same ``key`` (the code that judged it), or None."""
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", [f"gate:{run_id}"]).fetchone()
        if row is None:
            return None
        saved = loads(row[0])
        return saved.get("gate") if isinstance(saved, dict) and saved.get("key") == key else None

    def save_gate(self, run_id: str, key: str, gate: str) -> None:
        """Keep a run's gate (its JSON) for an unchanged rerun, which then neither reads the judgments nor
        computes it again; ``key`` names the code that judged it. A run's judgments change only while it is
        not finished, and a rerun that judges anything saves the gate again."""
        self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                         [f"gate:{run_id}", dumps({"key": key, "gate": gate})])

    def reuse_judgments(self, run_id: str, judges: Sequence[str], case_keys: Mapping[str, str]) -> set[str]:
        """Copy into ``run_id`` the newest stored judgments with the same case keys and judges; the cases copied.

        A case key covers everything a case's judgment depends on, its id included (see
        :func:`geval_spec.runner.run.case_keys`), so a rerun of an unchanged spec neither sends nor parses
        anything for these cases: its judgments, verdicts and findings are copied inside DuckDB. A judgment is
        stored only once its case is complete, so one from a run stopped midway counts; one that failed in
        transport ("request failed") does not: its case is asked again.
        """
        if not case_keys or not self.con.execute(f"SELECT EXISTS (SELECT 1 FROM judgments WHERE run_id <> ? AND "
                                                 f"judge {IN})", [run_id, list(judges)]).fetchone()[0]:
            return set()  # nothing to reuse (a store's first run of these judges): the cases' keys are not sent
        rows = self.con.execute(
            "SELECT case_key, judge, run_id FROM (SELECT j.case_key, j.judge, j.run_id, row_number() OVER "
            "(PARTITION BY j.case_key, j.judge ORDER BY r.started_at DESC, j.run_id DESC) AS k FROM judgments j "
            f"JOIN runs r ON r.run_id = j.run_id WHERE j.case_key {IN} AND j.run_id <> ? AND j.judge {IN} "
            f"AND NOT ({TRANSPORT_FAILED.replace('valid', 'j.valid').replace('reason', 'j.reason')})) WHERE k = 1",
            [list(case_keys.values()), run_id, list(judges)]).fetchall()
        have: dict[str, set[str]] = {}
        for key, judge, _ in rows:
            have.setdefault(key, set()).add(judge)
        chosen = [(key, judge, src) for key, judge, src in rows if have[key] >= set(judges)]
        if not chosen:
            return set()
        keys, names, sources = ([row[i] for row in chosen] for i in range(3))
        pick = ("(SELECT unnest(?::VARCHAR[]) AS case_key, unnest(?::VARCHAR[]) AS judge, "
                "unnest(?::VARCHAR[]) AS src) p")
        args = [run_id, keys, names, sources]

        def work(c: Any) -> None:
            c.execute(f"INSERT OR IGNORE INTO judgments SELECT ?, j.case_id, j.judge, j.method, j.score, j.valid, "
                      f"j.reason, j.distribution_json, j.valid_mass, j.samples_json, j.spread, j.details_json, "
                      f"j.case_key FROM {pick} JOIN judgments j ON j.run_id = p.src AND j.case_key = p.case_key "
                      "AND j.judge = p.judge", args)
            c.execute(f"INSERT OR IGNORE INTO verdicts SELECT ?, v.case_id, v.judge, v.idx, v.statement, v.verdict, "
                      f"v.reason, v.support FROM {pick} JOIN judgments j ON j.run_id = p.src "
                      "AND j.case_key = p.case_key AND j.judge = p.judge JOIN verdicts v ON v.run_id = j.run_id "
                      "AND v.case_id = j.case_id AND v.judge = j.judge", args)
            c.execute(f"INSERT OR IGNORE INTO findings SELECT DISTINCT ?, f.case_id, f.idx, f.kind, f.message, "
                      f"f.start_pos, f.end_pos, f.text FROM {pick} JOIN run_cases rc ON rc.run_id = p.src "
                      "AND rc.case_key = p.case_key JOIN findings f ON f.run_id = rc.run_id AND f.case_id = rc.case_id",
                      args)
            # the requests that made them, so that export, the views and the SQL of docs/results.md find their
            # answers (a resumed run's cases judged before the stop had none: its cassette could not replay it)
            c.execute(f"INSERT OR IGNORE INTO run_requests SELECT ?, rr.request_hash, rr.case_id, rr.judge, "
                      f"rr.purpose, rr.sample, rr.position FROM {pick} JOIN judgments j ON j.run_id = p.src "
                      "AND j.case_key = p.case_key AND j.judge = p.judge JOIN run_requests rr ON rr.run_id = j.run_id "
                      "AND rr.case_id = j.case_id AND rr.judge = j.judge", args)

        self.transaction(work)
        by_key = {v: k for k, v in case_keys.items()}
        return {by_key[k] for k in keys}

    def judgment_counts(self, run_id: str) -> tuple[int, int, list[tuple[str, int]], tuple[str, ...]]:
        """(valid, invalid, why invalid with counts, methods) of a run's judgments, counted in the store."""
        valid, invalid = self.con.execute("SELECT count(*) FILTER (WHERE valid), count(*) FILTER (WHERE NOT valid) "
                                          "FROM judgments WHERE run_id = ?", [run_id]).fetchone()
        reasons = self.con.execute(
            "SELECT split_part(coalesce(reason, 'invalid'), ' (after', 1) AS why, count(*) AS n FROM judgments "
            "WHERE run_id = ? AND NOT valid GROUP BY why ORDER BY n DESC, why", [run_id]).fetchall()
        methods = self.con.execute("SELECT DISTINCT method FROM judgments WHERE run_id = ? ORDER BY method",
                                   [run_id]).fetchall()
        return valid, invalid, [(r[0], r[1]) for r in reasons], tuple(m[0] for m in methods)

    def judgments(self, run_id: str, lean: bool = False, distributions: bool = True) -> list[Judgment]:
        """The run's judgments in case order. ``lean``: without the logprob distributions and details (except
        TCVA's, which say whether verdicts were given), for what needs the scores only (the gate after a run:
        at 100k cases the full objects would be the largest thing the run holds). ``distributions=False``:
        without the logprob distributions only (no analysis reads them; parsing them was about a third of
        reading a run's judgments)."""
        vmap: dict[tuple[str, str], list[Verdict]] = {}
        for case_id, judge, statement, verdict, reason, support in self.con.execute(
                "SELECT case_id, judge, statement, verdict, reason, support FROM verdicts WHERE run_id = ? "
                "ORDER BY case_id, judge, idx", [run_id]).fetchall():
            vmap.setdefault((case_id, judge), []).append(Verdict(statement, verdict, reason or "", support or ""))
        out = []
        result = self.con.execute(
            "SELECT j.case_id, j.judge, j.method, j.score, j.valid, j.reason, "
            + ("NULL, " if lean or not distributions else "j.distribution_json, ")
            + "j.valid_mass, j.samples_json, j.spread, "
            + ("CASE WHEN j.method = 'verdicts' THEN j.details_json END" if lean else "j.details_json")
            + " FROM judgments j LEFT JOIN run_cases c "
            "ON c.run_id = j.run_id AND c.case_id = j.case_id WHERE j.run_id = ? ORDER BY c.position, j.judge",
            [run_id])
        names: dict[Any, Any] = {}  # each judge, method and reason once (DuckDB makes a str for every row's: 11 MB
        once = names.setdefault     # at 100,000 judgments)
        for row in _rows(result):
            case_id, judge, method, score, valid, reason, dist, mass, samples, spread, details_json = row
            judge, method = once(judge, judge), once(method, method)
            if reason is not None:
                reason = once(reason, reason)
            dist_v = loads(dist)
            details = Details.from_json(loads(details_json)) if details_json is not None else NO_DETAILS
            out.append(Judgment(
                case_id=case_id, judge=judge, method=method, score=score, valid=bool(valid), reason=reason,
                distribution=None if dist_v is None else {int(k): v for k, v in dist_v.items()}, valid_mass=mass,
                samples=None if samples is None else tuple(loads(samples)), spread=spread,
                verdicts=tuple(vmap.get((case_id, judge), ())) if details.statements is not None else None,
                details=details))
        return out

    def save_findings(self, run_id: str, findings: Mapping[str, Sequence[Finding]], replace_all: bool = True) -> None:
        rows = [(run_id, case_id, i, f.kind, f.message, f.start, f.end, f.text)
                for case_id, items in findings.items() for i, f in enumerate(items)]
        if not rows and not replace_all:
            return

        def work(c: Any) -> None:
            if replace_all:
                c.execute("DELETE FROM findings WHERE run_id = ?", [run_id])
            self.insert(c, "findings", rows, ignore=not replace_all)

        self.transaction(work)

    def findings(self, run_id: str) -> dict[str, tuple[Finding, ...]]:
        out: dict[str, list[Finding]] = {}
        for case_id, kind, message, start, end, text in self.con.execute(
                "SELECT case_id, kind, message, start_pos, end_pos, text FROM findings WHERE run_id = ? "
                "ORDER BY case_id, idx", [run_id]).fetchall():
            out.setdefault(case_id, []).append(Finding(kind, message, start, end, text))
        return {k: tuple(v) for k, v in out.items()}


FETCH_ROWS = 4096  # rows a read takes from DuckDB at a time


def _rows(result: Any) -> Iterator[tuple[Any, ...]]:
    """A query's rows, FETCH_ROWS at a time: a run's 100,000 judgments fetched whole were a list of tuples as large
    as the objects made of them, both held at once at the end of the run (its peak RSS: BENCHMARKS.md, scale)."""
    while rows := result.fetchmany(FETCH_ROWS):
        yield from rows
