"""How much work a scenario asks of the planner, counted before any of it is done.

``planner.build.pipeline.screen`` evaluates one search grid (layouts x precisions x batch
caps x speculative options, ``fleet.perf.grid``) per distinct (model, pool system, token profile,
engine) and keeps them all while it builds; then it checks each grid's rows against the SLOs of
every (family, tier, variant, pool) that uses it. Both grow as products of the scenario's lists,
so a small request can ask for a great deal: 400 repeated precisions once drove a server past 20 GB.
``workload`` counts both in milliseconds (layouts only, nothing evaluated), so a server can refuse
a scenario over its limits before starting; ``check_workload`` raises the refusal naming the field.

Measured (2 shared cores): the frontier-lab week, the largest checked-in scenario, evaluates
588,438 configurations in 72 grids and makes 4,973,832 checks; its screen takes 0.5-2.3 s and
~190 MB. Counting them takes 0.04-0.1 s. With ``options.search.disaggregated`` each grid also
counts the most disaggregated units it can form (``fleet.perf.disagg.unit_bound``), a bound known
before anything is evaluated: the frontier-lab week then counts 1,095,336 configurations and
9,029,016 checks (652,968 and 5,490,072 without).

Besides the grids, ``screen`` loops over every (offer, pool, engine): it filters the offer's grid
for that pool, even when the grid is empty (a model with no layout on the pool's system). That
loop is Python, ~12 us a turn with nothing to check, so a scenario that evaluates nothing could
still ask for hours: 64 families x 16 tiers x 2 models, 512 pools and 4 engines are 4.2 million
turns (47 s measured). ``Workload.screen_combinations`` counts the turns from the lists' lengths
(offers x pools x engines); the frontier-lab week, the most of the checked-in scenarios, has 576.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from fleet.catalog.load import Catalog
from fleet.errors import InputError
from fleet.perf.disagg import units_bound
from fleet.perf.grid import grid_size, model_spec, search_options
from planner.build.pipeline import GridKey, offers
from planner.scenario.decode import check_engines
from planner.scenario.schema import Scenario


@dataclass(frozen=True, slots=True)
class Workload:
    keys: frozenset[GridKey]
    """The grids ``screen`` evaluates: (model, system, input tokens, cached tokens, output,
    engine)."""
    configurations: int
    """Rows of those grids: each evaluated once and held in memory while building (with
    ``options.search.disaggregated``, plus the most units each grid can add)."""
    checks: int
    """Configurations x the (family, tier, variant, pool) groups each is screened for."""
    screen_combinations: int = 0
    """Turns of ``screen``'s loop: offers (family x tier x admitted model) x pools x distinct
    engines, each one SLO filter of a grid (empty or not) for one pool."""
    offers: int = 0
    """(family, tier, model) offers ``screen`` visits (``planner.build.pipeline.offers``)."""


def workload(s: Scenario, catalog: Catalog) -> Workload:
    """The grids, checks and loop turns ``planner.build.pipeline.screen`` would do for ``s``
    (catalog ids checked). Counted from the lists' sizes: its time grows with the distinct
    (model, token profile) pairs x pool systems x engines, not with the turns it counts."""
    search = s.options.search
    check_engines(s, catalog)
    engines = tuple(dict.fromkeys(search.engines))
    spec = tuple((o.draft_tokens, o.acceptance) for o in search.speculative)
    pools_of_system = Counter(pool.system for pool in s.fleet.pools)
    offers_of_model: Counter[str] = Counter()
    profiles: set[tuple[str, int, int, int]] = set()  # (model, isl, cached, osl)
    for offer in offers(s):
        offers_of_model[offer.model] += 1
        profiles.add((offer.model, offer.isl, offer.cached, offer.osl))
    size: dict[tuple[str, str], int] = {}  # layouts do not depend on the token profile
    checks = 0
    for model, n_offers in offers_of_model.items():
        for system, n_pools in pools_of_system.items():
            size[(model, system)] = grid_size(
                catalog,
                model,
                system,
                batches=search.batch_caps,
                precisions=search.precisions,
                spec=model_spec(catalog, model, spec),
            )
            if search.disaggregated:
                size[(model, system)] += units_bound(catalog, system, search.precisions)
            # each offer checks its grid once per pool of the system and engine
            checks += n_offers * n_pools * size[(model, system)] * len(engines)
    keys = frozenset(
        (model, system, isl, cached, osl, engine)
        for model, isl, cached, osl in profiles
        for system in pools_of_system
        for engine in engines
    )
    configurations = sum(size[(key[0], key[1])] for key in keys)
    n_offers = sum(offers_of_model.values())
    turns = n_offers * len(s.fleet.pools) * len(engines)
    return Workload(keys, configurations, checks, turns, n_offers)


def check_workload(
    s: Scenario,
    work: Workload,
    *,
    max_configurations: int,
    max_checks: int,
    max_screen_combinations: int | None = None,
) -> None:
    """InputError at ``$.options.search`` when ``work`` is over a limit (``None``: that one not
    checked)."""
    precisions, batches, spec = search_options(
        s.options.search.precisions,
        s.options.search.batch_caps,
        tuple((o.draft_tokens, o.acceptance) for o in s.options.search.speculative),
    )
    lists = (
        f"{len(precisions)} precisions x {len(batches)} batch caps x {len(spec)} speculative "
        "options"
    )
    advice = (
        "search fewer precisions, batch caps, speculative options or engines, or admit fewer "
        "variants per tier"
    )
    if work.configurations > max_configurations:
        raise InputError(
            f"$.options.search: this scenario would evaluate {work.configurations:,} "
            f"configurations ({len(work.keys)} grids of model x system x token profile x "
            f"engine, each its "
            f"layouts x {lists}), over the limit of {max_configurations:,}; {advice}"
        )
    if work.checks > max_checks:
        raise InputError(
            f"$.options.search: this scenario would check {work.checks:,} configurations "
            f"against tier SLOs (each grid once per family, tier, variant and pool that uses it; "
            f"{lists}), over the limit of {max_checks:,}; {advice}, or plan fewer "
            "pools"
        )
    if max_screen_combinations is not None and work.screen_combinations > max_screen_combinations:
        engines = len(dict.fromkeys(s.options.search.engines))
        raise InputError(
            f"$.options.search: this scenario would screen {work.screen_combinations:,} "
            f"combinations of offer x pool x engine ({work.offers:,} offers of family x tier x "
            f"admitted model, {len(s.fleet.pools)} pools, {engines} engines), over the limit of "
            f"{max_screen_combinations:,}; search fewer engines, plan fewer pools, or sell "
            "fewer tiers or admit fewer variants per family"
        )
