"""Which stored run a command means, and what its analysis reads: RUN | REF -> :class:`Loaded`.

``RUN`` (a run id) means that run, analysed with the settings stored with it.
``REF`` (a spec reference) means the newest completed run of that spec with
the same judging fingerprint on the same data (a whole run: not one shard of
it, nor a run of ``--split``, ``--limit`` or ``--model`` in place of the spec's
judge), analysed with the spec's
*current* analysis settings: a change of aggregation, splits, bootstrap or
calibration is recomputed from stored judgments without any judge call.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from geval_spec.analysis.frame import Findings, Frame, Source, build_frame
from geval_spec.dataset.cases import file_sha256
from geval_spec.errors import NoStoredRun, Problem, RefError
from geval_spec.judge.types import Judgment
from geval_spec.spec.load import ParsedSpec, ResolvedSpec, load_spec
from geval_spec.spec.project import RUN_ID, Project, project_path
from geval_spec.store.db import Store
from geval_spec.store.records import RunInfo
from geval_spec.values import frozen


@frozen
class Loaded:
    """A stored run read for analysis: its run, cases, judgments and spec."""

    source: Source
    run: RunInfo
    case_ids: tuple[str, ...]
    judgments: tuple[Judgment, ...]
    label: str  # how the user named it
    spec_file: str
    resolved: ResolvedSpec  # the spec as stored with the run (RUN), or the REF's current one
    findings: Findings = field(default_factory=dict)  # case id -> language pre-check findings

    def frame(self, temperature: float | None = None) -> Frame:
        return build_frame(self.source, self.case_ids, self.judgments, temperature=temperature,
                           findings=self.findings)


def source_of_run(run: RunInfo, project: Project) -> Source:
    path = Path(run.data_path)
    return Source(spec=run.resolved.spec, run_id=run.run_id, judging_fp=run.judging_fp, analysis_fp=run.analysis_fp,
                  data_path=path, data_display=project_path(path, project.root), run_data_sha256=run.data_sha256,
                  run_judges=run.labels)


def load(store: Store, project: Project, what: str, lean: bool = False) -> Loaded:
    """The run a RUN id or a spec REF stands for, with what its analysis reads: never the logprob
    distributions (``lean``: the details neither; see :meth:`Store.judgments`)."""
    if RUN_ID.match(what):
        run = store.get_run(what)
        if run is None:
            raise RefError(problems=[Problem(f"no run {what!r} in {store.path}")])
        if run.status != "completed":
            raise RefError(problems=[Problem(f"run {what} is {run.status}; its judgments are incomplete",
                                             hint=f"rerun the spec: geval-spec run {run.spec_ref}")])
        return Loaded(source=source_of_run(run, project), run=run, case_ids=tuple(store.run_case_ids(run.run_id)),
                      judgments=tuple(store.judgments(run.run_id, lean, distributions=False)), label=what,
                      spec_file=run.spec_file, resolved=run.resolved, findings=store.findings(run.run_id))
    parsed = load_spec(project.resolve(what))
    run = newest_run(store, parsed, what)
    source = Source(spec=parsed.spec, run_id=run.run_id, judging_fp=parsed.judging_fp,
                    analysis_fp=parsed.analysis_fp, data_path=parsed.data_path,
                    data_display=project_path(parsed.data_path, project.root),
                    run_data_sha256=run.data_sha256, run_judges=run.labels, key_problem=parsed.key_problem)
    return Loaded(source=source, run=run, case_ids=tuple(store.run_case_ids(run.run_id)),
                  judgments=tuple(store.judgments(run.run_id, lean, distributions=False)), label=what,
                  spec_file=parsed.source.report_name, resolved=parsed.resolved(), findings=store.findings(run.run_id))


def newest_run(store: Store, parsed: ParsedSpec, ref: str | None = None) -> RunInfo:
    """Newest completed run of this judging fingerprint on the current data that is the spec's whole run (see
    :meth:`RunInfo.partial`)."""
    dataset_sha = file_sha256(parsed.data_path)
    runs = store.find_runs(spec_name=parsed.name, judging_fp=parsed.judging_fp, status="completed")
    same_data = [r for r in runs if r.data_sha256 == dataset_sha]
    parts = {r.run_id: r.partial([j.label for j in parsed.spec.panel]) for r in same_data}
    whole = [r for r in same_data if parts[r.run_id] is None]
    if whole:
        return whole[0]
    hint = f"make one: geval-spec run {ref or parsed.name}"
    if any(r.settings.shard is None for r in same_data):  # runs of part of the cases, or by another judge
        kinds = ", ".join(sorted({str(parts[r.run_id]) for r in same_data}))
        raise NoStoredRun(problems=[Problem(
            f"no whole run of {parsed.name} is stored here, only runs of part of its cases or by another judge "
            f"({kinds})", hint=f"{hint}; or name a run id to report that run alone (the newest: "
                               f"{same_data[0].run_id})")])
    if same_data:
        shards = ", ".join(sorted({str(r.settings.shard) for r in same_data}))
        raise NoStoredRun(problems=[Problem(
            f"only shards of {parsed.name} are stored here ({shards}): each holds part of the cases",
            hint="merge the shards' stores into one (geval-spec merge DB...) and report the merged run, or "
                 "name a shard's run id to report that shard alone")])
    if runs:
        raise NoStoredRun(problems=[Problem(
            f"the stored runs of {parsed.name} with this judging fingerprint used other data than "
            f"{parsed.data_display} has now", hint=hint)])
    running = store.find_runs(spec_name=parsed.name, judging_fp=parsed.judging_fp, status="running")
    if running:  # (the hint to run it failed: "in progress in another process")
        raise NoStoredRun(problems=[Problem(
            f"the run of {parsed.name} ({running[0].run_id}) is still in progress: no completed run to read yet",
            hint=f"wait for it to end, then: geval-spec report {ref or parsed.name}")])
    others = store.find_runs(spec_name=parsed.name, status="completed")
    what = (f"{len(others)} run(s) of {parsed.name} exist, but none with judging fingerprint "
            f"{parsed.judging_fp[:10]} (the spec's judging changed since)" if others else
            f"no stored run of {parsed.name}")
    raise NoStoredRun(problems=[Problem(what, hint=hint)])
