"""Scenario schema: what a planning run is asked. The TOML file and the REST body are these types.

A scenario names a fleet (pools of catalog systems), the model families sold (a flagship model and
optional serving variants such as a distilled model), the tiers (SLOs and price-multiplier menus),
demand per family over the horizon with its choice-model parameters, and expectations that
``farebox check`` evaluates against the resulting plan.

Everything here is structure and constraints one field can check on its own (``Meta``); the checks
that span fields (duplicate ids, references between sections, horizon lengths) and the catalog
references live in ``planner.scenario.decode``, which also turns msgspec's errors into one-line
``InputError`` messages that name the field path (``$.fleet.pools[2].count: must be >= 0``).

Units: rates per second, times in hours where the business thinks in hours (outages, windows),
TTFT in milliseconds as SLOs are written, prices in USD per million tokens as price cards are
written. ``planner.build.pipeline`` converts to SI.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from msgspec import Meta, Struct

from fleet.catalog.schema import Id, Precision

MAX_HOURS = 1344
"""Eight weeks of hourly periods: the longest horizon a scenario may plan."""
HOURS_PER_WEEK = 168
MAX_POOLS = 512
"""Lists that multiply the planner's work are bounded far above a frontier lab's week (24 pools,
4 families, 3 tiers, a few variants): pools 512, families 64, variants per family 16, tiers 16."""
MAX_LIST = 4096
"""Any other list of a scenario (outages of a pool, expectations); a pool's availability has at
most MAX_HOURS values, and explicit hourly demand is bounded by the horizon check."""
FLAGSHIP = "flagship"
"""In a tier's ``variants``: each family's flagship model, whatever its id."""
OUTSIDE = "outside"
"""In ``reference_shares``: the outside option (customers who buy no tier)."""

# Upper bounds: every number of a scenario is finite and physically plausible, so a typo (1e308,
# inf, 2**63) is a 4xx naming the field instead of an overflow deep in the planner. Each is far
# above anything real, so no sensible scenario meets one.
MAX_POOL_SYSTEMS = 1_000_000
"""Systems in one pool (a frontier lab's whole fleet is ~100k accelerators)."""
MAX_REQUESTS_PER_S = 1e7
"""Requests/s of one family in one hour (the largest public services are below 1e5)."""
MAX_TOKENS_PER_REQUEST = 1e7
"""Mean input or output tokens per request (context windows are at most a few million)."""
MAX_TOKENS_PER_S_PER_USER = 1e6
"""A streaming-speed floor (SRAM-resident serving reaches a few thousand)."""
MAX_TTFT_MS = 86_400_000.0
"""A TTFT ceiling: one day."""
MAX_USD = 1e6
"""A price per million tokens, a penalty per million tokens, or a cost per system-hour."""
MAX_MULTIPLIER = 1e3
"""A price multiplier of a tier's menu."""
MAX_PROFILE_FACTOR = 1e3
"""A factor of a daily or weekly demand profile (level x factors is bounded by the check)."""
MAX_CHOICE_WEIGHT = 100.0
"""A logit weight (price sensitivity, speed, quality): beyond this the choice is a step."""
MAX_TIME_LIMIT_S = 7 * 86_400.0
MAX_ENGINES = 4
"""Serving engines one scenario may search (the catalog has three plus the pooled default)."""
"""A solver time limit: one week."""

PositiveFloat = Annotated[float, Meta(gt=0)]
NonNegativeFloat = Annotated[float, Meta(ge=0)]
PositiveInt = Annotated[int, Meta(gt=0)]
NonNegativeInt = Annotated[int, Meta(ge=0)]
UnitFraction = Annotated[float, Meta(ge=0, le=1)]
Percentile = Annotated[float, Meta(gt=0, lt=100)]
Quality = Annotated[float, Meta(ge=0, le=100)]
Name = Annotated[str, Meta(min_length=1, max_length=200)]
MAX_DESCRIPTION_CHARS = 8000
"""A scenario's description: a few paragraphs (the checked-in ones are under 200 characters)."""
Usd = Annotated[float, Meta(ge=0, le=MAX_USD)]
PositiveUsd = Annotated[float, Meta(gt=0, le=MAX_USD)]
Multiplier = Annotated[float, Meta(gt=0, le=MAX_MULTIPLIER)]
SpeedFloor = Annotated[float, Meta(gt=0, le=MAX_TOKENS_PER_S_PER_USER)]
Tokens = Annotated[float, Meta(gt=0, le=MAX_TOKENS_PER_REQUEST)]
RequestsPerS = Annotated[float, Meta(ge=0, le=MAX_REQUESTS_PER_S)]
ProfileFactor = Annotated[float, Meta(ge=0, le=MAX_PROFILE_FACTOR)]
ChoiceWeight = Annotated[float, Meta(ge=0, le=MAX_CHOICE_WEIGHT)]
Hour = Annotated[int, Meta(ge=0, le=MAX_HOURS)]
HourlyRates = Annotated[tuple[RequestsPerS, ...], Meta(min_length=1)]

Method = Literal["decompose", "highs", "scip", "cpsat"]
PeriodHours = Literal[1, 2, 3, 4, 6, 8, 12, 24]


class Frozen(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every scenario type: immutable, unknown fields rejected."""


class ScenarioMeta(Frozen, frozen=True, kw_only=True):
    name: Name
    description: Annotated[str, Meta(max_length=MAX_DESCRIPTION_CHARS)] = ""
    """Free text for people; stored with the plan and returned with it, hence bounded."""
    start_date: date | None = None
    """First day of the horizon (hour 0 = 00:00 that day, day 0 of the weekly profile). Only
    reports use it, to date their weeks; default ``planner.report.frames.DEFAULT_START``."""


class Speculative(Frozen, frozen=True, kw_only=True):
    """A speculative-decoding option: draft length k (0 = off) and per-token acceptance."""

    draft_tokens: Annotated[int, Meta(ge=0, le=16)]
    acceptance: Annotated[float, Meta(ge=0, lt=1)] = 0.0


class QualityLoss(Frozen, frozen=True, kw_only=True):
    """Fraction of a variant's quality lost when it is served at a weight precision.

    Defaults from published accuracy-recovery studies: FP8 weights and activations are lossless
    and tuned INT8 (W8A8) loses 1-3%, INT4 weight-only (W4A16) about as much (Kurtic et al.,
    "Give Me BF16 or Give Me Death? Accuracy-Performance Trade-Offs in LLM Quantization", ACL
    2025, Llama 3.1 8B-405B); NVFP4 loses less than 1% against FP8 on key language tasks of
    DeepSeek-R1-0528 (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision
    Inference", June 2025)."""

    bf16: UnitFraction = 0.0
    fp8: UnitFraction = 0.0
    fp4: UnitFraction = 0.01
    int8: UnitFraction = 0.02
    int4: UnitFraction = 0.02

    def of(self, precision: Precision) -> float:
        return float(getattr(self, precision))


class Search(Frozen, frozen=True, kw_only=True):
    """The configurations the planner may choose from, per (model, system): every valid layout
    crossed with these precisions, batch caps and speculative options. Repeats are evaluated
    once; the lists are bounded, and so is their product with the layouts
    (``planner.build.workload``)."""

    precisions: Annotated[tuple[Precision, ...], Meta(min_length=1, max_length=8)] = (
        "bf16",
        "fp8",
        "fp4",
    )
    """Weight precisions searched; a lossy one (``quality_loss`` > 0) is sold as its own offer
    at the lower quality where the family's choice model weighs quality (docs/demand.md)."""
    quality_loss: QualityLoss = QualityLoss()
    batch_caps: Annotated[
        tuple[Annotated[int, Meta(ge=1, le=4096)], ...], Meta(min_length=1, max_length=64)
    ] = (
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
    )
    speculative: Annotated[tuple[Speculative, ...], Meta(min_length=1, max_length=16)] = (
        Speculative(draft_tokens=0),
        Speculative(draft_tokens=3, acceptance=0.7),
    )
    engines: Annotated[tuple[Id, ...], Meta(min_length=1, max_length=MAX_ENGINES)] = ("any",)
    """Serving engines the provider runs (fleet/data/engines.toml: trtllm, vllm, sglang; "any" =
    the efficiency factors pooled over all three). Each multiplies the search grid; the planner
    chooses per (family, tier, variant, pool) and the plan's assignments name the engine."""
    disaggregated: bool = False
    """Also offer disaggregated prefill/decode units as candidates: k decode replicas fed by m
    prefill replicas of the same system (``planner.build.disagg``, docs/performance-model.md). Off
    by default: it adds up to ``fleet.perf.disagg.unit_bound`` units per search grid to screen
    and prune (docs/scenario.md has the measured cost)."""


class Options(Frozen, frozen=True, kw_only=True):
    time_limit_s: Annotated[float, Meta(gt=0, le=MAX_TIME_LIMIT_S)] = 60.0
    gap_target: Annotated[float, Meta(ge=0, le=1)] = 1e-3
    """Relative gap (bound - plan) / bound at which the solver stops."""
    method: Method = "decompose"
    """"decompose" = price branching over per-hour LPs; "highs" / "scip" / "cpsat" = one MILP."""
    period_hours: PeriodHours = 1
    """Length of a planning period; hourly demand is averaged into periods."""
    reconfiguration_limit: UnitFraction | None = None
    """Max fraction of a pool's systems that may change role between consecutive periods."""
    allow_unserved_tiers: bool = False
    """When False, a tier that no candidate can serve makes the scenario infeasible (with the
    reason) instead of being planned as unserved."""
    search: Search = Search()


class Outage(Frozen, frozen=True, kw_only=True):
    """Hours [start_hour, end_hour) during which only ``fraction_available`` of a pool runs."""

    start_hour: Hour
    end_hour: Annotated[int, Meta(gt=0, le=MAX_HOURS)]
    fraction_available: UnitFraction = 0.0


class Pool(Frozen, frozen=True, kw_only=True):
    id: Id
    region: Name
    system: Id
    """A system id of the catalog (``fleet/data/systems.toml``)."""
    count: Annotated[int, Meta(ge=0, le=MAX_POOL_SYSTEMS)]
    """Systems in the pool."""
    usd_per_hour: PositiveUsd | None = None
    """Running cost per system-hour; default: the catalog system's price (or its devices x the
    accelerator's)."""
    availability: Annotated[tuple[UnitFraction, ...], Meta(max_length=MAX_HOURS)] | None = None
    """Fraction of the pool usable per hour: one value per hour of the horizon, or 168 values
    repeated every week."""
    outages: Annotated[tuple[Outage, ...], Meta(max_length=MAX_LIST)] = ()


Routing = Literal["region", "global"]


class Fleet(Frozen, frozen=True, kw_only=True):
    pools: Annotated[tuple[Pool, ...], Meta(min_length=1, max_length=MAX_POOLS)]
    routing: Routing = "region"
    """How a tier's requests reach replicas: "region" = a router per region and (family, tier)
    queues them for the slots of that region's replicas only; "global" = one router per (family,
    tier) pools every region's replicas. The TTFT promise is kept per queue
    (planner.plan.promise)."""


class Variant(Frozen, frozen=True, kw_only=True):
    """A model that may serve a family's tiers besides its flagship (e.g. a distilled model)."""

    model: Id
    """A model id of the catalog; also the variant's name in tiers and plans."""
    quality: Quality | None = None
    """Capability score on the catalog's 0-100 scale; default: the catalog model's ``quality``."""
    min_tokens_per_s_per_user: SpeedFloor | None = None
    """Streaming speed this variant promises on tiers that have a speed floor (e.g. 1000 for an
    SRAM-resident model): its candidates must reach max(tier floor, this), and the choice model
    credits the extra speed (docs/demand.md)."""


class Family(Frozen, frozen=True, kw_only=True):
    """A product line sold under one name, priced from one base price card."""

    id: Id
    flagship: Id
    """The catalog model customers think they buy."""
    flagship_quality: Quality | None = None
    """Default: the catalog model's ``quality``."""
    variants: Annotated[tuple[Variant, ...], Meta(max_length=16)] = ()
    usd_per_m_input_tokens: Usd
    usd_per_m_output_tokens: PositiveUsd


class Tier(Frozen, frozen=True, kw_only=True):
    """A service level: SLOs, a menu of price multipliers, and which variants may serve it."""

    id: Id
    min_tokens_per_s_per_user: SpeedFloor | None = None
    """Floor on streaming speed per request (output tokens/s); None = no floor."""
    tokens_per_s_percentile: Percentile = 50.0
    max_ttft_ms: Annotated[float, Meta(gt=0, le=MAX_TTFT_MS)] | None = None
    """Ceiling on time to first token, queueing included; None = no TTFT SLO."""
    ttft_percentile: Percentile = 99.0
    completion_window_hours: Annotated[int, Meta(gt=0, le=MAX_HOURS)] | None = None
    """Batch tiers: each request completes within this many hours, so demand of a window may be
    served anywhere inside it. None = served in the hour it arrives."""
    multipliers: Annotated[tuple[Multiplier, ...], Meta(min_length=1, max_length=64)]
    """The price menu: multipliers of the family's base price the planner may choose."""
    reference_multiplier: Multiplier
    """The multiplier at which the choice model's reference shares hold; must be on the menu."""
    variants: (
        Annotated[
            tuple[Annotated[str, Meta(min_length=1, max_length=64)], ...], Meta(max_length=32)
        ]
        | None
    ) = None
    """Model ids (or "flagship") that may serve this tier; None = every variant of a family."""
    unserved_penalty_usd_per_m_output_tokens: Usd = 0.0
    """Cost of each demanded output token left unserved, beyond the lost revenue."""


class CompactDemand(Frozen, frozen=True, kw_only=True):
    """requests/s in hour h of day d of week w = level x daily_profile[h] x weekly_profile[d]."""

    level_requests_per_s: RequestsPerS
    daily_profile: Annotated[tuple[ProfileFactor, ...], Meta(min_length=24, max_length=24)]
    weekly_profile: Annotated[tuple[ProfileFactor, ...], Meta(min_length=7, max_length=7)] = (
        1.0,
    ) * 7
    weeks: Annotated[int, Meta(gt=0, le=MAX_HOURS // HOURS_PER_WEEK)] = 1


class ChoiceModel(Frozen, frozen=True, kw_only=True):
    """Multinomial-logit choice among a family's tiers and the outside option (docs/demand.md)."""

    reference_shares: Annotated[dict[str, UnitFraction], Meta(max_length=32)]
    """Share of the market per tier id plus "outside", at reference multipliers served by the
    reference variant; sums to 1. A tier absent here is not sold for this family."""
    price_sensitivity: ChoiceWeight
    """beta_price: utility lost per unit of ln(multiplier)."""
    speed_weight: ChoiceWeight = 0.0
    """beta_speed: utility gained per unit of ln(tokens/s per user) relative to the tier's floor."""
    quality_weight: ChoiceWeight = 0.0
    """beta_quality: utility per quality point of the serving variant relative to the flagship."""


class FamilyDemand(Frozen, frozen=True, kw_only=True):
    family: Id
    requests_per_s: HourlyRates | None = None
    """Explicit hourly requests/s over the horizon, all tiers together, at reference prices."""
    compact: CompactDemand | None = None
    """The same, as level x daily x weekly profiles; exactly one of the two forms."""
    mean_input_tokens: Tokens
    mean_output_tokens: Tokens
    prefix_cache_hit_rate: Annotated[float, Meta(ge=0, lt=1)] = 0.0
    """Fraction of input tokens served from the prefix cache: they need no prefill compute, but
    their KV is still held and read by every stream (still billed at the input price)."""
    choice: ChoiceModel

    @property
    def hours(self) -> int:
        """Length of the forecast in hours (the horizon)."""
        if self.requests_per_s is not None:
            return len(self.requests_per_s)
        return self.compact.weeks * HOURS_PER_WEEK if self.compact is not None else 0


Metric = Literal[
    "revenue_usd",
    "cost_usd",
    "margin_usd",
    "margin_fraction",
    "gap",
    "status",
    "tier_served",
    "price_multiplier",
    "pool_utilization",
    "served_fraction",
    "variant_share",
    "reason",
]


class Expectation(Frozen, frozen=True, kw_only=True):
    """One claim about the plan, checked by ``farebox check``.

    Selectors narrow the metric (``family``, ``tier``, ``pool``, ``variant``); which ones each
    metric takes is in ``planner.scenario.decode.METRIC_SELECTORS``. Numeric metrics take
    ``min``/``max``; ``status`` takes ``equals`` (a status string); ``tier_served`` takes
    ``equals`` (a bool); ``reason`` takes ``contains``.
    """

    metric: Metric
    family: Id | None = None
    tier: Id | None = None
    pool: Id | None = None
    variant: Id | None = None
    min: float | None = None
    max: float | None = None
    equals: str | bool | None = None
    contains: str | None = None
    note: str = ""
    """Why the expectation holds, for the reader of a failing check."""


class Scenario(Frozen, frozen=True, kw_only=True):
    meta: ScenarioMeta
    options: Options = Options()
    fleet: Fleet
    families: Annotated[tuple[Family, ...], Meta(min_length=1, max_length=64)]
    tiers: Annotated[tuple[Tier, ...], Meta(min_length=1, max_length=16)]
    demand: Annotated[tuple[FamilyDemand, ...], Meta(min_length=1, max_length=64)]
    expect: Annotated[tuple[Expectation, ...], Meta(max_length=MAX_LIST)] = ()
