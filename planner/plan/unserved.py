"""Why a sold tier with a plan got nothing served, in a capacity planner's words.

Serving nothing can be the right answer: there is no demand, or the cheapest configuration costs
more per token than any price on the menu pays, or the demand at the chosen price is too small to
pay for whole replicas. The plan then says which, per (family, tier), next to its zero revenue:

    llama-8b/standard: nothing served: the cheapest configuration costs $4.75 per M output tokens
    at full load (h100-us-east, tp=1 fp8 batch 256 spec k=3, 1 system(s) at $2,000.00/h), more
    than the highest price on the menu pays ($1.15 per M output tokens at multiplier 2)

Tiers that no configuration can serve at all are explained by ``planner.build.reasons`` instead.
"""

from __future__ import annotations

import numpy as np

from planner.build.candidates import describe
from planner.build.pipeline import Built
from planner.plan.schema import Flow
from planner.solve.solution import SolveResult
from planner.solve.tables import SECONDS_PER_HOUR


def unserved_warnings(built: Built, result: SolveResult, flows: tuple[Flow, ...]) -> list[str]:
    """One sentence per sold (family, tier) that has candidates but nothing served."""
    t, det, s = built.tables, built.candidates, built.scenario
    cand, d = t.candidates, t.demand
    out: list[str] = []
    for f, family in enumerate(s.families):
        for k, tier in enumerate(s.tiers):
            mine = [x for x in flows if x.family == family.id and x.tier == tier.id]
            if not mine or any(x.served_tokens_per_s > 0 for x in mine):
                continue
            label = f"{family.id}/{tier.id}"
            demand = max(x.demand_tokens_per_s for x in mine)
            rows = np.flatnonzero((cand.family == f) & (cand.tier == k))
            if demand <= 0:
                out.append(f"{label}: nothing served: no demand in any period")
                continue
            if rows.size == 0:
                continue  # no configuration serves it: planner.build.reasons said why
            # Cost of one output token at full load, per candidate and period (USD per token).
            tokens_per_s = cand.tokens_per_s_per_replica[rows]
            usd_per_s = (
                t.inventory.usd_per_system_hour[cand.pool[rows]]
                * cand.systems_per_replica[rows]
                / SECONDS_PER_HOUR
            )
            with np.errstate(divide="ignore", invalid="ignore"):
                usd_per_token = np.where(
                    tokens_per_s > 0, usd_per_s[:, None] / tokens_per_s, np.inf
                )
            c, p = np.unravel_index(int(np.argmin(usd_per_token)), usd_per_token.shape)
            row = int(rows[c])
            pool = t.inventory.pool_ids[int(cand.pool[row])]
            where = (
                f"{pool}, {describe(det.configs, row)}"
                f"{f' ({det.layout[row]})' if det.layout[row] else ''}, "
                f"{int(cand.systems_per_replica[row])} "
                f"system(s) at ${float(t.inventory.usd_per_system_hour[cand.pool[row]]):,.2f}/h"
            )
            cost_per_m = float(usd_per_token[c, p]) * 1e6
            if not np.isfinite(cost_per_m):
                out.append(f"{label}: nothing served: no configuration has capacity in any period")
                continue
            offers = np.flatnonzero((d.offers.family == f) & (d.offers.tier == k))
            top = int(offers[np.argmax(d.offers.usd_per_output_token[offers].max(axis=1))])
            top_per_m = float(d.offers.usd_per_output_token[top].max()) * 1e6
            chosen = int(d.combo_offer[int(result.combo[f]), k])
            chosen_per_m = float(d.offers.usd_per_output_token[chosen].max()) * 1e6
            if cost_per_m > top_per_m:
                out.append(
                    f"{label}: nothing served: the cheapest configuration costs "
                    f"${cost_per_m:,.2f} per M output tokens at full load ({where}), more than "
                    f"the highest price on the menu pays (${top_per_m:,.2f} per M output tokens "
                    f"at multiplier {float(d.offers.multiplier[top]):g})"
                )
            elif cost_per_m > chosen_per_m:
                out.append(
                    f"{label}: nothing served: the cheapest configuration costs "
                    f"${cost_per_m:,.2f} per M output tokens at full load ({where}); only prices "
                    f"above that cover it (up to ${top_per_m:,.2f} at multiplier "
                    f"{float(d.offers.multiplier[top]):g}), and the demand at those prices does "
                    "not keep whole replicas busy enough to pay"
                )
            else:
                out.append(
                    f"{label}: nothing served: at the chosen price (${chosen_per_m:,.2f} per M "
                    f"output tokens, multiplier {float(d.offers.multiplier[chosen]):g}) the peak "
                    f"demand of {demand:,.0f} output tokens/s does not keep whole replicas of the "
                    f"cheapest configuration busy enough to pay (${cost_per_m:,.2f} per M output "
                    f"tokens at full load; {where})"
                )
    return out
