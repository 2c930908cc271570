"""Each accelerator's end-to-end efficiency factors, derived where they are transferred.

The end-to-end factors of the ``fitted-on-runs`` family (Hopper) absorb serving-software effects
that kernel timings do not show, so a part with measured kernels (``kernel-transfer``) keeps the
family's factors and scales each by how its kernels compare with the family's
(docs/calibration.md):
- weight streaming per weight precision: each of the family's figures x gemm_bandwidth_fraction
  ratio (decode-regime BF16/FP8 GEMMs); native FP4 is the family's BF16/FP8 figure x this part's
  gemm_fp4_bandwidth_fraction over the family's BF16/FP8 kernel figure (Hopper runs FP4 only
  weight-only, a different kernel, so its run-fitted 4-bit figure is not the reference);
- routed MoE experts likewise, by the MoE (grouped GEMM) kernels: each family figure x
  moe_bandwidth_fraction ratio; native FP4 = the family's BF16/FP8 figure x this part's
  moe_fp4_bandwidth_fraction over the family's 8/16-bit MoE figure (dense weights keep the GEMM
  figures above);
- kv_bandwidth_fraction x attention_bandwidth_fraction ratio (KV reads of decode attention), the
  weight-streaming ratio where the part's attention table is not read (A100); routed experts
  stream as the other weights where the part has no MoE table (A100);
- prefill attention: this part's own measured context_attention_flops_fraction (a kernel figure,
  used as it is on every part with kernel tables, Hopper included: no run-fitted figure to scale);
- flops_fraction per precision x gemm_flops_fraction ratio of that precision (FP4, which Hopper
  lacks, against Hopper's FP8; INT8 takes the FP8 figure, or its own W8A8 figure against
  Hopper's FP8 where measured: A100); a precision without a kernel figure on the part (FP8 and
  FP4 on A100, FP4 on L40S) gets NaN: it is not offered (the catalog loader refuses it among
  native_precisions), not stood in for;
- measured INT4 weight-only GEMMs (A100): the family's 8/16-bit streaming figure x this part's
  gemm_int4_bandwidth_fraction over the family's BF16/FP8 kernel figure, as native FP4;
- link_bandwidth_fraction x all_reduce_link_fraction ratio;
- collective_overhead_us + the difference in small-message all-reduce latency (2 and 4 devices),
  net of the catalog's difference in hop latency, which the model already charges; >= 0;
- step_overhead_us and layer_overhead_us as the family's (serving software, not kernels);
- the routed experts' MoE compute form per expert kind (``moe_compute``: its FLOP fraction over
  the part's dense GEMM fraction of that precision, and where each of tokens per expert and
  expert width halves the rate): the part's own fit, else the family's mean (an estimate), else
  the dense rate.
The family's kernel figure is the geometric mean over its members, or the part's own
``family_kernel`` block where its tables are of another engine than the family's figures (Intel
Arc Pro B60: vLLM only; the block holds Hopper's vLLM figures, already a geometric mean).
``hopper-transfer-estimate`` parts take the family's factors unchanged, but for the 8-bit FLOP
fraction where their ``partial_kernel`` block measures it (MI300X, MI325X: AMD's block-scaled FP8
GEMM timings against Hopper's at the same shapes, ``fleet.perf.kernel_aiter``): the family's
figure x that ratio. Runs when the catalog becomes arrays (``fleet.perf.arrays.build_arrays``),
so a re-fit of the family propagates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fleet.catalog import (
    FOUR_BIT,
    MOE_ROUTINGS,
    MOE_SKEW_EP,
    PRECISIONS,
    Accelerator,
    Catalog,
    Precision,
)
from fleet.catalog.engines import EXPERT_KINDS, MoeForm
from fleet.catalog.schema import KernelFigures

Fractions = dict[Precision, float]
BALANCED: tuple[tuple[float, ...], ...] = tuple(
    tuple(1.0 for _ in MOE_SKEW_EP) for _ in MOE_ROUTINGS
)
"""Routing skew curves of a part without them: every rank an even share."""
FLAT_MOE: tuple[tuple[float, float, float], ...] = tuple((1.0, 0.0, 0.0) for _ in EXPERT_KINDS)
"""Routed experts at the dense FLOP rate of their precision, whatever the call's shape."""
MOE_KIND_PRECISION: dict[str, Precision] = {
    "bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4", "int4": "bf16",
}  # fmt: skip
"""The dense GEMM precision whose kernel FLOP fraction an expert kind's form is read against
(INT4 weight-only experts dequantize and compute in BF16)."""
EIGHT_BIT: frozenset[Precision] = frozenset({"fp8", "int8", "fp4"})
"""Precisions whose FLOP fraction is the 8-bit figure (``Efficiency.fp8_flops_fraction``)."""


