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


def workload(s: Scenario, catalog: Catalog) -> Workload:
    """The grids and checks ``planner.build.pipeline.screen`` would do for ``s`` (catalog ids
    checked)."""
    search = s.options.search
    check_engines(s, catalog)
    engines = tuple(dict.fromkeys(search.engines))
    spec = tuple((o.draft_tokens, o.acceptance) for o in search.speculative)
    pools_of_system = Counter(pool.system for pool in s.fleet.pools)
    size: dict[tuple[str, str], int] = {}  # layouts do not depend on the token profile
    keys: set[GridKey] = set()
    checks = 0
    for offer in offers(s):
        model = offer.model
        for system, n_pools in pools_of_system.items():
            if (model, system) not in size:
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
            for engine in engines:
                keys.add((model, system, offer.isl, offer.cached, offer.osl, engine))
            checks += n_pools * size[(model, system)] * len(engines)
    configurations = sum(size[(key[0], key[1])] for key in keys)
    return Workload(frozenset(keys), configurations, checks)


def check_workload(
    s: Scenario, work: Workload, *, max_configurations: int, max_checks: int
) -> None:
    """InputError at ``$.options.search`` when ``work`` is over a limit."""
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
