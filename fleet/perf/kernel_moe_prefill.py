"""MoE grouped GEMMs at prefill sizes against the performance model's rates for routed experts.

A measurement, not used by the model. aiconfigurator-core's TensorRT-LLM MoE tables
(``moe_perf.parquet``: one rank's routed experts, balanced routing, the gated kernels of
``kernel_tables.MOE_KERNELS``) hold calls of up to 16,384 tokens. On the calls of at least
``PREFILL_TOKENS`` tokens (a prefill chunk's share of a rank), each measured time is set against
the time the model's own expert rates give, with FLOPs and bytes counted as ``kernel_tables.moe``
counts them: the part's compute fraction of the weight precision (``transfer.ResolvedEfficiency``,
as a prefill step charges expert FLOPs), its expert streaming fraction and its MoE call time,
composed three ways:

- ``max``: max(compute, memory) + call (a roofline that overlaps the two fully);
- ``roof``: the model's smooth roofline (``model._roof``) + call;
- ``sum``: compute + memory + call (no overlap).

Printed per part and dtype: the median signed error of each form (negative: the model's rates
are too fast) and its median absolute error over all calls and over the seeded held-out quarter
of shapes (``kernel_tables.held_out_keys``). docs/calibration.md reads these figures.

    python -m fleet.perf.kernel_moe_prefill [--data build/aic/whl]
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import Catalog, Precision, load_catalog
from fleet.perf import kernel_tables as kt
from fleet.perf.model import _roof
from fleet.perf.transfer import ResolvedEfficiency, resolve_efficiency

PREFILL_TOKENS = 256
"""Calls of at least this many tokens on the rank: prefill-sized (decode steps carry <= 64)."""
PRECISION: dict[str, Precision] = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4"}
"""MoE table dtype (our name) -> the weight precision whose rates the model charges it at."""
PARTS = ("h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300")
FORMS = ("max", "roof", "sum")


@dataclass(frozen=True, slots=True)
class FormError:
    signed: float
    """Median of predicted / measured - 1 over every call."""
    absolute: float
    held_out: float
    """Median absolute error over the held-out quarter's calls."""


@dataclass(frozen=True, slots=True)
class PrefillCheck:
    accelerator: str
    dtype: str
    calls: int
    forms: dict[str, FormError]


def check(
    data: Path,
    catalog: Catalog,
    accelerator: str,
    dtype: str,
    efficiency: Mapping[str, ResolvedEfficiency] | None = None,
) -> PrefillCheck | None:
    """The three forms on ``accelerator``'s prefill-sized ``dtype`` calls; None where the table
    holds none or the part has no peak for the dtype's precision. ``efficiency``: the catalog's
    resolved factors, when the caller has them already."""
    acc = catalog.accelerator(accelerator)
    precision = PRECISION[dtype]
    peak_tflops = acc.peak_tflops.get(precision)
    if peak_tflops is None:
        return None
    s = kt.moe(data, accelerator, dtype, min_tokens=PREFILL_TOKENS, max_tokens=None)
    if s.latency_s.size == 0:
        return None
    eff = (efficiency or resolve_efficiency(catalog))[accelerator]
    compute = s.flops / (peak_tflops * 1e12 * eff.flops_fraction[precision])
    memory = s.bytes / (acc.memory_bandwidth_bytes_per_s * eff.expert_bandwidth[precision])
    call = (eff.moe_fp4_call_us if precision == "fp4" else eff.moe_call_us) * 1e-6
    predicted = {
        "max": np.maximum(compute, memory) + call,
        "roof": _roof(compute, memory) + call,
        "sum": compute + memory + call,
    }
    out = {}
    for form, t in predicted.items():
        r = t / s.latency_s - 1.0
        out[form] = FormError(
            signed=float(np.median(r)),
            absolute=float(np.median(np.abs(r))),
            held_out=float(np.median(np.abs(r[s.held_out]))),
        )
    return PrefillCheck(accelerator, dtype, int(s.latency_s.size), out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("build/aic/whl"))
    args = parser.parse_args(argv)
    data = kt.find_data(args.data)
    catalog = load_catalog()
    efficiency = resolve_efficiency(catalog)
    print(f"MoE calls of >= {PREFILL_TOKENS} tokens; per form: signed / absolute / held-out")
    print("| part | dtype | calls | " + " | ".join(FORMS) + " |")
    print("|---|---|---:|" + "---:|" * len(FORMS))
    for part in PARTS:
        for dtype in PRECISION:
            c = check(data, catalog, part, dtype, efficiency)
            if c is None:
                continue
            cells = " | ".join(
                f"{e.signed:+.0%} / {e.absolute:.1%} / {e.held_out:.1%}"
                for e in (c.forms[f] for f in FORMS)
            )
            print(f"| {part} | {dtype} | {c.calls} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