@dataclass(frozen=True, slots=True)
class ResolvedEfficiency:
    """The factors the performance model uses, with flops and weight streaming per precision."""

    basis: str
    bandwidth_fraction: float
    """Weight streaming of 8- and 16-bit weights (the BF16 column of ``weight_bandwidth``)."""
    flops_fraction: Fractions
    step_overhead_us: float
    link_bandwidth_fraction: float
    layer_overhead_us: float
    collective_overhead_us: float
    kv_bandwidth_fraction: float
    """KV-cache reads of decode attention."""
    weight_bandwidth: Fractions
    """Weight streaming per weight precision (4-bit formats may stream slower than 8/16-bit)."""
    expert_bandwidth: Fractions
    """Weight streaming of an MoE layer's routed experts per weight precision (grouped GEMMs)."""
    prefill_attention_flops_fraction: float
    """Fraction of the BF16 peak prefill (flash) attention reaches: the part's measured kernel
    figure; the BF16 GEMM fraction where no kernel table exists (published-speed parts)."""
    state_bandwidth_fraction: float
    """A linear-attention layer's per-stream state, read and written back each decode step, as a
    fraction of HBM bandwidth: the part's measured kernel figure (not transferred, like prefill
    attention); the family's where the part has none (an estimate); the weight-streaming
    fraction on parts without any kernel table (published-speed parts)."""
    state_prefill_flops_fraction: float
    """Fraction of the BF16 peak a linear-attention layer's prefill scan reaches, per its
    state-update FLOPs: measured, else the family's, else the BF16 GEMM fraction."""
    mamba_conv_bandwidth_fraction: float
    """A Mamba2 mixer's convolution window read and written back each decode step, as a
    fraction of HBM bandwidth: measured, else the family's, else the state figure."""
    mamba_conv_prefill_bandwidth_fraction: float
    """A Mamba2 mixer's causal convolution over a prefill's tokens, as a fraction of HBM
    bandwidth: measured, else the family's, else the weight-streaming fraction."""
    moe_call_us: float = 0.0
    """Fixed time of an MoE layer's routed-expert call per forward pass: the part's measured
    kernel figure, else the family's; 0 on parts without kernel tables (published-speed)."""
    moe_fp4_call_us: float = 0.0
    """The same for native FP4 experts: the part's MXFP4 MoE kernel figure (the kernel their
    streaming figure comes from), else ``moe_call_us``."""
    dsa_call_us: float = 0.0
    """Fixed time of a DeepSeek Sparse Attention layer's attention module per forward pass: the
    part's measured figure, else the family's; 0 on parts without kernel tables."""
    moe_compute: tuple[tuple[float, float, float], ...] = FLAT_MOE
    """Per expert kind of ``EXPERT_KINDS``: the routed experts' grouped-GEMM compute on prefill
    tokens as (ratio, m0, n0), time = the dense rate's x (1 + m0 / m) x (1 + n0 / n) / ratio
    (m the pairs per expert, n the expert's width on the rank; ratio = the form's FLOP fraction
    over the part's dense GEMM fraction of that precision). The part's measured forms, else the
    family's (an estimate); (1, 0, 0), the dense rate, where neither has one."""
    moe_routing_skew: tuple[tuple[float, ...], ...] = BALANCED
    """Per routing of ``MOE_ROUTINGS``, per width of ``MOE_SKEW_EP``: the most-loaded rank's
    routed-expert time over the balanced router's. The part's measured curves, else the
    family's (geometric mean; an estimate); 1 (balanced) on parts without kernel tables."""


