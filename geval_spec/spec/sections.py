"""The spec language: one pydantic model per section of a spec file.

Every model forbids unknown keys and is frozen. Types and ranges live here;
checks that need several keys at once (rubric coverage, method requirements,
files on disk) live in :mod:`geval_spec.spec.checks`, which can point at the
exact key that is wrong. The JSON Schema in ``schemas/`` is generated from
these models (:mod:`geval_spec.spec.jsonschema`), so every ``description``
here is what an editor shows as help.

The names shared by every stage are defined here once: the split names and
the TCVA verdict levels.
"""

# (no `from __future__ import annotations`: pydantic would evaluate 100-odd annotation strings at import)
import re
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, JsonValue, Tag, field_validator,
                      model_validator)

SplitName = Literal["examples", "dev", "test"]
SPLITS: tuple[SplitName, ...] = ("examples", "dev", "test")  # in the order fractions are laid out
VerdictLevel = Literal["fully", "mostly", "partially", "minor", "none"]
VERDICT_LEVELS: tuple[VerdictLevel, ...] = ("fully", "mostly", "partially", "minor", "none")  # best first


IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"  # a template variable: letters, digits and _, not first a digit
NOT_BLANK = r"\S"  # text with something in it besides spaces
MODEL_STRING = r"^[^\s/](?:\S*[^\s/])?$"  # provider/model, no spaces, not starting or ending with /
# The highest confidence level: nearer 1, a quantile is past what double precision resolves (0.9999999999999999,
# below 1, made 0.5 + level / 2 exactly 1.0 and report exit 70; Student's t lost its tail to rounding)
MAX_LEVEL = 0.9999


def _no_items() -> list[Any]:
    """An empty list, as a default. (Not ``default_factory=list``: pydantic asks for the factory's signature, and
    for a builtin type that parses its text signature with ``tokenize``, whose first use costs about 8 ms.)"""
    return []


def _no_entries() -> dict[str, Any]:
    """An empty dict, as a default (see :func:`_no_items`)."""
    return {}


class Base(BaseModel):
    # strict: a number is a number, a whole number a whole number (``version: true``, ``threshold: "0.8"`` and
    # ``max_tokens: 1500.0`` are errors at their line, not 1, 0.8 and 1500); a YAML integer is still a number
    # ``.nan`` and ``.inf`` are no value a spec means (and no JSON: the fingerprints could not be taken)
    # defer_build: a model's validator is built at its first use; a spec's validation builds Spec's, which holds
    # every section's, instead of one for each of the 23 models at import (importing this module 29 instead of
    # 49 ms, the first spec's validation 25 instead of 9: 5 ms less of every command that loads a spec)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True)


class Criterion(Base):
    name: str = Field(min_length=1, description="Short name of what is judged, e.g. Consistency.")
    description: str = Field(min_length=1, description="What the criterion means, in one or two sentences.")


class GenerateSteps(Base):
    generate: Literal[True] = Field(
        description="Let the judge write the evaluation steps once from the task and criterion. "
        "They are frozen in specs/<name>.lock.yaml (commit it) and reused for every case.")
    count: int = Field(default=5, ge=2, le=12, description="How many steps to ask for.")


def _steps_kind(value: Any) -> str:
    return "generate" if isinstance(value, (dict, GenerateSteps)) else "list"


Steps = Annotated[
    Union[
        Annotated[list[Annotated[str, Field(pattern=NOT_BLANK)]], Field(min_length=1), Tag("list")],
        Annotated[GenerateSteps, Tag("generate")],
    ],
    Discriminator(_steps_kind),
]


class Scale(Base):
    min: int = Field(description="Lowest score of the rubric.")
    max: int = Field(description="Highest score of the rubric.")


class HumanScale(Base):
    min: float = Field(description="Lowest possible human score.")
    max: float = Field(description="Highest possible human score.")


class Anchor(Base):
    description: str = Field(min_length=1, description="What a candidate must be like to get this score.")
    examples: list[str] = Field(default_factory=_no_items,
                                description="Example candidates (or excerpts) for this score.")


def _score_key(value: Any) -> Any:
    """A score written as a JSON object's key (text of digits) is that score; ``true`` or ``2.0`` stay errors."""
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    return value


class Rubric(Base):
    scale: Scale = Field(description="The integer scale of scores, e.g. {min: 1, max: 5}.")
    anchors: dict[Annotated[int, BeforeValidator(_score_key)], Anchor] = Field(
        description="One anchor per score of the scale: disjoint descriptions that cover the scale.",
        json_schema_extra={"propertyNames": {"pattern": "^-?[0-9]+$"}})


