"""The Pareto frontier of throughput per device vs speed per user."""

from __future__ import annotations

import numpy as np

from fleet.catalog import Catalog
from fleet.perf.frontier import (
    DEFAULT_BATCHES,
    frontier_size,
    pareto_mask,
    supported_precisions,
)
from fleet.perf.grid import grid_configs, model_spec


def test_pareto_mask_keeps_the_undominated_points() -> None:
    # (30, 5) is dominated by (30, 10); (15, 50) by (20, 80); NaN rows never make the frontier.
    user = np.array([10.0, 20.0, 30.0, 15.0, 30.0, np.nan])
    device = np.array([100.0, 80.0, 10.0, 50.0, 5.0, 1e9])
    assert np.flatnonzero(pareto_mask(user, device)).tolist() == [0, 1, 2]


def test_pareto_mask_drops_exact_duplicates_but_one() -> None:
    user = np.array([10.0, 10.0, 5.0])
    device = np.array([50.0, 50.0, 60.0])
    assert pareto_mask(user, device).sum() == 2


def test_frontier_size_counts_what_the_frontier_builds(catalog: Catalog) -> None:
    """The API and the CLI refuse a frontier over their limit on this count: it holds the
    model's own MTP draft (DeepSeek-R1 ships one), as the frontier's grid does."""
    precisions = supported_precisions(catalog, "hgx-h200-8")
    spec = ((0, 0.0), (2, 0.7))
    options = model_spec(catalog, "deepseek-r1", spec)
    assert len(options) == len(spec) + 1  # its own MTP draft is added
    built = grid_configs(
        catalog,
        "deepseek-r1",
        "hgx-h200-8",
        batches=DEFAULT_BATCHES,
        precisions=precisions,
        isl=1024,
        osl=1024,
        spec=options,
    )
    size = frontier_size(catalog, "deepseek-r1", "hgx-h200-8", spec=spec)
    assert size == len(built.batch) > 0
    without = frontier_size(catalog, "deepseek-r1", "hgx-h200-8", spec=spec, own_mtp=False)
    assert without * len(options) == size * len(spec)
    disagg = frontier_size(catalog, "deepseek-r1", "hgx-h200-8", spec=spec, disaggregated=True)
    assert disagg > size