def _given(acc: Accelerator) -> ResolvedEfficiency:
    e = acc.efficiency
    flops = e.flops_fraction or 0.0
    eight_bit = e.fp8_flops_fraction or flops
    bw = e.bandwidth_fraction or 0.0
    four_bit = e.four_bit_bandwidth_fraction or bw
    return ResolvedEfficiency(
        basis=e.basis,
        bandwidth_fraction=bw,
        # FP4 takes the 8-bit figure: it is the reference FP4 transfers from (Hopper has no FP4
        # math; its weight-only FP4 computes at BF16).
        flops_fraction={p: eight_bit if p in EIGHT_BIT else flops for p in PRECISIONS},
        step_overhead_us=e.step_overhead_us or 0.0,
        link_bandwidth_fraction=e.link_bandwidth_fraction or 0.0,
        layer_overhead_us=e.layer_overhead_us or 0.0,
        collective_overhead_us=e.collective_overhead_us or 0.0,
        kv_bandwidth_fraction=e.kv_bandwidth_fraction or 0.0,
        weight_bandwidth={p: four_bit if p in FOUR_BIT else bw for p in PRECISIONS},
        # Fitted on runs (or taken as an estimate): experts stream like the other weights.
        expert_bandwidth={p: four_bit if p in FOUR_BIT else bw for p in PRECISIONS},
        prefill_attention_flops_fraction=(
            acc.kernel.context_attention_flops_fraction if acc.kernel is not None else flops
        ),
        state_bandwidth_fraction=(
            acc.kernel.state_bandwidth_fraction or bw if acc.kernel is not None else bw
        ),
        state_prefill_flops_fraction=(
            acc.kernel.state_prefill_flops_fraction or flops if acc.kernel is not None else flops
        ),
        mamba_conv_bandwidth_fraction=_kernel_or(acc, "mamba_conv_bandwidth_fraction", bw),
        mamba_conv_prefill_bandwidth_fraction=_kernel_or(
            acc, "mamba_conv_prefill_bandwidth_fraction", bw
        ),
        moe_call_us=_kernel_or(acc, "moe_call_us", 0.0),
        moe_fp4_call_us=_kernel_or(acc, "moe_fp4_call_us", _kernel_or(acc, "moe_call_us", 0.0)),
        dsa_call_us=_kernel_or(acc, "dsa_call_us", 0.0),
        moe_compute=_moe_compute(acc),
        moe_routing_skew=_skew(acc) or BALANCED,
    )


def moe_form_ratio(acc: Accelerator, kind: str, flops_fraction: float) -> float | None:
    """An MoE form's FLOP fraction of ``kind`` on ``acc`` as the model reads it: over the part's
    dense GEMM kernel fraction of that kind's precision (None where the part has no such
    figure), so that the end-to-end compute factors scale the experts as the dense layers."""
    k = acc.kernel
    gemm = None if k is None else getattr(k.gemm_flops_fraction, MOE_KIND_PRECISION[kind])
    return flops_fraction / gemm if gemm else None


def _moe_forms(acc: Accelerator) -> dict[str, MoeForm]:
    """The part's measured MoE compute forms as (ratio, m0, n0) per expert kind it has."""
    k = acc.kernel
    if k is None or k.moe_compute is None:
        return {}
    out = {}
    for kind in EXPERT_KINDS:
        form = getattr(k.moe_compute, kind)
        if form is None:
            continue
        ratio = moe_form_ratio(acc, kind, form.flops_fraction)
        if ratio is not None:
            out[kind] = (ratio, form.half_rate_pairs_per_expert, form.half_rate_width)
    return out


