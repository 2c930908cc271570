"""What a configuration costs to run, from the catalog's hourly prices: USD per replica-hour and
USD per million output tokens at full batch.

The cost basis is the system's hourly price as the catalog gives it (``SystemArrays.usd_per_hour``:
the system's own ``usd_per_hour``, else devices x the accelerator's ``usd_per_hour``), the same
figure the planner charges a pool that sets no price of its own. Replicas smaller than a system
are packed as the planner packs them: ``devices_per_system // devices_per_replica`` replicas share
one system, so each pays its share; a replica spanning several systems pays for all of them.

USD per million output tokens = USD per replica-hour / (output tokens/s per replica x 3600) x 1e6:
the replica busy at its full batch, without the headroom the planner keeps for the TTFT
percentile or any idle hour, i.e. the floor of what a token costs on that configuration.
"""

from __future__ import annotations

import numpy as np

from fleet.perf.arrays import CatalogArrays
from fleet.perf.types import Configs, Estimate, FloatArray, Problem

SECONDS_PER_HOUR = 3600.0


def usd_per_hour_per_replica(arrays: CatalogArrays, configs: Configs, est: Estimate) -> FloatArray:
    """(n,) USD per hour of one replica at its system's catalog price (its share of a packed
    system); NaN where the layout is invalid."""
    price = arrays.systems.usd_per_hour[configs.system]
    per_system = arrays.systems.devices_per_system[configs.system]
    devices = np.maximum(est.devices_per_replica, 1)
    packed = np.where(devices < per_system, per_system // devices, 1)
    systems_per_unit = -(-devices * packed // per_system)
    valid = (est.problem == Problem.OK) | (est.problem == Problem.DOES_NOT_FIT)
    return np.where(valid, price * systems_per_unit / packed, np.nan)


def usd_per_m_output_tokens(arrays: CatalogArrays, configs: Configs, est: Estimate) -> FloatArray:
    """(n,) USD per million output tokens of a replica busy at full batch; NaN where the
    configuration has no usable estimate (does not fit, invalid layout)."""
    per_hour = usd_per_hour_per_replica(arrays, configs, est)
    tokens_per_hour = est.tokens_per_s_per_replica * SECONDS_PER_HOUR
    ok = (est.problem == Problem.OK) & np.isfinite(tokens_per_hour) & (tokens_per_hour > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, per_hour / tokens_per_hour * 1e6, np.nan)
