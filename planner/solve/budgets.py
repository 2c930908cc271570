"""The decomposition's time and tolerance budgets (``planner.solve.decompose``): how the time
limit is shared between its steps, each with its reason or the measurement that set it."""

PRICE_SEARCH_SHARE = 0.2
"""The root LP must end this share of the time limit early; if it cannot, the reserve goes to the
provider's price-card search, whose plan (better than greedy) is then the answer."""

ROLLING_MARGIN = 0.1
"""The rolling-horizon LP is solved with the limit lowered by this share, leaving its rounding
room to move: rounding a plan that moves exactly as much as (6) allows forces the rounding to
undo moves. Frontier week, limit 0.1, candidates the LP without (6) uses, best of the two
roundings after repair: 627.0 M at the full limit, 628.5 M at 0.95 of it, 628.6 M at 0.9,
628.1 M at 0.85, 627.0 M at 0.75."""

NEAR_REDUCED_COST = 0.05
"""The rolling-horizon LP's second pass adds the candidates whose best reduced cost in the LP
without (6) is within this share of their running cost of zero: the ones the limit most likely
brings in (frontier week, limit 0.1: 148 of 686 candidates, 23 s against 70 s for all, the plan
631.1 M against 628.6 M with the 77 used ones)."""

POLISH_SHARE = 0.5
"""With a repair reserve (``SolveOptions.stop_gap`` below ``gap_target``), a combo whose integer
model was solved at 0.9 x ``gap_target`` is solved once more at 0.9 x ``stop_gap``, for at most
this share of the time left and twice the time spent so far (plus a second): a tighter integer
gap costs seconds where it helps (hardware-generations: 0.071% -> 0.035-0.042%) and would take the
whole limit where the first gap was already the bound's (batch-tier-backfill: 0.6 s -> 30 s)."""

FINAL_MASTER_S = 0.5
"""When a bound with (6) finishes in the background as the time limit falls, the master gets
this long past the limit to turn it into the reported bound."""

LIMIT_COSTS = 1e-3
"""The tight bound with (6) at a combo choice is computed only when the loose one fell this
share below the LP without (6) there (frontier, limit 0.1: 0.25% below; multi-region, limit
0.2: above it, and a second PDLP run only takes the cores from the plan's passes)."""

PASS_REPAIR_S = 2.0
"""The repair of each rounding of the first rolling-horizon pass (when more follow) gets this
long: frontier week, limit 0.1, 77 candidates: 628.51 M after 2 s, 628.57 M after 7 s, while the
next pass reaches 631.1 M."""

FIRST_REPAIR_S = 0.5
"""With a limit, the repair of the rounded LP without (6) gets this long: a first plan only; the
rolling-horizon LP with (6) gives the good one."""
