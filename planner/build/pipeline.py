"""Scenario + catalog -> PlanningTables (what the solver sees) + the details the plan needs.

Steps:
1. Inventory per pool and period: count x availability x outages per hour; a period keeps the
   systems usable through all its hours (the minimum), floored. Cost per system-hour: the pool's
   override, else the catalog system's price, else devices x the accelerator's price.
2. Performance: each (variant model, pool system, family token profile) is estimated once over
   the scenario's search grid (``fleet.perf.grid.evaluate_grid``) at the full input length, of
   which round(isl x prefix-cache hit rate) tokens are cached: their prefill is skipped, their KV
   is still held and read by every stream.
3. SLO filter per (family, tier, variant, pool) (``planner.build.candidates.eligible``). A sold tier
   that no variant can serve on any pool gets a planner's sentence (``planner.build.reasons``); with
   ``allow_unserved_tiers`` false the scenario is infeasible by construction and nothing is solved.
4. Demand (``planner.build.demand.build_demand``), without the offers no candidate can serve.
5. Units: a replica smaller than a system is packed with its copies onto whole systems (8
   one-GPU replicas on an 8-GPU node), so the tables count whole systems; ``replicas_per_unit``
   says how many model replicas one table "replica" is.
6. Headroom and pruning per group, against the load its queue can carry at most: the tier's
   lowest demand over the price cards that sell it with the group's variant in each period, but
   no more than the pools of the group's routing domain (its region, by default) could serve
   with every system on it (``planner.build.candidates.prune``). Utilization caps grow with the
   load, so a queue that carries less waits longer: ``planner.plan.promise`` checks the plan's
   queues at their planned load after the solve and repairs the few that miss.
   Groups alike in everything pruning sees (estimates, rows, SLO, load: pools of one system in
   several regions, say) are pruned once.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import TypeVar

import numpy as np

from fleet.catalog import PRECISIONS
from fleet.catalog.load import Catalog
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.disagg import form_units
from fleet.perf.engines import engine_arrays, engine_note, with_serving_overhead
from fleet.perf.grid import evaluate_grid
from fleet.perf.types import Configs, Estimate, FloatArray, IntArray
from planner.build.candidates import Pruned, Slo, eligible, prune
from planner.build.demand import DemandInfo, build_demand, offer_speed
from planner.build.disagg import Serving, combine, group_columns, layout_labels
from planner.build.reasons import GroupTrace, Reason, unserved_reason
from planner.scenario.decode import check_catalog
from planner.scenario.derived import family_variants, horizon_hours
from planner.scenario.schema import HOURS_PER_WEEK, FamilyDemand, Pool, Scenario
from planner.solve.tables import Candidates, Demand, Inventory, PlanningTables


@dataclass(frozen=True, slots=True)
class CandidateDetails:
    """Side table of the candidates, row for row with ``PlanningTables.candidates``."""

    configs: Configs
    tokens_per_s_per_user: FloatArray
    ttft_floor_s: FloatArray
    """Time to first token with no queueing as a user sees it: the performance model's floor
    (prefill + one decode step) plus the engine's per-request serving cost (HTTP front-end,
    tokenization, scheduling, first detokenization; ``fleet.perf.engines
    .with_serving_overhead``), which every measured TTFT carries."""
    request_s: FloatArray
    """Seconds a request holds one of the candidate's queue slots: a batch slot of an aggregated
    replica (TTFT floor + streaming), a prefill replica of a disaggregated unit (its prefill)."""
    queue_slots: FloatArray
    """Queue slots per model replica: the batch of an aggregated replica, the prefill replicas of
    a disaggregated unit (``planner.build.disagg``)."""
    ceiling_tokens_per_s: FloatArray
    """Output tokens/s per table unit its decode side bounds whatever the queue allows (a
    disaggregated unit, ``planner.build.disagg``); inf for aggregated replicas."""
    layout: tuple[str, ...]
    """The disaggregated layout of a unit ('' for an aggregated replica)."""
    raw_tokens_per_s_per_replica: FloatArray
    """Without queueing headroom (a full batch, closed loop)."""
    utilization_cap: FloatArray
    """(cands, periods)."""
    ttft_slo_s: FloatArray
    """(cands,): the tier's TTFT SLO; nan when the tier has none."""
    ttft_quantile: FloatArray
    output_tokens: FloatArray
    """(cands,): mean output tokens per request of the candidate's family."""
    replicas_per_unit: IntArray
    """(cands,): model replicas packed into one table "replica" (a unit of whole systems):
    devices_per_system // devices_per_replica for replicas smaller than a system, else 1. The
    tables' systems_per_replica and tokens_per_s_per_replica are per unit."""
    engine: np.ndarray
    """(cands,): the serving engine id of each candidate (object array of str)."""


