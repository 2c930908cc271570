"""Disaggregated prefill/decode serving: units of k decode replicas fed by m prefill replicas.

Prefill replicas process whole prompts and hand each request's KV cache to a decode replica, so a
decode step carries no prefill chunk (its TPOT is the pure decode step over the accepted tokens,
``Estimate.step_s / tokens_per_step``) and the time to first token is the prefill replica's own
time, the KV transfer and one decode step. Frontier GB200 NVL72 deployments of DeepSeek-R1 run
this way (NVIDIA Dynamo, SGLang's PD disaggregation).

Per unit (all vectorized, from the aggregated grid's rows, ``fleet.perf.grid.evaluate_grid``):
- decode side: a fitting row of the grid (layout, precision, batch b, speculative option) used
  without its prefill interference: step s = ``step_s``, TPOT = step / accepted tokens, and a
  request holds one of its b slots for transfer + step + (osl - 1) x TPOT;
- prefill side: a layout of the same system and weight precision (speculative decoding off, the
  smallest batch that fits), prefilling one prompt per attention rank at a time: dp prompts per
  ``Estimate.prefill_wave_s`` (data-parallel attention ranks each take their own prompt, as
  attention-DP prefill workers run; one prompt per ``prefill_s`` when dp = 1), so dp /
  prefill_wave_s requests/s per replica. Prompts shorter than the 8,192-token chunk are not
  packed into one pass (conservative for short prompts);
- ratio: k in ``DECODE_REPLICAS`` decode replicas; m = ceil(cover x k x decode requests/s x
  prefill_wave_s / dp) prefill replicas, cover in ``PREFILL_COVER``: the prefill side covers
  the decode side's request rate at full batch, with 0-100% spare so a prefill queue can stay
  short (the planner's TTFT headroom picks the ratio; a unit is one candidate "replica");
- KV transfer: the prompt's KV (all layers, sliding layers capped at their window; DeepSeek-V4's
  compressed entries, indexer keys and compressor states too) from the
  prefill replica's tp x pp ranks to the decode replica's (the fewer of the two send in
  parallel), over the scale-up link when the whole unit sits in one system inside one scale-up
  domain (an NVL72 rack), else over each device's share of the system's scale-out network
  (``fleet.perf.comm`` figures: link bandwidth x link efficiency, plus the link's latency);
- systems: replicas smaller than a system are packed onto whole systems, larger ones take whole
  systems (as the planner counts them), prefill and decode apart unless the unit fits in one
  system's scale-up domain altogether;
- output tokens/s = min(k x b x osl / decode hold, m x dp x osl / prefill_wave_s); TTFT floor =
  prefill_s (a lone prompt) + transfer + decode step; ``ttft_burst_s`` (a closed-loop benchmark's
  mean TTFT at the unit's k x b users) adds the engine's request overhead
  (``CatalogArrays.request_overhead_s``) and, on its first wave, the wait behind the other
  prompts at the m x dp prefill lanes (``fleet.perf.closed_loop``); ``request_s`` = the decode
  hold.

``Units.estimate`` keeps the ``Estimate`` columns so a unit reads like one replica; memory columns
are the decode replica's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from fleet.catalog import BYTES_PER_ELEMENT, PRECISIONS, Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.closed_loop import disaggregated_wave_wait_s, ttft_closed_loop
from fleet.perf.frontier import pareto_mask
from fleet.perf.memory import kv_tokens_held
from fleet.perf.types import Configs, Estimate, FloatArray, IntArray

DECODE_REPLICAS = (1, 2, 4, 8)
"""Decode replicas per unit."""
PREFILL_COVER = (1.0, 1.5, 2.0)
"""Prefill request capacity over the decode side's request rate at full batch (before rounding
up to whole prefill replicas)."""
MAX_PREFILL_REPLICAS = 64
"""Units needing more prefill replicas are not formed (prompts far too long for the layout)."""
MAX_DECODE_ROWS = 32
"""Decode rows per weight precision: the decode-only frontier, thinned evenly (by rank along it)
when longer, so the units of a grid are bounded before it is evaluated (``unit_bound``)."""
MAX_PREFILL_ROWS = 6
"""Prefill rows per weight precision, the prefill frontier thinned the same way."""
_BYTES = np.asarray([BYTES_PER_ELEMENT[p] for p in PRECISIONS])


@dataclass(frozen=True, slots=True)
class Units:
    """One row per disaggregated unit."""

    configs: Configs
    """The decode replica's configuration."""
    prefill: Configs
    """The prefill replica's configuration."""
    estimate: Estimate
    """The unit as one replica (see the module docstring)."""
    decode_row: IntArray
    """Row of the decode replica in the grid the units were formed from."""
    prefill_row: IntArray
    """Row of the prefill replica in that grid."""
    decode_replicas: IntArray
    prefill_replicas: IntArray
    transfer_s: FloatArray
    """KV transfer of one request, prefill to decode."""
    decode_tokens_per_s: FloatArray
    """Output tokens/s of the k decode replicas at full batch."""
    prefill_tokens_per_s: FloatArray
    """Output tokens/s the m prefill replicas admit when always busy (m x dp x osl /
    prefill_wave_s)."""
    prefill_hold_s: FloatArray
    """Seconds a prompt holds its prefill slot (``Estimate.prefill_wave_s`` of the prefill
    replica)."""
    prefill_slots: IntArray
    """Prompts the prefill side holds at once: m x the prefill replica's dp attention ranks."""

    def __len__(self) -> int:
        return int(self.decode_replicas.shape[0])

    def take(self, index: IntArray) -> Units:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.take(index) if hasattr(value, "take") else value[index]
        return Units(**out)