def _moe_compute(
    acc: Accelerator, family: list[Accelerator] | None = None
) -> tuple[tuple[float, float, float], ...]:
    """Per expert kind: the part's own form, else the family's mean (ratio geometric, m0 and
    n0 arithmetic), else flat (the dense rate)."""
    own = _moe_forms(acc)
    theirs = [_moe_forms(f) for f in family or []]
    out = []
    for kind in EXPERT_KINDS:
        if kind in own:
            out.append(own[kind])
            continue
        forms = [t[kind] for t in theirs if kind in t]
        out.append(mean_moe_form(forms) if forms else (1.0, 0.0, 0.0))
    return tuple(out)


def mean_moe_form(forms: Sequence[MoeForm]) -> MoeForm:
    """Several parts' forms of one expert kind as one: the FLOP fraction (or ratio) geometric,
    the half-rate points arithmetic."""
    n = len(forms)
    return (
        _geomean([f[0] for f in forms]),
        sum(f[1] for f in forms) / n,
        sum(f[2] for f in forms) / n,
    )


def _skew(acc: Accelerator) -> tuple[tuple[float, ...], ...] | None:
    """The part's measured routing-skew curves, None where it has none."""
    k = acc.kernel
    if k is None or k.moe_routing_skew is None:
        return None
    return tuple(k.moe_routing_skew.curve(r) for r in MOE_ROUTINGS)


def _family_skew(family: list[Accelerator]) -> tuple[tuple[float, ...], ...] | None:
    """The geometric mean of the family's measured skew curves, point by point."""
    curves = [c for c in (_skew(f) for f in family) if c is not None]
    if not curves:
        return None
    return tuple(
        tuple(_geomean([c[r][w] for c in curves]) for w in range(len(MOE_SKEW_EP)))
        for r in range(len(MOE_ROUTINGS))
    )


def _kernel_or(acc: Accelerator, figure: str, default: float) -> float:
    """The part's measured kernel ``figure`` where it has one, else ``default``."""
    value = getattr(acc.kernel, figure) if acc.kernel is not None else None
    return value or default


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _geomean_or_zero(values: list[float]) -> float:
    """The geometric mean of the positive ``values``; 0 when there are none."""
    positive = [v for v in values if v > 0.0]
    return _geomean(positive) if positive else 0.0


def _kernel_flops(k: KernelFigures, precision: Precision) -> float:
    f = k.gemm_flops_fraction
    if precision == "bf16":
        return f.bf16
    if precision == "fp4" and f.fp4 is not None:
        return f.fp4
    if f.fp8 is None:
        raise ValueError("a transfer_from family needs FP8 kernel figures")
    return f.fp8


def _own_flops(k: KernelFigures, precision: Precision) -> float | None:
    """This part's kernel FLOP figure for ``precision``: INT8 its own W8A8 figure where measured
    (A100), else FP8's; INT4 (weight-only) BF16's; None where the part has no such kernel."""
    f = k.gemm_flops_fraction
    if precision == "int8":
        return f.int8 if f.int8 is not None else f.fp8
    if precision == "int4":
        return f.bf16
    return getattr(f, precision)


