"""The typed results of analysis: :class:`Result`, the pieces reports share, and :class:`Calibration` (the report).

:class:`~geval_spec.analysis.compare.Comparison` and
:class:`~geval_spec.analysis.audit.Audit` are defined next to the code that
makes them, on the same base. Every result is a frozen pydantic model; the JSON a command prints is its
serialisation (``model_dump(mode="json")``), with the keys in the order the
fields are declared here, so a report diffs cleanly in git. Numbers are
rounded when a result is made (:func:`rounded`), never when it is rendered.
A few keys appear only where they apply (``Result.OMIT_IF_NONE``), and a few
fields carry data for the HTML plots that the JSON leaves out
(``exclude=True``). The renderers in :mod:`geval_spec.output` are pure
functions of these values.
"""

from __future__ import annotations

from pydantic import Field

from geval_spec.analysis.estimate import EstimateBlock
from geval_spec.analysis.result_base import Interval, Result, rounded
from geval_spec.analysis.verdict import GateBlock


# -- shared pieces -------------------------------------------------------------------------
class LevelEntry(Result):
    """One split and level of the correlation table."""

    OMIT_IF_NONE = frozenset({"skipped_groups"})
    spearman: Interval
    pearson: Interval
    kendall: Interval
    n: int
    skipped_groups: int | None = None  # group level only

    def metric(self, name: str) -> Interval:
        value: Interval = getattr(self, name)
        return value


Correlations = dict[str, dict[str, LevelEntry]]  # split -> level -> entry


class BootstrapInfo(Result):
    draws: int
    seed: int
    unit: str
    level: float


# -- the calibration report -------------------------------------------------------------------
class SpecInfo(Result):
    name: str
    version: int
    fingerprint: str
    analysis_fingerprint: str
    file: str


class RunBlock(Result):
    id: str
    kind: str
    judge: str | list[str]
    method: str
    ensemble: str | None
    temperature: float | None
    data: str
    data_sha256: str | None


class SplitCases(Result):
    n: int
    valid: int
    invalid: int
    missing: int
    validity: float | None


class CasesBlock(Result):
    OMIT_IF_NONE = frozenset({"splits"})
    n: int
    valid: int
    invalid: int
    missing: int
    validity: float | None
    labelled: int
    splits: dict[str, SplitCases] | None = None


class ValidityBlock(Result):
    n: int
    valid: int
    invalid: int
    missing: int
    validity: float | None
    reasons: dict[str, int]


class TooFew(Result):
    """A diagnostic that could not be computed, and why."""

    n: int
    flag: bool
    note: str


class Compression(Result):
    n: int
    judge_sd: float | None
    human_sd: float | None
    sd_ratio: float | None
    judge_extreme_share: float | None
    human_extreme_share: float | None
    spearman: float | None
    pearson: float | None
    flag: bool
    reasons: list[str]
    suggestion: str | None


class Quartile(Result):
    quartile: int
    words: str
    n: int
    judge: float | None
    human: float | None
    gap: float | None


class LengthBias(Result):
    OMIT_IF_NONE = frozenset({"quartiles"})
    n: int
    judge_vs_length: float | None
    human_vs_length: float | None
    difference: float | None
    flag: bool
    note: str | None
    quartiles: list[Quartile] | None = None


class LengthTooFew(Result):
    OMIT_IF_NONE = frozenset({"quartiles"})
    n: int
    flag: bool
    note: str
    quartiles: list[Quartile] | None = None


class Accuracy(Result):
    n: int
    validity: float | None
    accuracy: float | None
    accuracy_when_valid: float | None


class PassMark(Result):
    pass_mark: float
    overall: Accuracy
    categories: dict[str, Accuracy]
    macro_category_accuracy: float | None


class Position(Result):
    both_orders_valid: int
    consistent: int
    consistency: float | None
    one_order_only: int
    rule: str


class FindingExample(Result):
    case_id: str
    text: str
    message: str


class FindingKind(Result):
    cases: int
    findings: int
    examples: list[FindingExample]


class LanguageBlock(Result):
    code: str
    formality: str
    cases_flagged: int
    cases: int
    kinds: dict[str, FindingKind]
    human_flagged: float | None
    human_clean: float | None
    penalty: dict[str, float]


class SamplesBlock(Result):
    """method samples: how many samples parsed, and the cases the minimum made invalid."""

    judgments: int
    samples: int
    invalid_samples: int
    invalid_rate: float | None
    min_valid_samples: int
    below_minimum: int  # judgments invalid because fewer samples parsed


class LogprobsBlock(Result):
    """method logprobs: where the probability at the score's position went, over the valid judgments."""

    judgments: int
    ambiguous_mass_mean: float | None
    ambiguous_mass_max: float | None
    valid_mass_mean: float | None
    valid_mass_min: float | None


class Diagnostics(Result):
    OMIT_IF_NONE = frozenset({"samples", "logprobs"})
    validity: ValidityBlock
    compression: Compression | TooFew
    length: LengthBias | LengthTooFew
    pass_mark: PassMark | None
    position: Position | None
    language: LanguageBlock | None
    samples: SamplesBlock | None = None
    logprobs: LogprobsBlock | None = None