def _decode_rate(configs: Configs, est: Estimate, transfer_s: FloatArray | float) -> FloatArray:
    """Requests/s of one decode replica at full batch (a slot is held from the KV transfer on)."""
    tpot = est.step_s / est.tokens_per_step
    hold = transfer_s + est.step_s + (configs.osl - 1.0) * tpot
    return configs.batch / hold


def _thin(rows: IntArray, most: int) -> IntArray:
    """At most ``most`` of ``rows`` (ordered along a frontier), evenly spaced, both ends kept."""
    if rows.shape[0] <= most:
        return rows
    return rows[np.unique(np.round(np.linspace(0, rows.shape[0] - 1, most)).astype(np.int64))]


def unit_bound(runnable_precisions: int) -> int:
    """Most units ``form_units`` makes of one grid whose system runs that many of the searched
    weight precisions (decode x prefill rows per precision x ratios)."""
    ratios = len(DECODE_REPLICAS) * len(PREFILL_COVER)
    return runnable_precisions * MAX_DECODE_ROWS * MAX_PREFILL_ROWS * ratios


def units_bound(catalog: Catalog, system_id: str, precisions: Sequence[str]) -> int:
    """Most disaggregated units a grid of ``system_id`` adds (``unit_bound``
    over the searched precisions the system runs): a bound, known before anything is
    evaluated."""
    acc = catalog.accelerator(catalog.system(system_id).accelerator)
    return unit_bound(sum(1 for p in set(precisions) if acc.runs(p)))