class Scoring(Base):
    method: Literal["logprobs", "samples", "direct", "verdicts"] = Field(
        default="logprobs",
        description="logprobs: G-Eval's probability-weighted score (needs judge.top_logprobs); "
        "samples: mean of n sampled scores; direct: one parsed score; "
        "verdicts: TCVA statement verdicts aggregated with a strictness temperature.")
    samples: int | None = Field(default=None, ge=2, le=100,
                                description="Number of samples for method samples (or fallback samples).")
    fallback: Literal["none", "samples", "direct"] = Field(
        default="none",
        description="What to do when the provider returns no logprobs. none stops with an error; "
        "the method used is recorded per judgment, never switched silently.")
    min_valid_samples: int | None = Field(
        default=None, ge=1, le=100,
        description="method samples: a case is invalid when fewer of its samples parse (default: half of "
        "scoring.samples, rounded up).")


class Weights(Base):
    fully: float = Field(default=1.0, ge=0, le=1, description="Weight of a fully supported statement.")
    mostly: float = Field(default=0.9, ge=0, le=1, description="Weight of a mostly supported statement.")
    partially: float = Field(default=0.7, ge=0, le=1, description="Weight of a partially supported statement.")
    minor: float = Field(default=0.3, ge=0, le=1, description="Weight of a statement with minor support.")
    none: float = Field(default=0.0, ge=0, le=1, description="Weight of an unsupported statement.")


class Aggregation(Base):
    temperature: float = Field(default=0.5, ge=0.1, le=1.0,
                               description="TCVA strictness: 0.1 strict (medical) ... 1.0 lenient (chat).")
    weights: Weights = Field(default_factory=Weights, description="Weight per verdict level, in [0, 1].")
    none_penalty: bool = Field(strict=True, default=True, description="Scale the score down by the share of 'none' verdicts.")
    on_empty: Literal["invalid", "zero", "one"] = Field(
        default="invalid", description="Score of a judgment with no statements: invalid, 0 or 1.")


# Request keys geval-spec sets from the spec, and litellm's connection keys; judge.params may not set them.
RESERVED_PARAMS = frozenset({
    "model", "messages", "temperature", "max_tokens", "max_completion_tokens", "seed", "logprobs", "top_logprobs",
    "n", "response_format", "stream", "stream_options", "api_key", "api_base", "base_url", "api_version",
    "organization", "extra_headers", "headers", "timeout", "num_retries", "cache_control_injection_points",
    "metadata", "user", "tools", "tool_choice", "functions"})


class Limits(Base):
    rpm: int | None = Field(default=None, ge=1, le=100_000_000, description="Requests per minute.")
    tpm: int | None = Field(
        default=None, ge=1, le=100_000_000_000,
        description="Tokens per minute, counted as providers count them before answering: a quarter of the "
        "prompt's characters plus max_tokens for each completion asked for.")