class Precision(Result):
    """Pairs needed for an interval of a given half-width on the correlation scale (Fisher z)."""

    halfwidth: float
    conf: float
    at: float  # the correlation assumed: the observed value, or the threshold before any judge ran
    at_source: str  # observed | threshold
    required: int | None
    enough: bool | None
    formula: str


class SampleSize(Result):
    """Whether the gate's split can tell the threshold from 0.5, and how precise an interval it allows.

    ``required``, ``enough`` and ``precision`` count ``unit``: cases at
    dataset level, systems at system level; at group level they do not apply.
    """

    split: str
    level: str
    metric: str
    available: int  # usable cases
    available_units: int  # cases, groups or systems with usable cases
    unit: str
    alpha: float
    power: float
    null: float
    alternative: float
    required: int | None
    enough: bool | None
    formula: str | None
    method: str
    precision: Precision | None


class Agreement(Result):
    raters: list[str]
    n: int
    alpha_interval: float | None
    alpha_ordinal: float | None
    warning: str | None


class PerJudge(Result):
    split: str
    level: str
    n: int
    validity: float | None
    spearman: Interval
    pearson: Interval
    kendall: Interval


class SelfPreference(Result):
    judge: str
    family: str
    own_n: int
    other_n: int
    own_gap: float | None
    other_gap: float | None
    self_preference: float | None
    flag: bool


class Panel(Result):
    """Agreement between a panel's judges (when there are several) and self-preference (when families are known)."""

    judges: list[str] | None = None
    n: int | None = None
    alpha_interval: float | None = None
    self_preference: list[SelfPreference] | None = None
    flags: list[str] | None = None

    def omitted(self) -> set[str]:
        out = set()
        if self.judges is None:
            out |= {"judges", "n", "alpha_interval"}
        if self.self_preference is None:
            out |= {"self_preference", "flags"}
        return out


class SweepRow(Result):
    temperature: float
    p: float | None
    dev: float | None
    dev_n: int


class SweepTest(Result):
    split: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


class SweepBlock(Result):
    """The sweep: dev values per temperature, the choice made on dev, the chosen temperature on test.

    The spec's own temperature is kept unless the best one on dev is told
    apart from it: the paired bootstrap interval of best - spec on dev lies
    above 0 (``told_apart``; None when the best is the spec's own).
    """

    metric: str
    level: str
    chosen_on: str
    measured_on: str  # test: never a split that contains dev
    spec_temperature: float
    best_temperature: float | None
    chosen_temperature: float | None
    told_apart: bool | None
    dev_range: list[float] | None  # lowest and highest dev value over the grid
    dev_at_spec: Interval  # the spec's temperature on dev, with its interval
    best_minus_spec: Interval | None  # paired, on dev
    grid: list[SweepRow]
    test: SweepTest | None


class SweepReport(Result):
    """What ``geval-spec sweep`` prints: the sweep of one run (the fields of :class:`SweepBlock` after its ids)."""

    spec: str
    run: str
    metric: str
    level: str
    chosen_on: str
    measured_on: str
    spec_temperature: float
    best_temperature: float | None
    chosen_temperature: float | None
    told_apart: bool | None
    dev_range: list[float] | None
    dev_at_spec: Interval
    best_minus_spec: Interval | None
    grid: list[SweepRow]
    test: SweepTest | None

    @property
    def block(self) -> SweepBlock:
        return SweepBlock(**{name: getattr(self, name) for name in SweepBlock.model_fields})


class Disagreement(Result):
    case_id: str
    split: str | None
    judge: float | None
    human: float | None
    gap: float | None
    candidate: str


class PlotData(Result):
    """Per-case values for the HTML plots (left out of the JSON report)."""

    judge: tuple[float, ...]  # judge scores on 0..1, NaN where not valid
    human: tuple[float, ...]  # human scores on 0..1, NaN where unlabelled
    splits: tuple[str | None, ...]
    group_values: tuple[float, ...]  # per-group correlations of the gate metric (groups used)
    groups_skipped: int


class Calibration(Result):
    """The calibration report of one run under one spec's analysis settings.

    ``estimate`` (the human-scale mean from a few labels) is left out of the JSON when every valid case is
    labelled, so fully labelled data gives the report it always gave.
    """

    OMIT_IF_NONE = frozenset({"estimate"})
    spec: SpecInfo
    run: RunBlock
    cases: CasesBlock
    correlation: Correlations
    gate: GateBlock
    diagnostics: Diagnostics
    sample_size: SampleSize
    agreement: Agreement | None
    judges: dict[str, PerJudge] | None
    panel: Panel | None
    sweep: SweepBlock | None
    disagreements: list[Disagreement]
    bootstrap: BootstrapInfo
    warnings: list[str]
    estimate: EstimateBlock | None = None  # only when some valid case is unlabelled
    plot: PlotData | None = Field(default=None, exclude=True)
