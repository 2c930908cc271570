"""``fleet.perf.cost``: a replica's share of its system's catalog price, and USD per million
output tokens at full batch."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.catalog import load_catalog
from fleet.perf.arrays import build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.cost import usd_per_hour_per_replica, usd_per_m_output_tokens
from fleet.perf.model import estimate
from fleet.perf.types import Problem


def test_replicas_pay_their_share_of_the_systems_catalog_price() -> None:
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    system = catalog.system("hgx-h100-8")
    gpu_usd_per_hour = catalog.accelerators[system.accelerator].usd_per_hour
    node_usd_per_hour = system.usd_per_hour or system.devices_per_system * gpu_usd_per_hour
    configs = make_configs(
        catalog,
        model=["llama-3.1-8b", "llama-3.1-8b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-8b"],
        system="hgx-h100-8",
        tp=[1, 2, 8, 8, 3],
        pp=[1, 1, 1, 2, 1],
        precision="fp8",
        batch=64,
        isl=1024,
        osl=256,
    )
    est = estimate(arrays, configs)
    per_hour = usd_per_hour_per_replica(arrays, configs, est)
    # 8 tp1 replicas share a node, 4 tp2, one tp8; tp8 x pp2 spans two nodes.
    expected = [node_usd_per_hour / 8, node_usd_per_hour / 4, node_usd_per_hour]
    expected.append(2 * node_usd_per_hour)
    assert per_hour[:4] == pytest.approx(expected)
    assert Problem(int(est.problem[4])) == Problem.BAD_LAYOUT  # tp3 does not divide the model
    assert np.isnan(per_hour[4])
    per_m = usd_per_m_output_tokens(arrays, configs, est)
    ok = est.problem[:4] == Problem.OK
    tokens_per_hour = est.tokens_per_s_per_replica[:4] * 3600
    assert per_m[:4][ok] == pytest.approx((per_hour[:4] / tokens_per_hour * 1e6)[ok])
    assert np.isnan(per_m[4])


def test_a_configuration_that_does_not_fit_has_no_token_price() -> None:
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    configs = make_configs(
        catalog,
        model="llama-3.1-70b",
        system="hgx-h100-8",
        tp=1,
        precision="bf16",
        batch=1,
        isl=1024,
        osl=256,
    )
    est = estimate(arrays, configs)
    assert Problem(int(est.problem[0])) == Problem.DOES_NOT_FIT  # 140 GB of weights on 80 GB
    assert usd_per_hour_per_replica(arrays, configs, est)[0] > 0
    assert np.isnan(usd_per_m_output_tokens(arrays, configs, est)[0])