def _expert_bandwidth(
    base: ResolvedEfficiency, k: KernelFigures, fam: list[KernelFigures], weight_bw: Fractions
) -> Fractions:
    """Routed-expert streaming: the family's figures x this part's MoE kernel streaming over the
    family's 8/16-bit MoE figure; native FP4 from the family's 8/16-bit figure x this part's FP4
    MoE kernel over the same reference (the family runs FP4 weight-only, a different kernel);
    INT4 weight-only from the family's INT4 figure x this part's W4A16 MoE kernel over the
    family's, where both measure it.
    A part without MoE tables (A100) streams experts as its other weights (``weight_bw``)."""
    if k.moe_bandwidth_fraction is None:
        return dict(weight_bw)
    family = _geomean([x.moe_bandwidth_fraction for x in fam])  # type: ignore[misc]
    ratio = k.moe_bandwidth_fraction / family
    out: Fractions = {p: min(1.0, base.weight_bandwidth[p] * ratio) for p in PRECISIONS}
    if k.moe_fp4_bandwidth_fraction is not None:
        out["fp4"] = min(1.0, base.bandwidth_fraction * k.moe_fp4_bandwidth_fraction / family)
    family_int4 = [x.moe_int4_bandwidth_fraction for x in fam]
    if k.moe_int4_bandwidth_fraction is not None and None not in family_int4:
        # INT4 weight-only experts by their own kernel (W4A16), which does not speed up from
        # Hopper to Blackwell as the 8/16-bit grouped GEMMs do
        int4 = k.moe_int4_bandwidth_fraction / _geomean(family_int4)  # type: ignore[arg-type]
        out["int4"] = min(1.0, base.expert_bandwidth["int4"] * int4)
    return out


def _hop_us(acc: Accelerator) -> float:
    return acc.scale_up_latency_us


def kernel_transfer(acc: Accelerator, family: list[Accelerator]) -> ResolvedEfficiency:
    """``acc``'s factors from the family's fitted ones and both parts' kernel figures."""
    base = _given(family[0])
    k = acc.kernel
    # The family's figures of this part's engine where its tables are another engine's (B60).
    ks = [acc.family_kernel] if acc.family_kernel is not None else [f.kernel for f in family]
    if k is None or any(x is None for x in ks):
        raise ValueError(f"{acc.id}: kernel-transfer needs kernel figures")
    fam = [x for x in ks if x is not None]

    def ratio(get: Callable[[KernelFigures], float]) -> float:
        return get(k) / _geomean([get(x) for x in fam])

    flops: Fractions = {}
    for p in PRECISIONS:
        # INT8 math runs like FP8; INT4 is weight-only (BF16 math); FP4 transfers from FP8.
        ref: Precision = {"int8": "fp8", "int4": "bf16", "fp4": "fp8"}.get(p, p)  # type: ignore[assignment]
        mine = _own_flops(k, p)
        if mine is None:
            flops[p] = math.nan  # no kernel of this precision on the part: not offered
            continue
        flops[p] = min(1.0, base.flops_fraction[ref] * mine / _geomean(
            [_kernel_flops(x, ref) for x in fam]))  # fmt: skip
    stream = ratio(lambda x: x.gemm_bandwidth_fraction)
    weight_bw: Fractions = {p: min(1.0, base.weight_bandwidth[p] * stream) for p in PRECISIONS}
    family_stream = _geomean([x.gemm_bandwidth_fraction for x in fam])
    if k.gemm_fp4_bandwidth_fraction is not None:
        weight_bw["fp4"] = min(
            1.0, base.bandwidth_fraction * k.gemm_fp4_bandwidth_fraction / family_stream
        )
    if k.gemm_int4_bandwidth_fraction is not None:
        # Measured INT4 weight-only GEMMs (A100): from the family's 8/16-bit figure, as FP4.
        weight_bw["int4"] = min(
            1.0, base.bandwidth_fraction * k.gemm_int4_bandwidth_fraction / family_stream
        )
    expert_bw = _expert_bandwidth(base, k, fam, weight_bw)
    # KV reads by the decode-attention kernels; the weight-streaming ratio where the part's
    # attention table is not read (A100, kernel_parts.KV_READ_UNPHYSICAL).
    kv_ratio = (
        stream
        if k.attention_bandwidth_fraction is None
        else ratio(lambda x: x.attention_bandwidth_fraction)  # type: ignore[arg-type,return-value]
    )
    hop_family = _geomean([_hop_us(f) for f in family])
    extra = [
        getattr(k, f"all_reduce_call_us_{n}")
        - _geomean([getattr(x, f"all_reduce_call_us_{n}") for x in fam])
        - 2.0 * math.log2(n) * (_hop_us(acc) - hop_family)
        for n in (2, 4)
    ]
    # a fixed kernel time: the part's own measurement, else the family's (0 if it has none)
    call_us = k.moe_call_us or _geomean_or_zero([_given(f).moe_call_us for f in family])
    return ResolvedEfficiency(
        basis="kernel-transfer",
        bandwidth_fraction=weight_bw["bf16"],
        flops_fraction=flops,
        step_overhead_us=base.step_overhead_us,
        link_bandwidth_fraction=min(
            1.0, base.link_bandwidth_fraction * ratio(lambda x: x.all_reduce_link_fraction)
        ),
        layer_overhead_us=base.layer_overhead_us,
        collective_overhead_us=max(0.0, base.collective_overhead_us + sum(extra) / len(extra)),
        kv_bandwidth_fraction=min(1.0, base.kv_bandwidth_fraction * kv_ratio),
        weight_bandwidth=weight_bw,
        expert_bandwidth=expert_bw,
        prefill_attention_flops_fraction=k.context_attention_flops_fraction,
        state_bandwidth_fraction=k.state_bandwidth_fraction or base.state_bandwidth_fraction,
        state_prefill_flops_fraction=(
            k.state_prefill_flops_fraction or base.state_prefill_flops_fraction
        ),
        mamba_conv_bandwidth_fraction=(
            k.mamba_conv_bandwidth_fraction or base.mamba_conv_bandwidth_fraction
        ),
        mamba_conv_prefill_bandwidth_fraction=(
            k.mamba_conv_prefill_bandwidth_fraction or base.mamba_conv_prefill_bandwidth_fraction
        ),
        moe_call_us=call_us,
        moe_fp4_call_us=k.moe_fp4_call_us or call_us,
        dsa_call_us=k.dsa_call_us or _geomean_or_zero([_given(f).dsa_call_us for f in family]),
        moe_compute=_moe_compute(acc, family),
        moe_routing_skew=_skew(acc) or _family_skew(family) or BALANCED,
    )