@dataclass(frozen=True, slots=True)
class Built:
    """A plannable scenario: the tables the solver sees and the side tables the plan needs."""

    scenario: Scenario
    tables: PlanningTables
    candidates: CandidateDetails
    demand: DemandInfo
    reasons: tuple[str, ...]
    """Sold tiers no configuration can serve, planned as unserved (``allow_unserved_tiers``)."""
    warnings: tuple[str, ...]
    build_s: float


@dataclass(frozen=True, slots=True)
class Unplannable:
    """A scenario infeasible by construction: a sold tier no configuration can serve, with
    ``allow_unserved_tiers`` false. Nothing is solved; the reasons say why."""

    scenario: Scenario
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    build_s: float


def pool_hourly_systems(pool: Pool, hours: int) -> FloatArray:
    """Systems usable in each hour (fractional)."""
    frac = np.ones(hours)
    if pool.availability is not None:
        weekly = np.asarray(pool.availability, dtype=np.float64)
        frac = np.tile(weekly, hours // HOURS_PER_WEEK) if weekly.shape[0] != hours else weekly
    for outage in pool.outages:
        span = slice(outage.start_hour, min(outage.end_hour, hours))
        frac[span] = np.minimum(frac[span], outage.fraction_available)
    return pool.count * frac


def build_inventory(s: Scenario, catalog: Catalog) -> Inventory:
    hours = horizon_hours(s)
    ph = s.options.period_hours
    hourly = np.stack([pool_hourly_systems(p, hours) for p in s.fleet.pools])
    per_period = hourly.reshape(len(s.fleet.pools), -1, ph).min(axis=2)
    cost = []
    for pool in s.fleet.pools:
        system = catalog.system(pool.system)
        accelerator = catalog.accelerator(system.accelerator)
        cost.append(
            pool.usd_per_hour
            or system.usd_per_hour
            or system.devices_per_system * accelerator.usd_per_hour
        )
    return Inventory(
        pool_ids=tuple(p.id for p in s.fleet.pools),
        systems_available=np.floor(per_period + 1e-9).astype(np.int64),
        usd_per_system_hour=np.asarray(cost, dtype=np.float64),
    )


def routing_domains(s: Scenario) -> IntArray:
    """(pools,): the routing domain (queue) each pool's replicas join: its region's index under
    ``fleet.routing = "region"``, 0 for all under ``"global"``."""
    if s.fleet.routing == "global":
        return np.zeros(len(s.fleet.pools), dtype=np.int64)
    regions = sorted({p.region for p in s.fleet.pools})
    return np.asarray([regions.index(p.region) for p in s.fleet.pools], dtype=np.int64)


GridKey = tuple[str, str, int, int, int, str]
"""(model, system, isl, prefix-cached tokens, osl, engine): one evaluated search grid."""


def token_profile(d: FamilyDemand) -> tuple[int, int]:
    """(isl, prefix-cached tokens) of a demand entry: the whole mean prompt, and the share of it
    the prefix cache supplies (rounded, below isl)."""
    isl = max(1, round(d.mean_input_tokens))
    return isl, min(isl - 1, round(isl * d.prefix_cache_hit_rate))


@dataclass(frozen=True, slots=True)
class Offer:
    """A (family, tier, serving model) the scenario sells, with its family's token profile."""

    family: int
    tier: int
    model: str
    isl: int
    cached: int
    osl: int


def offers(s: Scenario) -> Iterator[Offer]:
    """Every (family, tier, model) ``screen`` evaluates: the tiers a family's demand sells, each
    with the models admitted for it (``family_variants``)."""
    demand_of = {d.family: d for d in s.demand}
    for f, fam in enumerate(s.families):
        d = demand_of[fam.id]
        isl, cached = token_profile(d)
        osl = max(1, round(d.mean_output_tokens))
        for k, tier in enumerate(s.tiers):
            if tier.id not in d.choice.reference_shares:
                continue
            for model in family_variants(s, f, k):
                yield Offer(f, k, model, isl, cached, osl)


@dataclass(frozen=True, slots=True)
class _Group:
    family: int
    tier: int
    model: str
    pool: int
    key: GridKey
    rows: IntArray
    slo: Slo


@dataclass(frozen=True, slots=True)
class Screen:
    """Steps 2-3: every (family, tier, variant, pool) group with configurations meeting its SLOs,
    and the reasons for sold tiers that none can serve. Cheap next to the whole build (no demand,
    no queueing), so the API runs it when a request arrives."""

    estimates: dict[GridKey, tuple[Configs, Estimate]]
    serving: dict[GridKey, Serving]
    """The grids with disaggregated units appended (``options.search.disaggregated``)."""
    groups: tuple[_Group, ...]
    unservable: frozenset[tuple[int, int, str]]
    reasons: tuple[Reason, ...]


def screen(s: Scenario, catalog: Catalog, arrays: CatalogArrays, pool_max: IntArray) -> Screen:
    """Evaluate the search grid per (variant, pool system, token profile) once and filter it by
    each tier's SLOs and each pool's size (``pool_max``: most systems of each pool in a period)."""
    search = s.options.search
    estimates: dict[GridKey, tuple[Configs, Estimate]] = {}
    serving: dict[GridKey, Serving] = {}
    groups: list[_Group] = []
    traces: dict[tuple[int, int, str], GroupTrace] = {}
    promise = {
        (f, v.model): v.min_tokens_per_s_per_user
        for f, fam in enumerate(s.families)
        for v in fam.variants
    }
    spec = tuple((o.draft_tokens, o.acceptance) for o in search.speculative)
    # Each engine is its own set of factor arrays (the pooled ones for "any").
    engines = {e: engine_arrays(catalog, arrays, e) for e in dict.fromkeys(search.engines)}
    for offer in offers(s):
        f, k, model = offer.family, offer.tier, offer.model
        isl, cached, osl = offer.isl, offer.cached, offer.osl
        tier = s.tiers[k]
        slo = Slo(
            min_tokens_per_s_per_user=offer_speed(s, k, promise.get((f, model))),
            max_ttft_s=None if tier.max_ttft_ms is None else tier.max_ttft_ms / 1e3,
            ttft_quantile=tier.ttft_percentile / 100.0,
        )
        trace = traces.setdefault((f, k, model), GroupTrace())
        for (p, pool), (engine, engine_factors) in itertools.product(
            enumerate(s.fleet.pools), engines.items()
        ):
            key = (model, pool.system, isl, cached, osl, engine)
            if key not in estimates:
                grid = evaluate_grid(
                    catalog,
                    engine_factors,
                    model,
                    pool.system,
                    batches=search.batch_caps,
                    precisions=search.precisions,
                    isl=isl,
                    osl=osl,
                    prefix_cached_tokens=cached,
                    spec=spec,
                )
                if search.disaggregated:
                    units = form_units(engine_factors, *grid)
                    serving[key] = Serving(units, len(grid[0]))
                    grid = combine(*grid, units)
                grid = (grid[0], with_serving_overhead(engine_factors, *grid))
                estimates[key] = grid
            configs, est = estimates[key]
            mask = eligible(est, slo)
            mask &= est.systems_per_replica <= pool_max[p]
            trace.observe(pool.id, int(pool_max[p]), configs, est, slo)
            rows = np.flatnonzero(mask)
            if rows.size:
                groups.append(_Group(f, k, model, p, key, rows, slo))
    servable = {(g.family, g.tier, g.model) for g in groups}
    unservable = frozenset(key for key in traces if key not in servable)
    reasons: list[Reason] = []
    for f in range(len(s.families)):
        for k, tier in enumerate(s.tiers):
            models = [m for (ff, kk, m) in traces if ff == f and kk == k]
            if models and all((f, k, m) in unservable for m in models):
                reasons.extend(unserved_reason(m, k, tier, traces[(f, k, m)]) for m in models)
    return Screen(estimates, serving, tuple(groups), unservable, tuple(reasons))


def lowest_demand(
    demand: Demand, mean_output_tokens: FloatArray
) -> dict[tuple[int, int, int], FloatArray]:
    """Requests/s per period that size the TTFT headroom of a (family, tier, variant)'s
    candidates: the lowest demand of the tier over the price cards that sell it with that
    variant. A candidate only serves offers of its own variant, so cards selling the tier with
    another variant never load it; taking them into the minimum would shrink its headroom (and
    admitting one more variant could lower the optimum)."""
    out: dict[tuple[int, int, int], FloatArray] = {}
    offers = demand.offers
    for k in range(len(demand.tier_ids)):
        offer = demand.combo_offer[:, k]
        sold = np.flatnonzero(offer >= 0)
        pairs = np.stack([demand.combo_family[sold], offers.variant[offer[sold]]], axis=1)
        for f, v in np.unique(pairs, axis=0).tolist():
            rows = sold[(pairs[:, 0] == f) & (pairs[:, 1] == v)]
            out[(f, k, v)] = demand.tokens_per_s[rows, k].min(axis=0) / mean_output_tokens[f]
    return out


def estimated_pools(s: Scenario, catalog: Catalog) -> tuple[str, ...]:
    """A warning per pool whose accelerator's performance is an estimate, not measured (its
    efficiency factors are another family's fit taken as they are), and one per known caveat of
    its figures (``Efficiency.caveats``; docs/calibration.md)."""
    out = []
    for pool in s.fleet.pools:
        acc = catalog.accelerator(catalog.system(pool.system).accelerator)
        if acc.efficiency.basis == "hopper-transfer-estimate":
            family = "/".join(acc.efficiency.transfer_from)
            measured = (
                f"its efficiency factors are the {family} fit taken as they are"
                if acc.partial_kernel is None
                else f"only its 8-bit FLOP fraction is measured (kernel timings); its other "
                f"efficiency factors are the {family} fit taken as they are"
            )
            out.append(
                f"pool {pool.id}: {acc.name} performance is an estimate: no serving runs of this "
                f"accelerator exist, {measured}; treat its speeds, capacity and cost per token "
                "as indicative (docs/calibration.md)"
            )
        out.extend(f"pool {pool.id}: {acc.name}: {c}" for c in acc.efficiency.caveats)
    return tuple(out)


def unmeasured_engines(s: Scenario, catalog: Catalog) -> tuple[str, ...]:
    """A warning per (engine searched, pool accelerator) whose engine multipliers are not all
    measured (``fleet.perf.engines.engine_note``)."""
    accs = dict.fromkeys(catalog.system(p.system).accelerator for p in s.fleet.pools)
    notes = (
        engine_note(catalog, e, a, s.options.search.precisions)
        for e in dict.fromkeys(s.options.search.engines)
        for a in accs
    )
    return tuple(n for n in notes if n)


def build(
    s: Scenario, catalog: Catalog, arrays: CatalogArrays | None = None
) -> Built | Unplannable:
    """Everything the solver and the plan need, or the reasons the scenario cannot be planned."""
    start = time.perf_counter()
    check_catalog(s, catalog)
    arrays = arrays if arrays is not None else build_arrays(catalog)
    inventory = build_inventory(s, catalog)
    pool_max = inventory.systems_available.max(axis=1)
    quality = {m.id: m.quality for m in catalog.models.values()}
    screened = screen(s, catalog, arrays, pool_max)
    estimates, groups, unservable = screened.estimates, screened.groups, screened.unservable
    reasons = tuple(r.text for r in screened.reasons)
    warnings: list[str] = [
        *estimated_pools(s, catalog),
        *unmeasured_engines(s, catalog),
    ]
    if reasons and not s.options.allow_unserved_tiers:
        return Unplannable(s, reasons, tuple(warnings), time.perf_counter() - start)
    warnings.extend(f"planned as unserved: {r}" for r in reasons)
    servable_precisions = frozenset(
        (g.family, g.tier, g.model, PRECISIONS[int(p)])
        for g in groups
        for p in np.unique(estimates[g.key][0].weight_precision[g.rows])
    )
    demand, info = build_demand(s, quality, unservable, servable_precisions)
    warnings.extend(info.warnings)
    # A group's rows split over the variants of its model by precision (docs/demand.md).
    variants_of: dict[tuple[int, str], list[tuple[int, IntArray]]] = {}
    for i in range(len(info.variant_model)):
        precisions = np.asarray([PRECISIONS.index(p) for p in info.variant_precisions[i]])
        key = (int(info.variant_family[i]), info.variant_model[i])
        variants_of.setdefault(key, []).append((i, precisions))
    lowest = lowest_demand(demand, info.mean_output_tokens)
    no_load = np.zeros(inventory.systems_available.shape[1])
    # Each group's rows, split over the variants of its model by precision.
    split: list[tuple[_Group, int]] = []
    for group in groups:
        configs, _ = estimates[group.key]
        for variant, precisions in variants_of[(group.family, group.model)]:
            rows = group.rows[np.isin(configs.weight_precision[group.rows], precisions)]
            if rows.size:
                split.append((dataclasses.replace(group, rows=rows), variant))
    domain = routing_domains(s)
    # Requests/s each (family, tier, variant, routing domain) could serve with every system of
    # its pools on its best configuration: no queue of the domain carries more.
    reach: dict[tuple[int, int, int, int], FloatArray] = {}
    columns = []
    for g, variant in split:
        configs, est = estimates[g.key]
        devices_per_system = catalog.system(g.key[1]).devices_per_system
        gc = group_columns(
            configs, est, g.rows, devices_per_system, screened.serving.get(g.key), g.slo
        )
        columns.append(gc)
        units = gc.columns.systems_per_unit
        per_system = float(np.max(gc.raw_tokens_per_s * gc.pack / units))
        key4 = (g.family, g.tier, variant, int(domain[g.pool]))
        served = per_system * inventory.systems_available[g.pool] / float(g.key[4])
        reach[key4] = reach.get(key4, no_load) + served
    parts: list[dict[str, np.ndarray]] = []
    labels: list[str] = []
    chosen: list[tuple[Configs, Estimate]] = []
    # Pools of one system (regions) and variants share estimates, and a family's tier has one
    # demand: groups with the same rows, SLO and load prune alike, so each is pruned once.
    pruned: dict[tuple[object, ...], Pruned] = {}
    for (g, variant), gc in zip(split, columns, strict=True):
        configs, est = estimates[g.key]
        osl = float(g.key[4])
        pack, cols = gc.pack, gc.columns
        # No card sells the tier with this variant: its candidates can serve nothing anyway.
        most = reach[(g.family, g.tier, variant, int(domain[g.pool]))]
        load = np.minimum(lowest.get((g.family, g.tier, variant), no_load), most)
        same = (g.key, g.slo, g.rows.tobytes(), load.tobytes())
        if same not in pruned:
            pruned[same] = prune(cols, g.slo, load, osl)
        kept = pruned[same]
        rows = g.rows[kept.rows]
        n = kept.rows.shape[0]
        chosen.append((configs.take(rows), est.take(rows)))
        parts.append(
            {
                "pool": np.full(n, g.pool),
                "family": np.full(n, g.family),
                "tier": np.full(n, g.tier),
                "variant": np.full(n, variant),
                "pack": pack[kept.rows],
                "spu": cols.systems_per_unit[kept.rows],
                "capacity": kept.tokens_per_s_per_replica,
                "cap": kept.utilization_cap,
                "ttft_slo": np.full(n, np.nan if g.slo.max_ttft_s is None else g.slo.max_ttft_s),
                "quantile": np.full(n, g.slo.ttft_quantile),
                "osl": np.full(n, osl),
                "engine": np.full(n, g.key[5], dtype=object),
                "slots": gc.queue_slots[kept.rows],
                "hold": cols.request_s[kept.rows],
                "raw": gc.raw_tokens_per_s[kept.rows],
                "ceiling": gc.ceiling_tokens_per_s[kept.rows],
            }
        )
        labels.extend(layout_labels(screened.serving.get(g.key), rows))
    tables, details = _stack_tables(parts, chosen, labels, inventory, demand, s)
    return Built(s, tables, details, info, reasons, tuple(warnings), time.perf_counter() - start)


def _stack_tables(
    parts: list[dict[str, np.ndarray]],
    chosen: list[tuple[Configs, Estimate]],
    labels: list[str],
    inventory: Inventory,
    demand: Demand,
    s: Scenario,
) -> tuple[PlanningTables, CandidateDetails]:
    periods = inventory.systems_available.shape[1]

    def cat(name: str, dtype: type, shape: tuple[int, ...] = ()) -> np.ndarray:
        if not parts:
            return np.zeros((0, *shape), dtype=dtype)
        return np.concatenate([p[name] for p in parts]).astype(dtype)

    configs = _concat(Configs, [c for c, _ in chosen])
    est = _concat(Estimate, [e for _, e in chosen])
    pool = cat("pool", np.int64)
    spr = cat("spu", np.int64)
    max_systems = inventory.systems_available.max(axis=1)
    candidates = Candidates(
        pool=pool,
        family=cat("family", np.int64),
        tier=cat("tier", np.int64),
        variant=cat("variant", np.int64),
        systems_per_replica=spr,
        tokens_per_s_per_replica=cat("capacity", np.float64, (periods,)),
        max_replicas=(max_systems[pool] // np.maximum(spr, 1)).astype(np.int64),
    )
    tables = PlanningTables(
        inventory=inventory,
        demand=demand,
        candidates=candidates,
        period_hours=float(s.options.period_hours),
    )
    details = CandidateDetails(
        configs=configs,
        tokens_per_s_per_user=est.tokens_per_s_per_user,
        ttft_floor_s=est.ttft_floor_s,
        request_s=cat("hold", np.float64),
        queue_slots=cat("slots", np.float64),
        ceiling_tokens_per_s=cat("ceiling", np.float64),
        layout=tuple(labels),
        raw_tokens_per_s_per_replica=cat("raw", np.float64),
        utilization_cap=cat("cap", np.float64, (periods,)),
        ttft_slo_s=cat("ttft_slo", np.float64),
        ttft_quantile=cat("quantile", np.float64),
        output_tokens=cat("osl", np.float64),
        replicas_per_unit=cat("pack", np.int64),
        engine=cat("engine", object),
    )
    return tables, details


T = TypeVar("T", Configs, Estimate)


def _concat(kind: type[T], parts: list[T]) -> T:
    """Row-wise concatenation of column dataclasses (empty columns when there are no parts)."""
    columns = {}
    for f in fields(kind):
        if parts:
            columns[f.name] = np.concatenate([getattr(p, f.name) for p in parts])
        else:
            columns[f.name] = np.zeros(0)
    return kind(**columns)