def decode_rows(configs: Configs, est: Estimate) -> IntArray:
    """Rows worth a decode side: fitting, and per weight precision on the Pareto frontier of
    decode-only tokens/s per device vs tokens/s per user."""
    tpot = est.step_s / est.tokens_per_step
    per_device = _decode_rate(configs, est, np.zeros(len(configs))) * configs.osl
    per_device = per_device / est.devices_per_replica
    out = []
    for p in np.unique(configs.weight_precision):
        rows = np.flatnonzero(est.fits & (configs.weight_precision == p))
        keep = rows[pareto_mask(1.0 / tpot[rows], per_device[rows])]
        out.append(_thin(keep[np.argsort(tpot[keep])], MAX_DECODE_ROWS))
    return np.sort(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


def prefill_rows(configs: Configs, est: Estimate) -> IntArray:
    """Rows worth a prefill side: fitting, no speculation, and per weight precision on the Pareto
    frontier of requests/s per device vs prefill speed (one row per layout)."""
    out = []
    per_device = configs.dp / (est.prefill_wave_s * est.devices_per_replica)
    for p in np.unique(configs.weight_precision):
        rows = np.flatnonzero(
            est.fits & (configs.weight_precision == p) & (configs.spec_draft_tokens == 0)
        )
        if not rows.size:
            continue
        keep = pareto_mask(1.0 / est.prefill_s[rows], per_device[rows])
        rows = rows[keep]
        # One row per layout: the prefill time does not depend on the batch.
        layout = np.stack([configs.tp[rows], configs.pp[rows], configs.dp[rows], configs.ep[rows]])
        _, first = np.unique(layout, axis=1, return_index=True)
        rows = rows[first]
        out.append(_thin(rows[np.argsort(est.prefill_s[rows])], MAX_PREFILL_ROWS))
    return np.sort(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


def _systems(replicas: IntArray, devices: IntArray, per_system: IntArray) -> IntArray:
    """Whole systems ``replicas`` replicas of ``devices`` each take (small ones packed)."""
    small = devices < per_system
    packed = np.maximum(per_system // np.maximum(devices, 1), 1)
    return np.where(small, -(-replicas // packed), replicas * -(-devices // per_system)).astype(
        np.int64
    )


def kv_transfer_bytes(arrays: CatalogArrays, configs: Configs) -> FloatArray:
    """KV cache bytes of one request's whole prompt (all layers, all heads), with the state of
    its linear-attention layers and Mamba2 mixers and the index keys of block-sparse layers."""
    m = arrays.models
    model = configs.model
    sliding = m.sliding_layers[model]
    linear = m.linear_layers[model]
    full = m.num_layers[model] - sliding - linear - m.mixerless_layers[model]
    tokens = kv_tokens_held(configs.isl.astype(np.float64), full, sliding, m.sliding_window[model])
    kv = tokens * m.kv_elements_per_token_layer[model] * _BYTES[configs.kv_precision]
    # sliding layers of their own shape (Gemma 4, MiMo-V2): their extra (or fewer) elements
    own = m.sliding_kv_elements_per_token_layer[model] - m.kv_elements_per_token_layer[model]
    own_tokens = sliding * np.minimum(configs.isl.astype(np.float64), m.sliding_window[model])
    kv = kv + own_tokens * own * _BYTES[configs.kv_precision]
    kv = kv + linear * m.state_bytes_per_layer[model]
    sparse = np.flatnonzero(m.block_sparse_layers[model])  # block-sparse layers' index keys
    if sparse.size:
        index = m.block_sparse_index_elements_per_token_layer[model[sparse]]
        kv[sparse] += (
            m.block_sparse_layers[model[sparse]]
            * index
            * configs.isl[sparse]
            * _BYTES[configs.kv_precision[sparse]]
        )
    # DeepSeek-V4: the compressed entries beyond every layer's window (fleet.perf.compressed)
    rows = np.flatnonzero((m.csa_layers[model] + m.hca_layers[model]) > 0)
    if rows.size:
        mo, isl = model[rows], configs.isl[rows].astype(np.float64)
        entry = m.kv_elements_per_token_layer[mo] * _BYTES[configs.kv_precision[rows]]
        kv[rows] += (
            m.csa_layers[mo]
            * np.floor(isl / m.csa_ratio[mo])
            * (entry + m.index_key_bytes_per_entry[mo])
            + m.hca_layers[mo] * np.floor(isl / m.hca_ratio[mo]) * entry
            + m.compressor_state_bytes[mo]
        )
    return kv


def form_units(
    arrays: CatalogArrays,
    configs: Configs,
    est: Estimate,
    *,
    decode_replicas: Sequence[int] = DECODE_REPLICAS,
    prefill_cover: Sequence[float] = PREFILL_COVER,
) -> Units:
    """Every unit of a decode row and a prefill row of the same weight precision from one
    evaluated grid (one model, system and token profile), for every ratio."""
    d_rows, p_rows = decode_rows(configs, est), prefill_rows(configs, est)
    same = configs.weight_precision[d_rows][:, None] == configs.weight_precision[p_rows][None, :]
    di, pi = np.nonzero(same)
    ks = np.asarray(decode_replicas, dtype=np.int64)
    covers = np.asarray(prefill_cover, dtype=np.float64)
    grid = np.meshgrid(np.arange(di.shape[0]), np.arange(ks.shape[0]), np.arange(covers.shape[0]))
    pair, ki, ci = (g.reshape(-1) for g in grid)
    d, p = d_rows[di[pair]], p_rows[pi[pair]]
    k, cover = ks[ki], covers[ci]
    per_prompt_s = est.prefill_wave_s[p] / configs.dp[p]
    # The ratio at full batch (transfer-free rate; the transfer is added below and only lowers
    # the decode rate, so the prefill side still covers it).
    m = np.ceil(cover * k * _decode_rate(configs.take(d), est.take(d), 0.0) * per_prompt_s - 1e-9)
    m = np.maximum(m, 1.0).astype(np.int64)
    keep = np.flatnonzero(m <= MAX_PREFILL_REPLICAS)
    units = assemble_units(arrays, configs, est, d[keep], p[keep], k[keep], m[keep])
    # Ratios that round to the same unit (small cover steps on a tiny prefill side) once.
    key = np.stack(
        [units.decode_row, units.prefill_row, units.decode_replicas, units.prefill_replicas]
    )
    _, first = np.unique(key, axis=1, return_index=True)
    return units.take(np.sort(first))


def assemble_units(
    arrays: CatalogArrays,
    configs: Configs,
    est: Estimate,
    d: IntArray,
    p: IntArray,
    k: IntArray,
    m: IntArray,
) -> Units:
    """Unit i of ``k[i]`` decode replicas of grid row ``d[i]`` fed by ``m[i]`` prefill replicas
    of grid row ``p[i]`` (rows of one evaluated grid, or of grids of one model, system and token
    profile concatenated); ``form_units`` picks the rows and ratios, a caller reproducing a
    published deployment gives its own."""
    k = np.asarray(k, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    S, A = arrays.systems, arrays.accelerators
    system = configs.system[d]
    acc = S.accelerator[system]
    per_system = S.devices_per_system[system]
    domain = np.minimum(S.scale_up_domain[system], per_system)
    dev_d, dev_p = est.devices_per_replica[d], est.devices_per_replica[p]
    prefill_s = est.prefill_s[p]
    devices = k * dev_d + m * dev_p
    together = devices <= domain
    systems = np.where(
        together, 1, _systems(k, dev_d, per_system) + _systems(m, dev_p, per_system)
    ).astype(np.int64)
    up = A.scale_up_bytes_per_s[acc] * A.link_fraction[acc]
    out = S.scale_out_bytes_per_s[system] / per_system * A.link_fraction[acc]
    senders = np.minimum(configs.tp[p] * configs.pp[p], configs.tp[d] * configs.pp[d])
    link = np.where(together, up, out) * senders
    latency = np.where(together, A.scale_up_latency_s[acc], S.scale_out_latency_s[system])
    transfer = kv_transfer_bytes(arrays, configs.take(p)) / link + latency
    dc, de = configs.take(d), est.take(d)
    tpot = de.step_s / de.tokens_per_step
    decode_tokens = k * _decode_rate(dc, de, transfer) * dc.osl
    slots = m * configs.dp[p]
    hold = est.prefill_wave_s[p]
    prefill_tokens = slots * dc.osl / hold
    tokens = np.minimum(decode_tokens, prefill_tokens)
    ttft = prefill_s + transfer + de.step_s
    # a closed-loop benchmark at the unit's k x b users: its first wave queues at the prefill
    # lanes, later waves arrive staggered (fleet.perf.closed_loop)
    wave_wait = disaggregated_wave_wait_s((k * dc.batch).astype(float), slots.astype(float), hold)
    ttft_burst = ttft_closed_loop(
        ttft + wave_wait, ttft, np.zeros_like(ttft), A.request_overhead_s[acc]
    )
    unit = replace(
        de,
        fits=de.fits & est.fits[p],
        devices_per_replica=devices.astype(np.int64),
        systems_per_replica=systems,
        tpot_s=tpot,
        tpot_burst_s=tpot,
        tokens_per_s_per_user=1.0 / tpot,
        tokens_per_s_per_replica=tokens,
        tokens_per_s_per_device=tokens / devices,
        prefill_s=prefill_s,
        prefill_wave_s=hold,
        ttft_floor_s=ttft,
        ttft_burst_s=ttft_burst,
        request_s=transfer + de.step_s + (dc.osl - 1.0) * tpot,
        aggregated_step_s=de.step_s,
    )
    return Units(
        configs=dc,
        prefill=configs.take(p),
        estimate=unit,
        decode_row=d,
        prefill_row=p,
        decode_replicas=k.astype(np.int64),
        prefill_replicas=m,
        transfer_s=transfer,
        decode_tokens_per_s=decode_tokens,
        prefill_tokens_per_s=prefill_tokens,
        prefill_hold_s=hold,
        prefill_slots=slots.astype(np.int64),
    )


def label(units: Units, row: int) -> str:
    """``disaggregated 2 decode x (tp=8 dp=4 ...) + 3 prefill x (tp=4 ...)`` layout parts."""

    def layout(c: Configs, i: int) -> str:
        parts = [f"tp={c.tp[i]}"]
        for name in ("pp", "dp", "ep"):
            if getattr(c, name)[i] > 1:
                parts.append(f"{name}={int(getattr(c, name)[i])}")
        return " ".join(parts)

    return (
        f"disaggregated: {units.decode_replicas[row]} decode x ({layout(units.configs, row)}) + "
        f"{units.prefill_replicas[row]} prefill x ({layout(units.prefill, row)})"
    )
