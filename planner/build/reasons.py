"""Why a tier cannot be served, in a capacity planner's words.

While ``planner.build.pipeline`` filters each (family, tier, variant) on every pool, a
``GroupTrace`` remembers how far the best configuration got: it runs (valid, fits), it reaches the
speed floor, its TTFT floor is under the SLO, its replica fits in the pool. When no pool gets a
variant through, ``unserved_sentence`` reports the furthest stage reached with the best figure
there, e.g.

    no candidate of qwen3-235b-a22b on any pool reaches the fast tier's 170 tokens/s per user
    (best: 143 tokens/s on b200-us-east, tp=8 fp8 batch 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleet.perf.types import Configs, Estimate
from planner.build.candidates import Slo, describe, fast_enough, responsive, runnable
from planner.scenario.schema import Tier


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a sold tier cannot be served: the sentence and the scenario field that binds."""

    path: str
    """e.g. ``$.tiers[2].min_tokens_per_s_per_user``, for a 4xx naming the field."""
    text: str


@dataclass(frozen=True, slots=True)
class Best:
    value: float
    pool: str
    config: str


@dataclass(slots=True)
class GroupTrace:
    """The best figure seen at each filter stage, over pools."""

    pools: list[str] = field(default_factory=list)
    speed: Best | None = None
    """Fastest streaming speed among configurations that run."""
    ttft: Best | None = None
    """Lowest TTFT floor among configurations fast enough."""
    size: tuple[int, str, int] | None = None
    """(systems per replica, pool, pool systems) of the smallest SLO-meeting replica."""

    def observe(
        self, pool: str, pool_systems: int, configs: Configs, est: Estimate, slo: Slo
    ) -> None:
        self.pools.append(pool)
        runs = runnable(est)
        if not runs.any():
            return
        i = int(np.argmax(np.where(runs, est.tokens_per_s_per_user, -np.inf)))
        if self.speed is None or est.tokens_per_s_per_user[i] > self.speed.value:
            self.speed = Best(float(est.tokens_per_s_per_user[i]), pool, describe(configs, i))
        fast = runs & fast_enough(est, slo)
        if not fast.any():
            return
        j = int(np.argmin(np.where(fast, est.ttft_floor_s, np.inf)))
        if self.ttft is None or est.ttft_floor_s[j] < self.ttft.value:
            self.ttft = Best(float(est.ttft_floor_s[j]), pool, describe(configs, j))
        ok = fast & responsive(est, slo)
        if not ok.any():
            return
        spr = int(est.systems_per_replica[ok].min())
        if self.size is None or spr - pool_systems < self.size[0] - self.size[2]:
            self.size = (spr, pool, pool_systems)


def unserved_reason(model: str, tier_index: int, tier: Tier, trace: GroupTrace) -> Reason:
    """``unserved_sentence`` with the field it is about: the stage that stopped the best
    configuration names it (pool sizes, the TTFT ceiling, the speed floor, or the search)."""
    if trace.size is not None:
        path = "$.fleet.pools"
    elif trace.ttft is not None:
        path = f"$.tiers[{tier_index}].max_ttft_ms"
    elif trace.speed is not None:
        path = f"$.tiers[{tier_index}].min_tokens_per_s_per_user"
    else:
        path = "$.options.search"
    return Reason(path=path, text=unserved_sentence(model, tier, trace))


def unserved_sentence(model: str, tier: Tier, trace: GroupTrace) -> str:
    """One sentence: the furthest stage any configuration of ``model`` reached for ``tier``."""
    if trace.size is not None:
        spr, pool, have = trace.size
        return (
            f"no pool is large enough for a replica of {model} that meets the {tier.id} tier's "
            f"SLOs (smallest: {spr} systems on {pool}, which has {have} available)"
        )
    if trace.ttft is not None:
        return (
            f"no candidate of {model} on any pool meets the {tier.id} tier's "
            f"{tier.max_ttft_ms:g} ms time to first token at p{tier.ttft_percentile:g} even "
            f"without queueing (best: {trace.ttft.value * 1e3:.0f} ms on {trace.ttft.pool}, "
            f"{trace.ttft.config}, the serving stack's per-request cost included)"
        )
    if trace.speed is not None:
        return (
            f"no candidate of {model} on any pool reaches the {tier.id} tier's "
            f"{tier.min_tokens_per_s_per_user:g} tokens/s per user (best: "
            f"{trace.speed.value:.0f} tokens/s on {trace.speed.pool}, {trace.speed.config})"
        )
    return (
        f"{model} fits on no pool ({', '.join(trace.pools)}) with the searched precisions and "
        f"batch caps, so the {tier.id} tier cannot be served by it"
    )
