"""Queueing headroom: exact Erlang C against the textbook recursion and a simulation; square-root
staffing against the exact answer; the cap behaves as staffing theory says."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from planner.build.queueing import (
    erlang_c,
    halfin_whitt_servers,
    servers_needed,
    utilization_cap,
    wait_exceeds,
    wait_quantile_s,
)


def _erlang_c_recursion(n: int, a: float) -> float:
    """Erlang B by the stable recursion B(k) = a B(k-1) / (k + a B(k-1)), then C from B."""
    b = 1.0
    for k in range(1, n + 1):
        b = a * b / (k + a * b)
    return n * b / (n - a * (1 - b))


@pytest.mark.parametrize(("n", "a"), [(1, 0.5), (2, 1.5), (10, 7.0), (50, 45.0), (3000, 2950.0)])
def test_erlang_c_matches_recursion(n: int, a: float) -> None:
    assert erlang_c(n, a) == pytest.approx(_erlang_c_recursion(n, a), rel=1e-9)


def test_erlang_c_single_server_is_utilization() -> None:
    # M/M/1: P(wait) = rho.
    np.testing.assert_allclose(erlang_c(1, [0.1, 0.5, 0.9]), [0.1, 0.5, 0.9])


def test_erlang_c_is_stable_for_huge_pools() -> None:
    n = np.array([10_000, 100_000, 1_000_000])
    a = n - 3.0 * np.sqrt(n)
    c = erlang_c(n, a)
    assert np.all(np.isfinite(c)) and np.all((c > 0) & (c < 0.05))
    assert erlang_c(100, 100) == 1.0 and erlang_c(100, 150) == 1.0


def test_servers_needed_is_the_smallest_that_meets_the_tail() -> None:
    a = np.array([0.3, 4.0, 37.0, 410.0, 5200.0])
    x, tail = 0.05, 0.01
    n = servers_needed(a, x, tail)
    assert np.all(wait_exceeds(n, a, x) <= tail)
    assert np.all(wait_exceeds(n - 1, a, x) > tail)


def test_servers_needed_answers_each_element_on_its_own() -> None:
    # A grid of loads x waits (brackets of very different widths, zero load included) comes
    # back in its shape with what each element gives alone (settled elements leave the search).
    a = np.array([0.0, 0.3, 4.0, 37.0, 410.0, 5200.0, 8e5])[:, None]
    x = np.array([0.0, 0.01, 0.05, 0.4])[None, :]
    grid = servers_needed(a, x, 0.01)
    assert grid.shape == (7, 4)
    alone = [[float(servers_needed(ai, xj, 0.01)) for xj in x[0]] for ai in a[:, 0]]
    assert grid.tolist() == alone
    assert np.ndim(servers_needed(5.0, 0.1, 0.01)) == 0


def test_square_root_staffing_tracks_exact_for_large_pools() -> None:
    a = np.array([100.0, 1_000.0, 10_000.0, 100_000.0])
    exact = servers_needed(a, 0.02, 0.01)
    approx = halfin_whitt_servers(a, 0.02, 0.01)
    # The error in the safety margin n - a shrinks as the pool grows (the QED regime), and
    # square-root staffing errs on the light side by less than one server per hundred here.
    margin_error = np.abs(approx - exact) / (exact - a)
    assert np.all(np.diff(margin_error) < 0)
    assert margin_error[-1] < 0.01
    assert np.all((exact - approx) / exact < 0.02)


def test_utilization_cap_grows_with_load_and_slack() -> None:
    loads = np.array([1.0, 10.0, 100.0, 1000.0, 10000.0])
    cap = utilization_cap(loads, 0.5, 10.0, 0.99)
    assert np.all(np.diff(cap) > 0) and cap[-1] > 0.95 and cap[0] < 0.5
    slack = utilization_cap(100.0, np.array([0.1, 1.0, 10.0]), 10.0, 0.99)
    assert np.all(np.diff(slack) >= 0)
    assert utilization_cap(100.0, -0.1, 10.0, 0.99) == 0.0


def _simulate_wait_tail(servers: int, erlangs: float, t: float, customers: int, seed: int) -> float:
    """M/M/c FCFS by events; service mean 1; returns the fraction of waits longer than t."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / erlangs, customers))
    services = rng.exponential(1.0, customers)
    free_at = [0.0] * servers  # heap of the times each server frees up
    waits = np.empty(customers)
    for i in range(customers):
        earliest = heapq.heappop(free_at)
        start = max(arrivals[i], earliest)
        waits[i] = start - arrivals[i]
        heapq.heappush(free_at, start + services[i])
    warm = customers // 10
    return float(np.mean(waits[warm:] > t))


@pytest.mark.parametrize(("servers", "erlangs", "t"), [(4, 3.0, 0.2), (16, 13.5, 0.05)])
def test_formula_matches_simulation(servers: int, erlangs: float, t: float) -> None:
    simulated = _simulate_wait_tail(servers, erlangs, t, customers=60_000, seed=7)
    exact = float(wait_exceeds(servers, erlangs, t))
    assert simulated == pytest.approx(exact, abs=0.03)


def test_wait_quantile_inverts_the_tail() -> None:
    n, a, service = 20, 16.0, 4.0
    w = float(wait_quantile_s(n, a, service, 0.95))
    assert w > 0
    assert float(wait_exceeds(n, a, w / service)) == pytest.approx(0.05, rel=1e-9)
    assert float(wait_quantile_s(200, 10.0, service, 0.95)) == 0.0
    assert float(wait_quantile_s(10, 10.0, service, 0.95)) == np.inf
