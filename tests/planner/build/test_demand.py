"""Demand: logit shares reproduce the reference, respond to price as customers would."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.errors import InputError
from planner.build.demand import (
    MAX_COMBOS_PER_FAMILY,
    build_demand,
    hourly_requests_per_s,
    logit_shares,
    to_periods,
)
from planner.scenario.decode import decode_scenario

QUALITY = {"llama-3.1-8b": 16.0, "llama-3.1-70b": 27.0}


def _pinned(doc: dict[str, Any]) -> None:
    """The figures these tests compute by hand, independent of how tiny.toml is tuned."""
    d = doc["demand"][0]
    d["requests_per_s"] = [50.0 if h == 10 else 20.0 for h in range(24)]
    d["mean_input_tokens"], d["mean_output_tokens"] = 1500, 400
    d["choice"] = {
        "reference_shares": {"standard": 0.6, "fast": 0.1, "outside": 0.3},
        "price_sensitivity": 1.2,
        "speed_weight": 0.5,
    }
    doc["families"][0].update(usd_per_m_input_tokens=0.10, usd_per_m_output_tokens=0.20)
    doc["tiers"][0].update(multipliers=[0.8, 1.0, 1.25], reference_multiplier=1.0)
    doc["tiers"][0]["min_tokens_per_s_per_user"] = 30
    doc["tiers"][1].update(multipliers=[1.5, 2.0, 3.0, 4.0], reference_multiplier=2.0)
    doc["tiers"][1]["min_tokens_per_s_per_user"] = 120


def _scenario(tiny_with, edit=None):
    def both(doc: dict[str, Any]) -> None:
        _pinned(doc)
        if edit is not None:
            edit(doc)

    return decode_scenario(tiny_with(both), "json")


def _combo(demand, family: int, multipliers: dict[int, float], variants=None) -> int:
    """The combo of ``family`` whose tier k has multiplier ``multipliers[k]``."""
    o = demand.offers
    for m in np.flatnonzero(demand.combo_family == family):
        offers = demand.combo_offer[m]
        if all(o.multiplier[offers[k]] == v for k, v in multipliers.items()) and (
            variants is None or all(o.variant[offers[k]] == v for k, v in variants.items())
        ):
            return int(m)
    raise AssertionError(f"no combo {multipliers}")


def test_reference_prices_reproduce_reference_shares(tiny_with) -> None:
    demand, info = build_demand(_scenario(tiny_with), QUALITY)
    ref = int(demand.reference_combo[0])
    assert demand.offers.multiplier[demand.combo_offer[ref]].tolist() == [1.0, 2.0]
    # Hour 10: forecast 50 requests/s inside; shares standard 0.6, fast 0.1, outside 0.3.
    requests = demand.tokens_per_s[ref, :, 10] / 400.0
    np.testing.assert_allclose(requests, [50 * 0.6 / 0.7, 50 * 0.1 / 0.7], rtol=1e-12)
    np.testing.assert_allclose(info.requests_per_s[0, 10], 50.0)


def test_raising_the_fast_price_moves_users_to_standard_and_away(tiny_with) -> None:
    demand, _ = build_demand(_scenario(tiny_with), QUALITY)
    low = _combo(demand, 0, {0: 1.0, 1: 2.0})
    high = _combo(demand, 0, {0: 1.0, 1: 4.0})
    d_low, d_high = demand.tokens_per_s[low, :, 10], demand.tokens_per_s[high, :, 10]
    market = 50 / 0.7 * 400
    fast_lost = d_low[1] - d_high[1]
    to_standard = d_high[0] - d_low[0]
    to_outside = fast_lost - to_standard
    assert fast_lost > 0
    assert to_standard > 0
    assert to_outside > 0
    # The logit's substitution is proportional to shares: standard gets 0.6 / (0.6 + 0.3) of
    # the fast tier's lost users.
    np.testing.assert_allclose(to_standard / fast_lost, 0.6 / 0.9, rtol=0.2)
    assert d_high.sum() < market


def test_utility_shift_matches_the_formula(tiny_with) -> None:
    s = _scenario(tiny_with)
    demand, _ = build_demand(s, QUALITY)
    m = _combo(demand, 0, {0: 1.25, 1: 3.0})
    shares = demand.tokens_per_s[m, :, 10] / (50 / 0.7 * 400)
    beta = s.demand[0].choice.price_sensitivity
    v = np.array(
        [
            math.log(0.6 / 0.3) - beta * math.log(1.25),
            math.log(0.1 / 0.3) - beta * math.log(3.0 / 2.0),
        ]
    )
    expected = np.exp(v) / (1 + np.exp(v).sum())
    np.testing.assert_allclose(shares, expected, rtol=1e-12)


def test_revenue_per_output_token_includes_input(tiny_with) -> None:
    demand, _ = build_demand(_scenario(tiny_with), QUALITY)
    o = demand.offers
    # 0.10 USD/M input, 0.20 USD/M output, 1500 input and 400 output tokens per request.
    per_token = (0.20 + 0.10 * 1500 / 400) / 1e6
    np.testing.assert_allclose(o.usd_per_output_token[:, 0], o.multiplier * per_token)
    assert o.usd_per_output_token.shape == (len(o.multiplier), 24)


def test_quality_and_speed_of_a_distilled_fast_variant(tiny_with) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["families"][0]["flagship"] = "llama-3.1-70b"
        doc["families"][0]["variants"] = [
            {"model": "llama-3.1-8b", "quality": 20, "min_tokens_per_s_per_user": 1000}
        ]
        doc["tiers"][0]["variants"] = ["flagship"]
        doc["demand"][0]["choice"]["quality_weight"] = 0.1

    s = _scenario(tiny_with, edit)
    demand, info = build_demand(s, QUALITY)
    # quality_weight > 0: fp4 (lossy) is each model's second variant (test below).
    flagship, distilled = 0, 2
    assert info.variant_model == ("llama-3.1-70b", "llama-3.1-70b", "llama-3.1-8b", "llama-3.1-8b")
    a = _combo(demand, 0, {0: 1.0, 1: 2.0}, {1: flagship})
    b = _combo(demand, 0, {0: 1.0, 1: 2.0}, {1: distilled})
    assert int(demand.reference_combo[0]) == a
    fast_a = demand.tokens_per_s[a, 1, 10]
    fast_b = demand.tokens_per_s[b, 1, 10]
    # u shift = beta_speed ln(1000 / 120) + beta_quality (20 - 27).
    shift = 0.5 * math.log(1000 / 120) + 0.1 * (20 - 27)
    odds = lambda d: d[1] / (50 / 0.7 * 400 - d.sum())  # noqa: E731
    np.testing.assert_allclose(
        odds(demand.tokens_per_s[b, :, 10]) / odds(demand.tokens_per_s[a, :, 10]),
        math.exp(shift),
        rtol=1e-9,
    )
    assert fast_b > fast_a  # the speed credit outweighs 7 quality points here
    assert info.offer_speed_tokens_per_s[demand.combo_offer[b, 1]] == 1000


def test_unservable_variants_leave_the_menu(tiny_with) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["families"][0]["flagship"] = "llama-3.1-70b"
        doc["families"][0]["variants"] = [{"model": "llama-3.1-8b"}]

    s = _scenario(tiny_with, edit)
    full, _ = build_demand(s, QUALITY)
    cut, info = build_demand(s, QUALITY, frozenset({(0, 1, "llama-3.1-70b")}))
    assert full.combo_offer.shape[0] == (3 * 2) * (4 * 2)
    assert cut.combo_offer.shape[0] == (3 * 2) * 4
    assert set(cut.offers.variant[cut.offers.tier == 1].tolist()) == {1}
    assert info.family_variants[0][1] == (1,)


def test_compact_form_equals_explicit_hours(tiny_with) -> None:
    daily = [float(h % 5 + 1) for h in range(24)]
    weekly = [1.0, 1.0, 1.0, 1.0, 0.9, 0.6, 0.5]

    def compact(doc: dict[str, Any]) -> None:
        d = doc["demand"][0]
        del d["requests_per_s"]
        d["compact"] = {
            "level_requests_per_s": 3.0,
            "daily_profile": daily,
            "weekly_profile": weekly,
            "weeks": 2,
        }

    s = _scenario(tiny_with, compact)
    hourly = hourly_requests_per_s(s.demand[0])
    explicit = [3.0 * w * h for _ in range(2) for w in weekly for h in daily]
    np.testing.assert_allclose(hourly, explicit)
    np.testing.assert_allclose(
        to_periods(hourly, 4), np.asarray(explicit).reshape(-1, 4).mean(axis=1)
    )


def test_window_and_penalty_columns(tiny_with) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["tiers"][0]["completion_window_hours"] = 6
        del doc["tiers"][0]["max_ttft_ms"]
        doc["tiers"][1]["unserved_penalty_usd_per_m_output_tokens"] = 3.0

    demand, _ = build_demand(_scenario(tiny_with, edit), QUALITY)
    assert demand.window_periods.tolist() == [6, 1]
    np.testing.assert_allclose(demand.unserved_penalty_usd_per_output_token, [0.0, 3e-6])


def test_too_many_price_cards_is_an_input_error(tiny_with) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["tiers"][0]["multipliers"] = [1.0 + i / 100 for i in range(64)]
        doc["tiers"][1]["multipliers"] = [2.0 + i / 100 for i in range(64)]
        doc["tiers"][1]["reference_multiplier"] = 2.0

    assert MAX_COMBOS_PER_FAMILY > 64 * 64
    _, info = build_demand(_scenario(tiny_with, edit), QUALITY)
    assert any("4,096 price cards" in w for w in info.warnings)

    def bigger(doc: dict[str, Any]) -> None:
        edit(doc)
        doc["families"][0]["flagship"] = "llama-3.1-70b"
        doc["families"][0]["variants"] = [{"model": "llama-3.1-8b"}]

    with pytest.raises(InputError, match="16,384 price cards"):
        build_demand(_scenario(tiny_with, bigger), QUALITY)


@settings(max_examples=60, deadline=None)
@given(
    shares=st.lists(st.floats(0.01, 1.0), min_size=2, max_size=5),
    shifts=st.lists(st.floats(-5.0, 5.0), min_size=5, max_size=5),
    bump=st.floats(0.01, 3.0),
)
def test_logit_shares_properties(shares: list[float], shifts: list[float], bump: float) -> None:
    total = sum(shares)
    s = np.asarray(shares) / total  # last entry plays the outside option
    alpha = np.log(s[:-1] / s[-1])
    n = alpha.shape[0]
    base = logit_shares(alpha, np.zeros((1, n)))
    np.testing.assert_allclose(base[0], s[:-1], rtol=1e-9)
    shift = np.asarray(shifts[:n])[None, :]
    out = logit_shares(alpha, shift)
    assert 0 < out.sum() < 1
    # Making option 0 worse lowers its share and raises every other's (substitution).
    worse = shift.copy()
    worse[0, 0] -= bump
    after = logit_shares(alpha, worse)
    assert after[0, 0] < out[0, 0]
    assert np.all(after[0, 1:] >= out[0, 1:])


def test_a_lossy_precision_is_its_own_offer_at_lower_quality(tiny_with) -> None:
    """With quality weighed, fp4 (1% quality loss by default) serves a variant of its own:
    its offers carry the quality cost; bf16 and fp8 (lossless) serve the plain variant. Without
    a quality weight the menu is one variant for all precisions, as before."""

    def weighed(doc: dict[str, Any]) -> None:
        doc["demand"][0]["choice"]["quality_weight"] = 0.5
        doc["options"] = {"search": {"quality_loss": {"fp4": 0.04}}}

    s = _scenario(tiny_with, weighed)
    demand, info = build_demand(s, QUALITY)
    assert demand.variant_ids == ("llama-8b/llama-3.1-8b", "llama-8b/llama-3.1-8b@fp4")
    assert info.variant_precisions == (("bf16", "fp8"), ("fp4",))
    np.testing.assert_allclose(info.variant_quality, [16.0, 16.0 * 0.96])
    np.testing.assert_allclose(info.variant_quality_loss, [0.0, 0.04])
    plain = _combo(demand, 0, {0: 1.0, 1: 2.0}, {0: 0, 1: 0})
    lossy = _combo(demand, 0, {0: 1.0, 1: 2.0}, {0: 0, 1: 1})
    assert int(demand.reference_combo[0]) == plain
    odds = lambda d: d[1] / (50 / 0.7 * 400 - d.sum())  # noqa: E731
    np.testing.assert_allclose(
        odds(demand.tokens_per_s[lossy, :, 10]) / odds(demand.tokens_per_s[plain, :, 10]),
        math.exp(0.5 * (16.0 * 0.96 - 16.0)),
        rtol=1e-9,
    )
    # (3 multipliers x 2 variants) x (4 x 2) cards.
    assert demand.combo_offer.shape[0] == (3 * 2) * (4 * 2)
    # Servable precisions prune the variants no candidate serves (here fp4 of fast).
    served = frozenset(
        {(0, 0, "llama-3.1-8b", p) for p in ("bf16", "fp4")} | {(0, 1, "llama-3.1-8b", "fp8")}
    )
    cut, cut_info = build_demand(s, QUALITY, frozenset(), served)
    assert cut_info.family_variants[0] == ((0, 1), (0,))
    assert cut.combo_offer.shape[0] == (3 * 2) * 4

    unweighed, unweighed_info = build_demand(_scenario(tiny_with), QUALITY)
    assert unweighed.variant_ids == ("llama-8b/llama-3.1-8b",)
    assert unweighed_info.variant_precisions == (("bf16", "fp8", "fp4"),)
