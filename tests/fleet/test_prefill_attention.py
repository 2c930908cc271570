"""Prefill (flash) attention runs at its own measured fraction of the BF16 peak.

The context-attention kernel tables of aiconfigurator-core reach ~0.45 of the BF16 peak on Hopper
and ~0.38 on Blackwell (``fleet.perf.kernel_fit``, docs/calibration.md), well below the large
GEMMs' ~0.80 / ~0.67 the prefill attention was charged at before. These tests fail if prefill
attention goes back to the GEMM fraction or if the figure stops following each part's kernels.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate
from fleet.perf.transfer import resolve_efficiency


def _prefill_attention_at(arrays: CatalogArrays, fraction: float) -> CatalogArrays:
    acc = arrays.accelerators
    column = np.full_like(acc.prefill_attention_flops_fraction, fraction)
    return dataclasses.replace(
        arrays,
        accelerators=dataclasses.replace(acc, prefill_attention_flops_fraction=column),
    )


def test_prefill_attention_is_charged_at_its_own_fraction(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Llama 3.1 8B BF16 on one H100, one 8k prompt: halving the prefill attention fraction adds
    exactly the attention FLOPs' time again to the (compute-bound) prefill and leaves the decode
    step alone."""
    configs = make_configs(
        catalog, model="llama-3.1-8b", accelerator="h100-sxm", precision="bf16",
        batch=1, isl=8192, osl=64,
    )  # fmt: skip
    f = resolve_efficiency(catalog)["h100-sxm"].prefill_attention_flops_fraction
    base = estimate(_prefill_attention_at(arrays, f), configs)
    slow = estimate(_prefill_attention_at(arrays, f / 2.0), configs)
    assert slow.step_s[0] == pytest.approx(base.step_s[0])
    m = catalog.model("llama-3.1-8b")
    # causal attention of one 8k prompt: q.k and p.v over half the context, per layer
    attention_flops = 2.0 * 8192**2 * m.num_attention_heads * m.head_dim * m.num_layers
    peak = catalog.accelerator("h100-sxm").peak_tflops.bf16 * 1e12
    added = slow.prefill_s[0] - base.prefill_s[0]
    assert added == pytest.approx(attention_flops / (peak * f), rel=0.1)


def test_each_part_takes_its_measured_context_attention_fraction(catalog: Catalog) -> None:
    eff = resolve_efficiency(catalog)
    for acc in ("h100-sxm", "h200-sxm", "b200", "gb200"):
        kernel = catalog.accelerator(acc).kernel
        assert kernel is not None
        assert eff[acc].prefill_attention_flops_fraction == kernel.context_attention_flops_fraction
        # flash attention reaches well below the large GEMMs' fraction
        assert eff[acc].prefill_attention_flops_fraction < eff[acc].flops_fraction["bf16"] - 0.2
    # Blackwell's kernels reach a lower fraction of their (higher) peak than Hopper's
    assert (
        eff["b200"].prefill_attention_flops_fraction
        < eff["h100-sxm"].prefill_attention_flops_fraction
    )
    # parts without kernel tables take Hopper's figure (an estimate, flagged by their basis)
    for acc in ("mi300x", "tpu-v5p", "gaudi3"):
        assert catalog.accelerator(acc).efficiency.basis == "hopper-transfer-estimate"
        assert (
            eff[acc].prefill_attention_flops_fraction
            == eff["h100-sxm"].prefill_attention_flops_fraction
        )
