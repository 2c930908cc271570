"""Collectives inside one scale-up domain and across domains (fleet.perf.comm)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleet.catalog import load_catalog
from fleet.perf.arrays import build_arrays
from fleet.perf.comm import Links, StageComm, all_reduce_s, all_to_all_s, hierarchical_all_reduce_s
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate

# NVLink-class 400 GB/s and 1 us per device; InfiniBand 50 GB/s and 5 us per device; 4 us calls.
LINK = Links(
    up_bytes_per_s=np.float64(400e9),
    up_hop_s=np.float64(1e-6),
    out_bytes_per_s=np.float64(50e9),
    out_hop_s=np.float64(5e-6),
    call_s=np.float64(4e-6),
)
MSG = np.float64(8e6)


def test_inside_one_domain_the_all_reduce_is_flat() -> None:
    for n in (2.0, 8.0):
        flat = all_reduce_s(np.float64(n), MSG, LINK.up_bytes_per_s, LINK.up_hop_s, LINK.call_s)
        assert hierarchical_all_reduce_s(np.float64(n), MSG, np.float64(8), LINK) == flat


def test_across_domains_the_all_reduce_adds_a_scale_out_stage() -> None:
    """16 devices in two 8-device domains: NVLink reduce-scatter + all-gather over 8, then an
    all-reduce of each device's 1/8 shard between the 2 domains over its NIC:
    2 (1/2) x 1 MB / 50 GB/s + 2 log2(2) x 5 us = 20 us + 10 us."""
    inside = all_reduce_s(np.float64(8), MSG, LINK.up_bytes_per_s, LINK.up_hop_s, LINK.call_s)
    got = hierarchical_all_reduce_s(np.float64(16), MSG, np.float64(8), LINK)
    assert got == pytest.approx(inside + 20e-6 + 10e-6)


def test_all_to_all_sends_the_remote_share_over_the_nic() -> None:
    """8 MB per device: in one domain all over NVLink (20 us + 1 us + 4 us); over 8 domains
    7/8 of it over the NIC (140 us) and 1/8 over NVLink (2.5 us), with the NIC latency."""
    inside = all_to_all_s(np.float64(8), MSG, np.float64(8), LINK)
    assert inside == pytest.approx(20e-6 + 1e-6 + 4e-6)
    wide = all_to_all_s(np.float64(64), MSG, np.float64(8), LINK)
    assert wide == pytest.approx(140e-6 + 2.5e-6 + 5e-6 + 4e-6)


def _stage(norm_layers: np.ndarray | None, tp: float) -> StageComm:
    return StageComm(
        tp=np.array([tp]),
        dp=np.array([1.0]),
        ep=np.array([1.0]),
        hidden_size=np.array([3072.0]),
        experts_per_token=np.array([8.0]),
        dense_layers=np.array([0.0]),
        moe_layers=np.array([62.0]),
        domain=np.array([8.0]),
        link=LINK,
        norm_layers=norm_layers,
    )


def test_a_norm_over_every_head_adds_one_small_all_reduce_per_attention_layer() -> None:
    """MiniMax-M2 at tp 4, 16 tokens: each of 62 attention layers also all-reduces 16 tokens' q
    and k variances (8 bytes each) over the 4 ranks; at tp 1 nothing is added."""
    tokens = np.array([16.0])
    plain = _stage(None, 4.0)(tokens)
    normed = _stage(np.array([62.0]), 4.0)(tokens)
    one = all_reduce_s(
        np.float64(4), np.float64(16 * 8), LINK.up_bytes_per_s, LINK.up_hop_s, LINK.call_s
    )
    assert normed - plain == pytest.approx(62 * one)
    assert _stage(np.array([62.0]), 1.0)(tokens) == _stage(None, 1.0)(tokens) == 0.0


def test_the_norms_all_reduce_is_charged_in_the_model() -> None:
    """The catalog's MiniMax-M2.5 (``qk_norm_across_heads``) at tp 4 on 8 H200s pays 62 more
    all-reduces per step than the same shapes without the flag; at tp 1 dp 4 nothing."""
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    i = arrays.models.ids.index("minimax-m2.5")
    assert arrays.models.qk_norm_across_heads[i] == 1.0
    flag = arrays.models.qk_norm_across_heads.copy()
    flag[i] = 0.0
    without = dataclasses.replace(
        arrays, models=dataclasses.replace(arrays.models, qk_norm_across_heads=flag)
    )
    for tp, dp, extra in ((4, 1, True), (1, 4, False)):
        configs = make_configs(
            catalog, model="minimax-m2.5", system="hgx-h200-8", precision="fp8",
            tp=tp, dp=dp, batch=4, isl=1024, osl=1024,
        )  # fmt: skip
        a, b = estimate(arrays, configs), estimate(without, configs)
        if extra:
            assert a.step_comm_s[0] > b.step_comm_s[0] + 62 * 5e-6
        else:
            assert a.step_comm_s[0] == b.step_comm_s[0]
