"""Demand: forecasts x price menus -> output tokens/s per (combo, tier, period), by logit choice.

Per family, customers choose among the tiers it sells and an outside option (buy nothing here)
by a multinomial logit (docs/demand.md has the derivation and a worked example). Offer o of tier
k = (serving variant v, price multiplier m); its utility is

    V(o) = alpha_k + u(o) - u(ref_k),
    u(o) = - beta_price x ln(m) + beta_speed x ln(speed(k, v)) + beta_quality x (q_v - q_flagship)

with V(outside) = 0 and alpha_k = ln(S_k / S_outside), so that at the reference offers (the
reference multiplier, served by the flagship or, when the tier does not admit it, the family's
first admitted variant) the shares equal the scenario's reference shares S. speed(k, v) is the
per-user tokens/s the offer guarantees: max(tier floor, variant promise); tiers without a floor
have no speed term. A combo is one offer per sold tier; its share of tier k is
exp(V_k) / (1 + sum_j exp(V_j)).

A serving variant is a (model, precision class): where the family's choice model weighs quality,
each lossy class of the searched precisions (``Search.quality_loss`` > 0, e.g. fp4) is its own
variant with quality q x (1 - loss), so its offers carry the quality cost and its candidates are
the configurations at those precisions; the lossless precisions form the plain variant.

The forecast is the inside demand (all tiers together) at reference prices, so the market is
forecast / (1 - S_outside) and demand of tier k under combo m is market x share_k(m), in requests/s,
times mean output tokens for output tokens/s.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from fleet.errors import InputError
from planner.scenario.derived import family_variants
from planner.scenario.schema import HOURS_PER_WEEK, OUTSIDE, FamilyDemand, Scenario
from planner.solve.tables import Demand, FloatArray, IntArray, Offers

MAX_COMBOS_PER_FAMILY = 5000
"""Above this many price cards per family the solve slows without informing the decision."""
WARN_COMBOS_PER_FAMILY = 1000


@dataclass(frozen=True, slots=True)
class DemandInfo:
    """What the tables do not carry but the plan and candidates need."""

    variant_family: IntArray
    """(variants,): family of each serving variant."""
    variant_model: tuple[str, ...]
    """(variants,): catalog model id of each serving variant."""
    variant_quality: FloatArray
    variant_precisions: tuple[tuple[str, ...], ...]
    """(variants,): the searched weight precisions each variant is served at (a lossy precision
    of a family that weighs quality is its own variant, at the lower quality)."""
    variant_quality_loss: FloatArray
    """(variants,): fraction of the model's quality lost at the variant's precisions."""
    offer_speed_tokens_per_s: FloatArray
    """(offers,): per-user tokens/s the offer guarantees (0 = no floor)."""
    sold: np.ndarray
    """(families, tiers) bool: the family sells the tier (it has a reference share)."""
    family_variants: tuple[tuple[tuple[int, ...], ...], ...]
    """[family][tier] -> variant indices admitted."""
    requests_per_s: FloatArray
    """(families, periods): forecast inside demand at reference prices, all tiers."""
    mean_output_tokens: FloatArray
    """(families,)."""
    warnings: tuple[str, ...]


def hourly_requests_per_s(d: FamilyDemand) -> FloatArray:
    """The forecast, one value per hour of the horizon."""
    if d.requests_per_s is not None:
        return np.asarray(d.requests_per_s, dtype=np.float64)
    c = d.compact
    assert c is not None  # checked at decode
    week = np.outer(np.asarray(c.weekly_profile), np.asarray(c.daily_profile)).ravel()
    assert week.shape == (HOURS_PER_WEEK,)
    return np.tile(c.level_requests_per_s * week, c.weeks)


def to_periods(hourly: FloatArray, period_hours: int) -> FloatArray:
    """Average consecutive hours into periods (the last axis)."""
    return hourly.reshape(*hourly.shape[:-1], -1, period_hours).mean(axis=-1)


def logit_shares(alpha: FloatArray, utility_shift: FloatArray) -> FloatArray:
    """Shares of the inside options, outside utility 0.

    ``alpha``: (tiers,) ln(S_k / S_outside), -inf where not sold; ``utility_shift``: (combos,
    tiers) u(o) - u(ref). Returns (combos, tiers); rows sum to 1 - outside share.
    """
    v = alpha[None, :] + utility_shift
    top = np.maximum(np.max(v, axis=1, initial=0.0), 0.0)
    e = np.exp(v - top[:, None])
    return e / (np.exp(-top) + e.sum(axis=1))[:, None]


def precision_classes(
    s: Scenario, weighs_quality: bool
) -> tuple[tuple[float, tuple[str, ...]], ...]:
    """(quality loss, precisions) classes of the searched precisions, lossless first.

    A family whose choice model weighs quality sells each lossy precision class as its own
    variant; otherwise every precision serves one variant (quality does not move its demand)."""
    search = s.options.search
    if not weighs_quality:
        return ((0.0, tuple(search.precisions)),)
    by_loss: dict[float, list[str]] = {}
    for p in search.precisions:
        by_loss.setdefault(search.quality_loss.of(p), []).append(p)
    return tuple((loss, tuple(by_loss[loss])) for loss in sorted(by_loss))


def _admitted(
    s: Scenario,
    f: int,
    k: int,
    variant_by_key: dict[tuple[int, str], list[int]],
    unservable: frozenset[tuple[int, int, str]],
    unservable_variants: frozenset[tuple[int, int]],
) -> tuple[int, ...]:
    models = family_variants(s, f, k)
    servable = tuple(m for m in models if (f, k, m) not in unservable)
    out: list[int] = []
    for m in servable or models:
        variants = variant_by_key[(f, m)]
        kept = [v for v in variants if (k, v) not in unservable_variants]
        out.extend(kept or variants)
    return tuple(out)


def offer_speed(s: Scenario, tier_index: int, promise: float | None) -> float:
    """Per-user tokens/s an offer guarantees: the tier floor raised to the variant's promise."""
    floor = s.tiers[tier_index].min_tokens_per_s_per_user
    if floor is None:
        return 0.0
    return max(floor, promise or 0.0)