def partial_transfer(acc: Accelerator, family: ResolvedEfficiency) -> ResolvedEfficiency:
    """A ``hopper-transfer-estimate`` part's factors: the family's, but for the 8-bit FLOP
    fraction where the part's ``partial_kernel`` figures measure it (MI300X / MI325X: AMD's
    block-scaled FP8 GEMMs against Hopper's at the same shapes), which moves by that ratio."""
    out = dataclasses.replace(family, basis=acc.efficiency.basis)
    k = acc.partial_kernel
    if k is None:
        return out
    ratio = k.fp8_gemm_flops_fraction / k.family_fp8_gemm_flops_fraction
    flops = {
        p: min(1.0, f * ratio) if p in EIGHT_BIT else f for p, f in family.flops_fraction.items()
    }
    return dataclasses.replace(out, flops_fraction=flops)


def resolve_efficiency(catalog: Catalog) -> dict[str, ResolvedEfficiency]:
    """Every accelerator's factors, by id (the catalog loader has checked the bases)."""
    out: dict[str, ResolvedEfficiency] = {}
    for acc in catalog.accelerators.values():
        basis = acc.efficiency.basis
        family = [catalog.accelerator(a) for a in acc.efficiency.transfer_from]
        if basis == "kernel-transfer":
            out[acc.id] = kernel_transfer(acc, family)
        elif basis == "hopper-transfer-estimate":
            out[acc.id] = partial_transfer(acc, _given(family[0]))
        else:
            out[acc.id] = _given(acc)
    return out
