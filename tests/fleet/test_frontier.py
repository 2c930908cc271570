"""The Pareto frontier of throughput per device vs speed per user."""

from __future__ import annotations

import numpy as np

from fleet.perf.frontier import pareto_mask


def test_pareto_mask_keeps_the_undominated_points() -> None:
    # (30, 5) is dominated by (30, 10); (15, 50) by (20, 80); NaN rows never make the frontier.
    user = np.array([10.0, 20.0, 30.0, 15.0, 30.0, np.nan])
    device = np.array([100.0, 80.0, 10.0, 50.0, 5.0, 1e9])
    assert np.flatnonzero(pareto_mask(user, device)).tolist() == [0, 1, 2]


def test_pareto_mask_drops_exact_duplicates_but_one() -> None:
    user = np.array([10.0, 10.0, 5.0])
    device = np.array([50.0, 50.0, 60.0])
    assert pareto_mask(user, device).sum() == 2
