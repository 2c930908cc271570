"""Assemble the Plan from the solver's arrays and the build's side tables.

The solver speaks in indices (combo, candidate, period); the plan speaks in the business's names
(pool, family, tier, model, layout, USD). Money over a period = rate x period seconds. Before
naming anything, ``planner.plan.promise`` checks the plan's queues (one per family, tier, routing
domain and period, as the scenario routes requests) and repairs those whose wait would break a
member's TTFT SLO; the reported TTFT at the planned load = the assignment's TTFT floor + its queue's
wait at the tier's percentile, the same computation.
"""

from __future__ import annotations

import math

import numpy as np

from fleet.catalog.schema import PRECISIONS
from planner.build.pipeline import Built, Unplannable
from planner.plan.promise import keep_ttft_promise, queue_wait_s
from planner.plan.schema import (
    Assignment,
    Binding,
    Flow,
    Plan,
    PoolUsage,
    TierPrice,
    meets_ttft_slo,
)
from planner.plan.unserved import unserved_warnings
from planner.solve.solution import BindingConstraint, SolveResult, SolveStatus
from planner.solve.tables import SECONDS_PER_HOUR


def infeasible_plan(built: Unplannable) -> Plan:
    """The plan of a scenario that cannot be served as asked: reasons, no solve."""
    n = len(built.reasons)
    return Plan(
        scenario=built.scenario.meta.name,
        status=SolveStatus.INFEASIBLE,
        message=f"infeasible before solving: {n} tier{'s' if n != 1 else ''} cannot be served",
        objective_usd=0.0,
        revenue_usd=0.0,
        cost_usd=0.0,
        penalty_usd=0.0,
        margin_usd=0.0,
        bound_usd=0.0,
        gap=0.0,
        solve_s=0.0,
        build_s=built.build_s,
        period_hours=float(built.scenario.options.period_hours),
        periods=_periods(built),
        reasons=built.reasons,
        warnings=built.warnings,
    )


def _binding(b: BindingConstraint, period_hours: float) -> Binding:
    """The solver's duals are per unit of its rows (a system for one period; an output token/s
    of demand for one period): restate them per system-hour and per million output tokens."""
    if b.kind == "demand":
        per_m = b.shadow_price_usd / (SECONDS_PER_HOUR * period_hours) * 1e6
        return Binding(kind=b.kind, key=b.key, shadow_price_usd=per_m, unit="M output tokens")
    return Binding(
        kind=b.kind,
        key=b.key,
        shadow_price_usd=b.shadow_price_usd / period_hours,
        unit="system-hour",
    )


def _periods(built: Built | Unplannable) -> int:
    s = built.scenario
    return s.demand[0].hours // s.options.period_hours


def assemble_plan(built: Built, result: SolveResult) -> Plan:
    """Name every figure of ``result``; partial values are never read (no plan, no figures)."""
    if not result.status.has_plan:
        return Plan(
            scenario=built.scenario.meta.name,
            status=result.status,
            message=result.message,
            objective_usd=0.0,
            revenue_usd=0.0,
            cost_usd=0.0,
            penalty_usd=0.0,
            margin_usd=0.0,
            bound_usd=_bound_usd(result),
            gap=_gap(result),
            solve_s=result.solve_s,
            build_s=built.build_s + result.build_s,
            period_hours=built.tables.period_hours,
            periods=built.tables.periods,
            reasons=built.reasons,
            warnings=built.warnings,
        )
    result = keep_ttft_promise(built, result)  # may add replicas: every figure comes after it
    assignments = _assignments(built, result)
    flows = _flows(built, result)
    return Plan(
        scenario=built.scenario.meta.name,
        status=result.status,
        message=result.message,
        objective_usd=result.objective_usd,
        revenue_usd=result.revenue_usd,
        cost_usd=result.cost_usd,
        penalty_usd=result.penalty_usd,
        margin_usd=result.revenue_usd - result.cost_usd,
        bound_usd=_bound_usd(result),
        gap=_gap(result),
        solve_s=result.solve_s,
        build_s=built.build_s + result.build_s,
        period_hours=built.tables.period_hours,
        periods=built.tables.periods,
        prices=_prices(built, result),
        assignments=assignments,
        flows=flows,
        pool_usage=_pool_usage(built, result),
        binding=tuple(_binding(b, built.tables.period_hours) for b in result.binding),
        reasons=built.reasons,
        warnings=(
            built.warnings
            + _late(built, assignments)
            + tuple(unserved_warnings(built, result, flows))
        ),
    )


