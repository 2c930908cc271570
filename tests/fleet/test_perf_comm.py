"""Collectives inside one scale-up domain and across domains (fleet.perf.comm)."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.perf.comm import Links, all_reduce_s, all_to_all_s, hierarchical_all_reduce_s

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