class Judge(Base):
    model: str = Field(pattern=MODEL_STRING, description="A litellm model string, e.g. openai/gpt-4.1-mini.")
    name: str | None = Field(default=None, description="Label in reports (default: the model string).")
    family: str | None = Field(
        default=None, description="Model family for the self-preference check (default: from the model string).")
    temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature sent to the judge.")
    max_tokens: int = Field(default=512, ge=1, le=32768, description="Maximum tokens the judge may write.")
    seed: int | None = Field(default=None, description="Sampling seed sent to providers that honour it.")
    top_logprobs: int | None = Field(default=None, ge=1, le=20,
                                     description="Top logprobs per token; needed by scoring.method logprobs.")
    json_mode: bool = Field(strict=True, default=False, description="Ask the provider for a JSON object response_format.")
    supports_n: bool = Field(strict=True, default=True,
                             description="method samples: ask for n completions in one request (else n requests).")
    api_base: str | None = Field(default=None, pattern=r"^https?://",
                                 description="Base URL of any OpenAI-compatible server.")
    client: Literal["auto", "litellm", "openai-http"] = Field(
        default="auto",
        description="auto (openai-http for openai/ models, including any OpenAI-compatible api_base; litellm "
        "for every other provider), litellm (any provider) or openai-http (a pooled direct client for "
        "OpenAI-compatible endpoints, much lower overhead). All send the same requests.")
    timeout: float = Field(default=120.0, gt=0, le=3600, description="Seconds per request before it is retried.")
    max_retries: int = Field(default=4, ge=0, le=20, description="Retries per request after the first attempt.")
    limits: Limits | None = Field(
        default=None, description="The provider's rate limits for this model; requests are paced to stay under "
        "them. Without limits, concurrency adapts to the provider's 429s and x-ratelimit headers.")
    params: dict[Annotated[str, Field(pattern=IDENTIFIER)], JsonValue] = Field(
        default_factory=_no_entries,
        description="Provider settings passed through as they are, e.g. reasoning_effort: low, top_p: 0.9. They "
        "go into every request and the judging fingerprint. Keys geval-spec sets itself are refused.")
    cache_prefix: bool = Field(
        strict=True, default=False,
        description="Mark the static prompt prefix (the system message) for providers that cache only marked "
        "prefixes (Anthropic, Bedrock, Vertex, Gemini through litellm). OpenAI caches prefixes by itself.")

    @field_validator("params")
    @classmethod
    def _own_keys(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        taken = sorted(set(value) & RESERVED_PARAMS)
        if taken:  # (no "api_key:" in the message: the redaction of errors took the next word for a key)
            raise ValueError(f"geval-spec sets {', '.join(taken)} itself; use the judge's own keys "
                             "(temperature, max_tokens, seed, top_logprobs, json_mode) or the scoring method "
                             "instead, and credentials through the environment")
        return value

    @property
    def label(self) -> str:
        return self.name or self.model


class Language(Base):
    code: str = Field(pattern=r"^[a-z]{2,3}(-[A-Z]{2})?$", description="Language of the candidates, e.g. nl-NL, nl-BE.")
    formality: Literal["u", "je", "any"] = Field(
        default="any", description="Required form of address: u (formal), je (informal) or any.")
    compounds: bool = Field(strict=True, default=False, description="Flag wrongly split compounds ('hoofd pijn').")
    compound_ratio: float = Field(
        default=20.0, gt=1,
        description="Flag a word pair when the joined word is this many times more frequent than the pair.")
    lexicon: list[str] = Field(default_factory=_no_items, description="Extra words and phrases that are never errors.")
    penalty: dict[str, float] = Field(
        default_factory=_no_entries,
        description="Optional score penalty per finding kind (formality, compound), subtracted per finding.")


class Bias(Base):
    position_swap: bool = Field(strict=True, default=False, description="Pairwise specs: judge both orders.")
    length: Literal["report", "penalize"] | None = Field(
        default=None, description="report: add the length-bias diagnostic; penalize: add a clause against padding.")


class Data(Base):
    path: str = Field(min_length=1, description="JSON, JSONL, CSV or Parquet file, relative to the spec file.")
    format: Literal["json", "jsonl", "csv", "parquet"] | None = Field(
        default=None, description="File format (default: from the extension).")
    id: str = Field(min_length=1, description="Column with the unique case id.")
    group: str | None = Field(default=None, description="Source group: the unit of splits and resampling.")
    system: str | None = Field(default=None, description="Which system wrote the candidate (system level).")
    category: str | None = Field(default=None, description="Reporting category.")
    model_family: str | None = Field(default=None,
                                     description="Column naming the candidate's model family (self-preference).")
    fields: dict[Annotated[str, Field(pattern=IDENTIFIER)], str] = Field(
        description="Template variables and the columns they come from; dotted paths reach nested keys, "
        "a list becomes its items joined by blank lines.")
    human: str | list[str] = Field(description="Human score column, or a list of rater columns.")
    human_scale: HumanScale | None = Field(default=None, description="Range of the human scores.")


class SplitByField(Base):
    field: str = Field(min_length=1, description="Column holding examples, dev or test.")


class SplitByHash(Base):
    by: Literal["group", "id"] = Field(default="group", description="Hash the group (default) or the case id.")
    fractions: dict[SplitName, float] = Field(
        description="Share of groups per split; must sum to 1.")
    seed: int = Field(default=0, description="Seed of the hash; the same seed gives the same split everywhere.")


def _split_kind(value: Any) -> str:
    if isinstance(value, SplitByField) or (isinstance(value, dict) and "field" in value):
        return "field"
    return "hash"


Split = Annotated[
    Union[Annotated[SplitByField, Tag("field")], Annotated[SplitByHash, Tag("hash")]],
    Discriminator(_split_kind),
]


class Bootstrap(Base):
    draws: int = Field(default=2000, ge=100, le=100_000, description="Bootstrap resamples.")
    seed: int = Field(default=0, ge=0, lt=2**32, description="Seed of numpy's default_rng.")
    unit: Literal["group", "case"] = Field(default="group", description="What is resampled: whole groups or cases.")
    level: float = Field(default=0.95, gt=0.5, le=MAX_LEVEL, description="Confidence level of the intervals, above "
                         "0.5 and at most 0.9999.")


class Calibration(Base):
    metric: Literal["spearman", "pearson", "kendall"] = Field(default="spearman", description="Gate metric.")
    level: Literal["dataset", "group", "system"] = Field(default="dataset", description="Level of the gate metric.")
    split: Literal["all", "dev", "test"] = Field(
        default="test", description="Split the gate is judged on (default: test; all when the spec defines no "
        "split, and the report then says the gate was not judged on unseen data).")
    threshold: float = Field(default=0.8, ge=-1, le=1, description="The gate passes when the metric >= threshold.")
    rule: Literal["point", "lower_bound"] = Field(
        default="point", description="point: the gate compares the metric's value with the threshold; "
        "lower_bound: the lower end of its bootstrap interval.")
    min_validity: float = Field(default=0.9, ge=0, le=1,
                                description="The gate also fails when fewer than this share of cases got a valid "
                                "judgment (invalid output stays in the denominator).")
    margin: float = Field(default=0.0, ge=0, le=2,
                          description="compare: a regression counts when the whole interval lies below -margin.")
    pass_mark: float | None = Field(
        default=None, ge=0, le=1,
        description="Optional: a case is correct when |judge - human| <= pass_mark on a 0..1 scale "
        "(enables validity/accuracy summaries).")


class EstimateSettings(Base):
    """The report's estimate of the human-scale mean from a few labels (docs/estimate.md)."""

    level: float | None = Field(default=None, gt=0, le=MAX_LEVEL, description="Confidence level of the intervals, "
                                "above 0 and at most 0.9999 (default: bootstrap.level).")
    target_halfwidth: float | None = Field(
        default=None, gt=0, description="Half-width wanted, on the human scale (above 0, at most the scale's "
        "width): the report says how many labelled cases reach it (labels_needed).")
    min_labels: int = Field(default=10, ge=2, description="Below this many labelled cases in a cell (all cases, "
                            "or one system), no interval is given, and a warning says so; at least 2.")


class Prompt(Base):
    template: str | None = Field(default=None, description="Jinja template replacing the built-in G-Eval template.")


class Pairwise(Base):
    candidates: tuple[str, str] = Field(
        strict=False,  # a YAML (or stored JSON) list of two names
        description="The two data.fields variables holding the candidates compared; the first is A. The judge "
        "says which is better; the human column holds the preference for A (1 A, 0 B, 0.5 tie).")


class Spec(Base):
    """A judging task, its data and how its judge is calibrated."""

    name: str = Field(pattern=r"^[a-z0-9-]+$", max_length=80, description="How users call the spec: [a-z0-9-]+.")
    version: int = Field(ge=1, le=2**31 - 1, description="Bumped by hand when the judging changes.")
    description: str = Field(default="", description="Free text; changes no fingerprint.")
    task: str = Field(min_length=1, description="What the judge is asked to do.")
    criterion: Criterion = Field(description="What is judged: a name and a definition.")
    steps: Steps = Field(description="Chain-of-thought steps, or {generate: true}.")
    rubric: Rubric | None = Field(default=None, description="Score anchors (all methods except verdicts).")
    scoring: Scoring = Field(default_factory=Scoring, description="How a score is computed from the judge's output.")
    aggregation: Aggregation = Field(default_factory=Aggregation, description="TCVA aggregation (method verdicts).")
    judge: Judge | None = Field(default=None, description="The judge model.")
    judges: list[Judge] | None = Field(default=None, min_length=2, description="A judge panel.")
    ensemble: Literal["mean", "median"] = Field(default="mean", description="How a panel's scores are combined.")
    language: Language | None = Field(default=None, description="Language rules checked before the judge is called.")
    pairwise: Pairwise | None = Field(default=None,
                                      description="Judge a pair of candidates per case (a preference, not a score).")
    bias: Bias = Field(default_factory=Bias, description="Bias controls: position swap, length.")
    data: Data = Field(description="The human-labelled cases.")
    split: Split | None = Field(default=None, description="{field: column} or {by: group, fractions, seed}.")
    bootstrap: Bootstrap = Field(default_factory=Bootstrap, description="Confidence intervals by bootstrap.")
    calibration: Calibration = Field(default_factory=Calibration,
                                     description="The gate: metric, level, split and threshold.")
    prompt: Prompt = Field(default_factory=Prompt, description="Prompt template settings.")
    estimate: EstimateSettings | None = Field(
        default=None, description="Estimates of the human-scale mean from a few labels (prediction-powered "
        "inference); made whenever some valid cases are unlabelled.")

    @model_validator(mode="before")
    @classmethod
    def _gate_on_all_without_splits(cls, data: Any) -> Any:
        """With no ``split``, the gate is judged on all cases unless calibration.split says otherwise."""
        if isinstance(data, dict) and data.get("split") is None:
            cal = data.get("calibration")
            if cal is None:
                return {**data, "calibration": {"split": "all"}}
            if isinstance(cal, dict) and "split" not in cal:
                return {**data, "calibration": {**cal, "split": "all"}}
        return data

    @property
    def candidate_field(self) -> str:
        """The data.fields variable holding the text that is judged: ``candidate``, else the first one."""
        return "candidate" if "candidate" in self.data.fields else next(iter(self.data.fields))

    @property
    def panel(self) -> tuple[Judge, ...]:
        if self.judges:
            return tuple(self.judges)
        return (self.judge,) if self.judge else ()