def _bound_usd(result: SolveResult) -> float:
    return result.bound_usd if math.isfinite(result.bound_usd) else 0.0


def _gap(result: SolveResult) -> float:
    return result.gap if math.isfinite(result.gap) else 1.0


def _prices(built: Built, result: SolveResult) -> tuple[TierPrice, ...]:
    t, info, s = built.tables, built.demand, built.scenario
    d, offers = t.demand, t.demand.offers
    out = []
    for f, family in enumerate(s.families):
        combo = int(result.combo[f])
        for k, tier in enumerate(s.tiers):
            o = int(d.combo_offer[combo, k])
            if o < 0:
                continue
            m = float(offers.multiplier[o])
            v = int(offers.variant[o])
            precisions = info.variant_precisions[v]
            out.append(
                TierPrice(
                    family=family.id,
                    tier=tier.id,
                    variant=info.variant_model[v],
                    multiplier=m,
                    usd_per_m_input_tokens=m * family.usd_per_m_input_tokens,
                    usd_per_m_output_tokens=m * family.usd_per_m_output_tokens,
                    reference_multiplier=tier.reference_multiplier,
                    precisions=precisions,
                    quality_loss=float(info.variant_quality_loss[v]),
                )
            )
    return tuple(out)


def _late(built: Built, assignments: tuple[Assignment, ...]) -> tuple[str, ...]:
    """A warning per tier with an assignment whose reported TTFT misses its SLO (``planner.
    promise`` repairs the plan so that none does: a warning here is a planner bug, said aloud)."""
    out = []
    for tier in built.scenario.tiers:
        late = [a for a in assignments if a.tier == tier.id and not meets_ttft_slo(a)]
        if late:
            worst = max(late, key=lambda a: math.inf if a.ttft_ms < 0 else a.ttft_ms)
            shown = "unbounded" if worst.ttft_ms < 0 else f"{worst.ttft_ms:,.0f} ms"
            out.append(
                f"{len(late)} {tier.id} assignment(s) report p{tier.ttft_percentile:g} TTFT above "
                f"the {tier.max_ttft_ms:g} ms SLO at the planned load (worst {shown}: "
                f"{worst.pool}, period {worst.period}, {worst.utilization:.0%} utilized)"
            )
    return tuple(out)


