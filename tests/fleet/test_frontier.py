"""The Pareto frontier of throughput per device vs speed per user."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fleet.catalog import Catalog, CatalogError, load_catalog
from fleet.catalog.load import DATA_DIR
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


def test_an_mtp_layer_chained_drafts_at_its_measured_length(catalog: Catalog) -> None:
    """GLM-5 ships one MTP layer, which SGLang chains as a 3-step EAGLE draft; its published
    acceptance was measured at that length, so the grid drafts 3 tokens with it (DeepSeek-R1's
    one MTP module drafts 1)."""
    glm = catalog.model("glm-5")
    assert glm.mtp_layers == 1 and glm.mtp_draft == 3
    assert glm.mtp_acceptance is not None and "accept length" in glm.sources["mtp_acceptance"]
    # 1 + a + a^2 + a^3: the measured accept length, 3.48 tokens per verify step
    a = glm.mtp_acceptance
    assert 1 + a + a**2 + a**3 == pytest.approx(3.48, abs=0.01)
    assert model_spec(catalog, "glm-5", ((0, 0.0),)) == ((0, 0.0), (3, a))
    r1 = catalog.model("deepseek-r1")
    assert model_spec(catalog, "deepseek-r1", ()) == ((1, r1.mtp_acceptance),)


def test_a_draft_length_needs_an_acceptance(tmp_path: Path) -> None:
    for name in ("accelerators.toml", "systems.toml", "engines.toml"):
        (tmp_path / name).write_bytes((DATA_DIR / name).read_bytes())
    text = (DATA_DIR / "models.toml").read_text()
    (tmp_path / "models.toml").write_text(text.replace("mtp_acceptance = 0.908\n", "", 1))
    with pytest.raises(CatalogError, match=r"mtp_draft_tokens"):
        load_catalog(tmp_path)
