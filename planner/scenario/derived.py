"""What a decoded (and checked) scenario implies beyond its fields: its horizon, and which models
may serve each (family, tier)."""

from __future__ import annotations

from planner.scenario.schema import FLAGSHIP, Scenario


def horizon_hours(scenario: Scenario) -> int:
    """The horizon: every family's forecast has this many hours (checked by the decoder)."""
    return scenario.demand[0].hours


def family_variants(s: Scenario, family_index: int, tier_index: int) -> tuple[str, ...]:
    """Model ids that may serve ``tier`` of ``family``: the family's variants the tier admits."""
    family = s.families[family_index]
    tier = s.tiers[tier_index]
    models = (family.flagship, *(v.model for v in family.variants))
    if tier.variants is None:
        return models
    admitted = set(tier.variants)
    return tuple(
        m for k, m in enumerate(models) if m in admitted or (k == 0 and FLAGSHIP in admitted)
    )