def _assignments(built: Built, result: SolveResult) -> tuple[Assignment, ...]:
    t, det, info, s = built.tables, built.candidates, built.demand, built.scenario
    cand = t.candidates
    c_idx, p_idx = np.nonzero(result.replicas > 0)
    units = result.replicas[c_idx, p_idx]
    served = result.served_tokens_per_s[c_idx, p_idx]
    replicas = units * det.replicas_per_unit[c_idx]
    raw = units * det.raw_tokens_per_s_per_replica[c_idx] * det.replicas_per_unit[c_idx]
    wait = queue_wait_s(built, c_idx, p_idx, replicas, served)
    has_slo = ~np.isnan(det.ttft_slo_s[c_idx])
    ttft_s = det.ttft_floor_s[c_idx] + np.where(has_slo, wait, 0.0)
    systems = units * cand.systems_per_replica[c_idx]
    cost = systems * t.inventory.usd_per_system_hour[cand.pool[c_idx]] * t.period_hours
    cfg = det.configs
    slo_ms = [tier.max_ttft_ms for tier in s.tiers]
    out = []
    for i, (c, p) in enumerate(zip(c_idx.tolist(), p_idx.tolist(), strict=True)):
        out.append(
            Assignment(
                period=p,
                pool=t.inventory.pool_ids[int(cand.pool[c])],
                family=s.families[int(cand.family[c])].id,
                tier=s.tiers[int(cand.tier[c])].id,
                variant=info.variant_model[int(cand.variant[c])],
                tp=int(cfg.tp[c]),
                pp=int(cfg.pp[c]),
                dp=int(cfg.dp[c]),
                ep=int(cfg.ep[c]),
                precision=PRECISIONS[int(cfg.weight_precision[c])],
                kv_precision=PRECISIONS[int(cfg.kv_precision[c])],
                batch_cap=int(cfg.batch[c]),
                spec_draft_tokens=int(cfg.spec_draft_tokens[c]),
                replicas=int(replicas[i]),
                systems=int(systems[i]),
                served_tokens_per_s=float(served[i]),
                capacity_tokens_per_s=float(units[i] * cand.tokens_per_s_per_replica[c, p]),
                utilization=float(served[i] / raw[i]) if raw[i] > 0 else 0.0,
                tokens_per_s_per_user=float(det.tokens_per_s_per_user[c]),
                ttft_ms=float(ttft_s[i] * 1e3) if np.isfinite(ttft_s[i]) else -1.0,
                ttft_slo_ms=slo_ms[int(cand.tier[c])],
                cost_usd=float(cost[i]),
                engine=str(det.engine[c]),
                disaggregated=det.layout[c],
            )
        )
    out.sort(key=lambda a: (a.period, a.pool, a.family, a.tier))
    return tuple(out)


def _flows(built: Built, result: SolveResult) -> tuple[Flow, ...]:
    t, info, s = built.tables, built.demand, built.scenario
    d, cand = t.demand, t.candidates
    n_f, n_k, n_t = len(s.families), len(s.tiers), t.periods
    served = np.zeros((n_f, n_k, n_t))
    np.add.at(served, (cand.family, cand.tier), result.served_tokens_per_s)
    seconds = t.period_hours * SECONDS_PER_HOUR
    out = []
    for f, family in enumerate(s.families):
        combo = int(result.combo[f])
        for k, tier in enumerate(s.tiers):
            o = int(d.combo_offer[combo, k])
            if o < 0:
                continue
            demand = d.tokens_per_s[combo, k]
            price = d.offers.usd_per_output_token[o]
            for p in range(n_t):
                out.append(
                    Flow(
                        family=family.id,
                        tier=tier.id,
                        period=p,
                        demand_tokens_per_s=float(demand[p]),
                        served_tokens_per_s=float(served[f, k, p]),
                        unserved_tokens_per_s=float(result.unserved_tokens_per_s[f, k, p]),
                        demand_requests_per_s=float(demand[p] / info.mean_output_tokens[f]),
                        revenue_usd=float(served[f, k, p] * price[p] * seconds),
                    )
                )
    return tuple(out)


def _pool_usage(built: Built, result: SolveResult) -> tuple[PoolUsage, ...]:
    t = built.tables
    inv, cand = t.inventory, t.candidates
    used = np.zeros(inv.systems_available.shape, dtype=np.int64)
    np.add.at(used, cand.pool, result.replicas * cand.systems_per_replica[:, None])
    out = []
    for h, pool in enumerate(inv.pool_ids):
        for p in range(t.periods):
            available = int(inv.systems_available[h, p])
            out.append(
                PoolUsage(
                    pool=pool,
                    period=p,
                    systems_available=available,
                    systems_used=int(used[h, p]),
                    utilization=float(used[h, p] / available) if available else 0.0,
                    cost_usd=float(used[h, p] * inv.usd_per_system_hour[h] * t.period_hours),
                )
            )
    return tuple(out)
