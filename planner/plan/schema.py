"""The Plan: what farebox answers. A frozen, JSON-encodable msgspec Struct.

It is the one output every face consumes: the CLI summary, ``farebox check`` expectations, the
Parquet report and the REST API. Figures are in the units their names carry (USD, tokens/s,
milliseconds for TTFT as SLOs are written); periods are indices into the horizon, each
``period_hours`` long, period t covering hours [t x period_hours, (t + 1) x period_hours).

``planner.plan.assemble.assemble_plan`` builds it from a ``SolveResult`` and the build's side
tables; ``planner.run.plan_scenario`` is the entry point.
"""

from __future__ import annotations

from msgspec import Struct

from planner.solve.solution import SolveStatus


class Frozen(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every plan type."""


class TierPrice(Frozen, frozen=True, kw_only=True):
    """The price card chosen for one (family, tier): one per tier the family sells."""

    family: str
    tier: str
    variant: str
    """Model id that serves the tier (the flagship or a distilled variant)."""
    multiplier: float
    usd_per_m_input_tokens: float
    usd_per_m_output_tokens: float
    reference_multiplier: float
    precisions: tuple[str, ...] = ()
    """Weight precisions the tier's offer is served at (the variant's precision class)."""
    quality_loss: float = 0.0
    """Fraction of the variant's quality lost at those precisions (0 = lossless class)."""


class Assignment(Frozen, frozen=True, kw_only=True):
    """Replicas of one configuration serving one (family, tier) on one pool in one period."""

    period: int
    pool: str
    family: str
    tier: str
    variant: str
    """Model id actually served."""
    tp: int
    pp: int
    dp: int
    ep: int
    precision: str
    kv_precision: str
    batch_cap: int
    spec_draft_tokens: int
    """Speculative decoding draft length; 0 = off."""
    replicas: int
    systems: int
    served_tokens_per_s: float
    """Output tokens/s this assignment serves."""
    capacity_tokens_per_s: float
    """Output tokens/s these replicas could serve within the tier's SLOs (headroom taken off)."""
    utilization: float
    """Fraction of batch slots busy on average: served / raw (no-headroom) capacity."""
    tokens_per_s_per_user: float
    """Expected streaming speed per request at full batch (the floor of the tier's guarantee)."""
    ttft_ms: float
    """Time to first token at the tier's TTFT percentile at this load (queueing included, in the
    queue the scenario's routing puts these replicas in); -1 when unbounded."""
    ttft_slo_ms: float | None = None
    """The tier's TTFT ceiling; None when the tier has none."""
    cost_usd: float
    """Running cost of these systems for the period."""
    engine: str = "any"
    """Serving engine whose efficiency factors the configuration was estimated with ("any" =
    the pooled factors)."""
    disaggregated: str = ""
    """For a disaggregated prefill/decode unit: its layout (decode replicas x decode layout +
    prefill replicas x prefill layout; tp/pp/dp/ep/batch above are the decode replica's and
    ``replicas`` counts units); '' for aggregated replicas."""


def meets_ttft_slo(a: Assignment) -> bool:
    """The assignment's reported TTFT is within its tier's SLO (always, without one). The plan's
    warnings and the report's ``slo_attainment`` both use this test."""
    if a.ttft_slo_ms is None:
        return True
    return 0.0 <= a.ttft_ms <= a.ttft_slo_ms


class Flow(Frozen, frozen=True, kw_only=True):
    """Demand and service of one (family, tier) in one period, at the chosen prices."""

    family: str
    tier: str
    period: int
    demand_tokens_per_s: float
    served_tokens_per_s: float
    unserved_tokens_per_s: float
    demand_requests_per_s: float
    revenue_usd: float
    """Revenue of the served tokens over the period."""


class PoolUsage(Frozen, frozen=True, kw_only=True):
    pool: str
    period: int
    systems_available: int
    systems_used: int
    utilization: float
    """systems_used / systems_available (0 when none are available)."""
    cost_usd: float


class Binding(Frozen, frozen=True, kw_only=True):
    """A constraint that limits the objective (e.g. a pool's inventory in the peak hours)."""

    kind: str
    """"inventory" (a pool in a period) or "demand" (a tier's demand in a period or window)."""
    key: str
    shadow_price_usd: float
    """What one more ``unit`` would add to the objective, from the hour LP at the chosen prices:
    USD per system-hour of a full pool; USD per million output tokens of fully served demand."""
    unit: str


class Plan(Frozen, frozen=True, kw_only=True):
    scenario: str
    status: SolveStatus
    message: str
    objective_usd: float
    """revenue - cost - penalty over the horizon."""
    revenue_usd: float
    cost_usd: float
    penalty_usd: float
    margin_usd: float
    """revenue - cost (penalties are not money paid)."""
    bound_usd: float
    """Proven upper bound on the objective (0 when the solver proved none)."""
    gap: float
    """(bound - objective) / max(|bound|, 1); 1.0 when no plan was found, 0 when infeasible."""
    solve_s: float
    build_s: float
    period_hours: float
    periods: int
    prices: tuple[TierPrice, ...] = ()
    assignments: tuple[Assignment, ...] = ()
    flows: tuple[Flow, ...] = ()
    pool_usage: tuple[PoolUsage, ...] = ()
    binding: tuple[Binding, ...] = ()
    reasons: tuple[str, ...] = ()
    """When infeasible: why, in a capacity planner's words."""
    warnings: tuple[str, ...] = ()
    """Things the planner noticed but planned around (e.g. a tier left unserved)."""

    @property
    def margin_fraction(self) -> float:
        return self.margin_usd / self.revenue_usd if self.revenue_usd > 0 else 0.0
