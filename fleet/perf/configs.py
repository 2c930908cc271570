"""Build ``Configs`` from ids and numbers: resolve ids to catalog indices once, at the edge.

Every argument may be a scalar or a sequence/array; they are broadcast together (numpy rules), so
``make_configs(catalog, model="llama-3.1-70b", accelerator="h100-sxm", tp=[1, 2, 4, 8],
batch=[[1], [8], [64]], isl=1024, osl=256)`` gives 3 x 4 = 12 rows. ``accelerator`` ids are turned
into their default system (``Catalog.default_system``); pass ``system`` to pick another. Precision
names are ``fleet.catalog.PRECISIONS``; the KV-cache precision defaults per row to
``default_kv_precision``. Unknown ids and precision names raise ``InputError`` (via
``UnknownIdError``) naming the field; layout validity is *not* checked here — ``estimate`` reports
it per row as a ``Problem`` code. ``isl`` counts the whole prompt; ``prefix_cached_tokens``
(default 0) is the part of it whose KV the prefix cache supplies (prefill skipped, KV held).
``lengths_vary`` (default False) says whether the closed-loop benchmark the ``*_burst_s`` figures
model draws its lengths from a range (``isl`` and ``osl`` then being the range's means);
``recv_interval`` (default 1) is the scheduler's request-poll interval in decode steps;
``ctx_hold_requests``, ``ctx_hold_iters`` (default 0: none) and ``ctx_hold_periodic`` how a
scheduler holds new prompts to batch their prefills (``fleet.perf.closed_loop.ctx_hold_steps``);
``moe_held_expert_time`` (default True) whether the engine's block-scaled FP8 MoE kernel pays its
time per expert held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fleet.catalog import PRECISIONS, Catalog, UnknownIdError
from fleet.errors import InputError
from fleet.perf.types import Configs, IntArray

IdsLike = str | Sequence[str] | np.ndarray
NumLike = int | float | Sequence[Any] | np.ndarray

BF16, FP8, FP4, INT8, INT4 = (PRECISIONS.index(p) for p in ("bf16", "fp8", "fp4", "int8", "int4"))


def resolve(kind: str, values: IdsLike, known: Sequence[str]) -> IntArray:
    """Map ids to indices into ``known``; unknown ids raise ``UnknownIdError`` naming ``kind``."""
    arr = np.asarray(values, dtype=object)
    uniques, inverse = np.unique(arr.astype(str), return_inverse=True)
    index = {k: i for i, k in enumerate(known)}
    mapped = np.empty(len(uniques), dtype=np.int64)
    for j, u in enumerate(uniques):
        if u not in index:
            raise UnknownIdError(kind, str(u), list(known))
        mapped[j] = index[u]
    return mapped[inverse].reshape(arr.shape)


def default_kv_precision(
    catalog: Catalog, system: IntArray, weight_precision: IntArray
) -> IntArray:
    """FP8 KV cache when the weights are 8 bits or narrower and the accelerator runs FP8
    natively (what serving engines do by default with FP8/FP4 checkpoints), else BF16. INT4
    weights keep a BF16 cache: AWQ/GPTQ W4A16 checkpoints run 16-bit activations and engines
    default the KV cache to the activation dtype."""
    systems = list(catalog.systems.values())
    fp8_native = np.asarray(
        ["fp8" in catalog.accelerators[s.accelerator].native_precisions for s in systems],
        dtype=bool,
    )
    narrow = (weight_precision != BF16) & (weight_precision != INT4)
    return np.where(narrow & fp8_native[system], FP8, BF16).astype(np.int64)


def make_configs(
    catalog: Catalog,
    *,
    model: IdsLike,
    system: IdsLike | None = None,
    accelerator: IdsLike | None = None,
    tp: NumLike = 1,
    pp: NumLike = 1,
    dp: NumLike = 1,
    ep: NumLike = 1,
    precision: IdsLike = "fp8",
    kv_precision: IdsLike | None = None,
    batch: NumLike = 1,
    isl: NumLike = 1024,
    osl: NumLike = 256,
    prefix_cached_tokens: NumLike = 0,
    spec_draft_tokens: NumLike = 0,
    spec_acceptance: NumLike = 0.0,
    lengths_vary: bool | Sequence[bool] | np.ndarray = False,
    recv_interval: NumLike = 1,
    ctx_hold_requests: NumLike = 0,
    ctx_hold_iters: NumLike = 0,
    ctx_hold_periodic: bool | Sequence[bool] | np.ndarray = False,
    moe_held_expert_time: bool | Sequence[bool] | np.ndarray = True,
) -> Configs:
    """Resolve ids and broadcast everything to one row per configuration."""
    if (system is None) == (accelerator is None):
        raise InputError("give exactly one of system or accelerator")
    model_idx = resolve("model", model, list(catalog.models))
    if system is None:
        acc = np.asarray(accelerator, dtype=object).astype(str)
        uniques, inverse = np.unique(acc, return_inverse=True)
        default_ids = [catalog.default_system(str(a)).id for a in uniques]
        system_idx = resolve(
            "system", np.asarray(default_ids)[inverse].reshape(acc.shape), list(catalog.systems)
        )
    else:
        system_idx = resolve("system", system, list(catalog.systems))
    weight_idx = resolve("precision", precision, PRECISIONS)
    parts = np.broadcast_arrays(
        model_idx,
        system_idx,
        weight_idx,
        _ints("tp", tp),
        _ints("pp", pp),
        _ints("dp", dp),
        _ints("ep", ep),
        _ints("batch", batch),
        _ints("isl", isl),
        _ints("osl", osl),
        _ints("spec_draft_tokens", spec_draft_tokens),
        np.asarray(spec_acceptance, dtype=np.float64),
        _ints("prefix_cached_tokens", prefix_cached_tokens),
        np.asarray(lengths_vary, dtype=bool),
        _ints("recv_interval", recv_interval),
        np.asarray(ctx_hold_requests, dtype=np.float64),
        _ints("ctx_hold_iters", ctx_hold_iters),
        np.asarray(ctx_hold_periodic, dtype=bool),
        np.asarray(moe_held_expert_time, dtype=bool),
        *([] if kv_precision is None else [resolve("kv precision", kv_precision, PRECISIONS)]),
    )
    flat = [np.ascontiguousarray(p).reshape(-1) for p in parts]
    m, s, w, t, p, d, e, b, i, o, k, a, cached, vary, recv, hold_n, hold_t, clock, held = flat[:19]
    if np.any(recv < 1):
        raise InputError("recv_interval: must be at least 1 (decode steps between polls)")
    if not np.all(hold_n >= 0) or np.any(hold_t < 0):
        raise InputError("ctx_hold_requests, ctx_hold_iters: must not be negative")
    kv = flat[19] if kv_precision is not None else default_kv_precision(catalog, s, w)
    return Configs(
        model=m.astype(np.int64),
        system=s.astype(np.int64),
        tp=t,
        pp=p,
        dp=d,
        ep=e,
        weight_precision=w.astype(np.int64),
        kv_precision=kv.astype(np.int64),
        batch=b,
        isl=i,
        prefix_cached_tokens=cached,
        osl=o,
        spec_draft_tokens=k,
        spec_acceptance=a.astype(np.float64),
        lengths_vary=vary.astype(bool),
        recv_interval=recv,
        ctx_hold_requests=hold_n.astype(np.float64),
        ctx_hold_iters=hold_t,
        ctx_hold_periodic=clock.astype(bool),
        moe_held_expert_time=held.astype(bool),
    )


def _ints(name: str, value: NumLike) -> IntArray:
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise InputError(f"{name}: must be whole numbers")
    elif arr.dtype.kind not in "iub":
        raise InputError(f"{name}: must be whole numbers, got {arr.dtype}")
    return arr.astype(np.int64)