def build_demand(
    s: Scenario,
    model_quality: dict[str, float],
    unservable: frozenset[tuple[int, int, str]] = frozenset(),
    servable_precisions: frozenset[tuple[int, int, str, str]] | None = None,
) -> tuple[Demand, DemandInfo]:
    """All offers and combos of every family, and demand per (combo, tier, period).

    ``unservable`` holds (family, tier, model) triples no candidate can serve: their offers are
    left out, unless that would leave a sold tier with none (then the tier keeps its offers and
    its demand goes unserved). ``servable_precisions`` (family, tier, model, precision), when
    given, also leaves out a servable model's precision variants that no candidate serves.
    """
    period_hours = s.options.period_hours
    tiers = s.tiers
    n_tiers = len(tiers)
    demand_of = {d.family: d for d in s.demand}

    variant_ids: list[str] = []
    variant_family: list[int] = []
    variant_model: list[str] = []
    variant_quality: list[float] = []
    variant_promise: list[float | None] = []
    variant_precisions: list[tuple[str, ...]] = []
    variant_loss: list[float] = []
    variant_by_key: dict[tuple[int, str], list[int]] = {}
    flagship_quality_of: list[float] = []  # at a lossless precision
    for f, fam in enumerate(s.families):
        classes = precision_classes(s, demand_of[fam.id].choice.quality_weight > 0)
        entries: list[tuple[str, float | None, float | None]] = [
            (fam.flagship, fam.flagship_quality, None)
        ]
        entries += [(v.model, v.quality, v.min_tokens_per_s_per_user) for v in fam.variants]
        for model, quality, promise in entries:
            base = model_quality[model] if quality is None else quality
            if model == fam.flagship and len(flagship_quality_of) == f:
                flagship_quality_of.append(base)
            for loss, precisions in classes:
                variant_by_key.setdefault((f, model), []).append(len(variant_ids))
                suffix = "@" + "+".join(precisions) if loss > 0 else ""
                variant_ids.append(f"{fam.id}/{model}{suffix}")
                variant_family.append(f)
                variant_model.append(model)
                variant_quality.append(base * (1.0 - loss))
                variant_precisions.append(precisions)
                variant_loss.append(loss)
                variant_promise.append(promise)
    unservable_variants = frozenset(
        (k, v)
        for v in range(len(variant_ids))
        for k in range(n_tiers)
        if servable_precisions is not None
        and not any(
            (variant_family[v], k, variant_model[v], p) in servable_precisions
            for p in variant_precisions[v]
        )
    )

    offer_cols: dict[str, list[float]] = {
        k: [] for k in ("family", "tier", "variant", "multiplier", "price", "speed")
    }
    combo_family: list[int] = []
    combo_offer: list[list[int]] = []
    shares_rows: list[FloatArray] = []
    reference_combo: list[int] = []
    sold = np.zeros((len(s.families), n_tiers), dtype=bool)
    admitted: list[tuple[tuple[int, ...], ...]] = []
    periods_demand: list[FloatArray] = []
    warnings: list[str] = []

    for f, fam in enumerate(s.families):
        d = demand_of[fam.id]
        choice = d.choice
        usd_per_output_token = (
            fam.usd_per_m_output_tokens
            + fam.usd_per_m_input_tokens * d.mean_input_tokens / d.mean_output_tokens
        ) / 1e6
        admitted.append(
            tuple(
                _admitted(s, f, k, variant_by_key, unservable, unservable_variants)
                for k in range(n_tiers)
            )
        )
        flagship_quality = flagship_quality_of[f]
        alpha = np.full(n_tiers, -np.inf)
        outside = choice.reference_shares[OUTSIDE]
        per_tier_offers: list[list[int]] = []
        per_tier_utility: list[list[float]] = []
        reference_offer: list[int] = []
        for k, tier in enumerate(tiers):
            share = choice.reference_shares.get(tier.id)
            if share is None:
                continue
            sold[f, k] = True
            alpha[k] = math.log(share / outside)
            offers_k: list[int] = []
            utility_k: list[float] = []
            reference_variant = admitted[f][k][0]
            # Calibrated at the flagship, reference multiplier, tier floor (docs/demand.md).
            ref_utility = -choice.price_sensitivity * math.log(tier.reference_multiplier)
            if offer_speed(s, k, None) > 0:
                ref_utility += choice.speed_weight * math.log(offer_speed(s, k, None))
            for v in admitted[f][k]:
                speed = offer_speed(s, k, variant_promise[v])
                for m in tier.multipliers:
                    o = len(offer_cols["family"])
                    for key, value in zip(
                        ("family", "tier", "variant", "multiplier", "price", "speed"),
                        (f, k, v, m, m * usd_per_output_token, speed),
                        strict=True,
                    ):
                        offer_cols[key].append(value)
                    u = -choice.price_sensitivity * math.log(m) + choice.quality_weight * (
                        variant_quality[v] - flagship_quality
                    )
                    if speed > 0:
                        u += choice.speed_weight * math.log(speed)
                    offers_k.append(o)
                    utility_k.append(u)
                    if v == reference_variant and m == tier.reference_multiplier:
                        reference_offer.append(o)
            per_tier_offers.append(offers_k)
            per_tier_utility.append([u - ref_utility for u in utility_k])
        sold_tiers = np.flatnonzero(sold[f])
        n_combos = math.prod(len(x) for x in per_tier_offers)
        menu = " x ".join(
            f"{tiers[k].id} {len(x)}" for k, x in zip(sold_tiers, per_tier_offers, strict=True)
        )
        if n_combos > MAX_COMBOS_PER_FAMILY:
            raise InputError(
                f"$.tiers: family {fam.id!r} has {n_combos:,} price cards ({menu} offers), above "
                f"{MAX_COMBOS_PER_FAMILY:,}; shorten a multiplier menu or admit fewer variants"
            )
        if n_combos > WARN_COMBOS_PER_FAMILY:
            warnings.append(f"family {fam.id!r}: {n_combos:,} price cards ({menu}); solves slow")
        first = len(combo_family)
        index_grid = np.array(
            list(itertools.product(*(range(len(x)) for x in per_tier_offers))), dtype=np.int64
        ).reshape(n_combos, len(sold_tiers))
        offer_of = np.full((n_combos, n_tiers), -1, dtype=np.int64)
        shift = np.zeros((n_combos, n_tiers))
        for j, k in enumerate(sold_tiers.tolist()):
            offer_of[:, k] = np.asarray(per_tier_offers[j])[index_grid[:, j]]
            shift[:, k] = np.asarray(per_tier_utility[j])[index_grid[:, j]]
        shares_rows.append(logit_shares(alpha, shift))
        combo_family.extend([f] * n_combos)
        combo_offer.extend(offer_of.tolist())
        is_reference = np.all(offer_of[:, sold_tiers] == np.asarray(reference_offer), axis=1)
        reference_combo.append(first + int(np.flatnonzero(is_reference)[0]))
        periods_demand.append(to_periods(hourly_requests_per_s(d), period_hours))

    requests = np.stack(periods_demand)  # (families, periods)
    outside_share = np.array(
        [demand_of[fam.id].choice.reference_shares[OUTSIDE] for fam in s.families]
    )
    market = requests / (1.0 - outside_share)[:, None]
    mean_out = np.array([demand_of[fam.id].mean_output_tokens for fam in s.families])
    cf = np.asarray(combo_family, dtype=np.int64)
    shares = np.concatenate(shares_rows)  # (combos, tiers)
    tokens = shares[:, :, None] * (market * mean_out[:, None])[cf][:, None, :]
    n_periods = requests.shape[1]
    offers = Offers(
        family=np.asarray(offer_cols["family"], dtype=np.int64),
        tier=np.asarray(offer_cols["tier"], dtype=np.int64),
        variant=np.asarray(offer_cols["variant"], dtype=np.int64),
        multiplier=np.asarray(offer_cols["multiplier"], dtype=np.float64),
        usd_per_output_token=np.repeat(
            np.asarray(offer_cols["price"], dtype=np.float64)[:, None], n_periods, axis=1
        ),
    )
    window = np.array(
        [(t.completion_window_hours or period_hours) // period_hours for t in tiers],
        dtype=np.int64,
    )
    demand = Demand(
        family_ids=tuple(f.id for f in s.families),
        tier_ids=tuple(t.id for t in tiers),
        variant_ids=tuple(variant_ids),
        offers=offers,
        combo_family=cf,
        combo_offer=np.asarray(combo_offer, dtype=np.int64).reshape(-1, n_tiers),
        tokens_per_s=tokens,
        reference_combo=np.asarray(reference_combo, dtype=np.int64),
        window_periods=window,
        unserved_penalty_usd_per_output_token=np.array(
            [t.unserved_penalty_usd_per_m_output_tokens / 1e6 for t in tiers]
        ),
    )
    info = DemandInfo(
        variant_family=np.asarray(variant_family, dtype=np.int64),
        variant_model=tuple(variant_model),
        variant_quality=np.asarray(variant_quality),
        variant_precisions=tuple(variant_precisions),
        variant_quality_loss=np.asarray(variant_loss, dtype=np.float64),
        offer_speed_tokens_per_s=np.asarray(offer_cols["speed"], dtype=np.float64),
        sold=sold,
        family_variants=tuple(admitted),
        requests_per_s=requests,
        mean_output_tokens=mean_out,
        warnings=tuple(warnings),
    )
    return demand, info
