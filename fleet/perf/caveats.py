"""Known biases of the performance model on runs no fit reads, worded as plans repeat them.

A bias is the median signed error (predicted / measured - 1) of a class of configurations on the
serving runs the fits never read: aiconfigurator-core 0.12.0's silicon sample less the reference
runs the Hopper factors are fitted on (``farebox score LOG --seen REFERENCE``, the bias
columns; docs/known-gaps.md). ``tests/fleet/test_unseen_check.py`` recomputes each from the
sample and fails when the figure stated here no longer holds, so a plan's caveat cannot go stale
quietly.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.catalog import Accelerator, Model


@dataclass(frozen=True, slots=True)
class Bias:
    """One measured bias of the model's figures."""

    figure: str
    median_signed: float
    """Median of predicted / measured - 1."""
    runs: int
    """Scored runs of the class the median is over."""
    measured: str
    """Date of the measurement (ISO)."""


MOE_TTFT = Bias(figure="TTFT", median_signed=-0.246, runs=2328, measured="2026-11-25")
"""MoE models' TTFT on the sample's runs no fit reads: a quarter short on every accelerator
measured (B200 -25%, H200 -30%, B300 -13%, H100 -22%, GB200 -24%, GB300 -29%); the dense
models' 293 runs there read +21%."""


def moe_ttft_bias(model: Model) -> str | None:
    """The measured TTFT bias of ``model``'s class, as a clause (None for a dense model)."""
    if model.moe is None:
        return None
    b = MOE_TTFT
    return (
        f"the performance model's {b.figure} for MoE models reads {-b.median_signed:.0%} short "
        f"of measured runs no fit reads (median over {b.runs:,} runs, {b.measured}; "
        "docs/known-gaps.md)"
    )


def moe_ttft_caveat(model: Model) -> str | None:
    """The warning a plan carries for ``model`` (None for a dense model)."""
    bias = moe_ttft_bias(model)
    if bias is None:
        return None
    return (
        f"model {model.id}: {bias}, so the TTFT floors, headroom and promises planned for it "
        "are likely optimistic by about that much"
    )


LARGE_BATCH_STREAMS = 65
"""Streams in flight per replica from which ``LARGE_BATCH`` holds (the score's 65+ users group)."""
LARGE_BATCH = Bias(figure="tokens/s per GPU", median_signed=0.181, runs=539, measured="2026-11-25")
"""Runs at 65 or more users in flight, on the sample's runs no fit reads: the model's throughput
reads 18% high (TPOT 14% short). By engine: vLLM +25% (139 runs), SGLang +25% (156),
TensorRT-LLM +9% (244); at 129+ users vLLM +43%. What the measured steps add per stream in flight
is the serving loop's per-request work (docs/calibration.md, "A cost per stream in flight")."""


def roofline_speeds(accelerator: Accelerator) -> bool:
    """Whether the part's speeds come from the fitted roofline, which the biases here are
    measured on; SRAM parts' are set on published figures (``published-speed``)."""
    return accelerator.efficiency.basis != "published-speed"


def large_batch_bias(batch: int) -> str | None:
    """The measured throughput bias at ``batch`` streams per replica, as a clause (None below
    ``LARGE_BATCH_STREAMS``)."""
    if batch < LARGE_BATCH_STREAMS:
        return None
    b = LARGE_BATCH
    return (
        f"at {LARGE_BATCH_STREAMS} or more streams per replica the performance model's {b.figure} "
        f"reads {b.median_signed:.0%} high against measured runs no fit reads (median over "
        f"{b.runs:,} runs, {b.measured}; docs/known-gaps.md)"
    )


def large_batch_caveat(replicas_at: int, largest_batch: int) -> str:
    """The warning of a plan whose ``replicas_at`` assignments run ``LARGE_BATCH_STREAMS`` or more
    streams per replica (the largest ``largest_batch``)."""
    return (
        f"{replicas_at} assignment(s) run replicas at {LARGE_BATCH_STREAMS} or more streams (up "
        f"to {largest_batch}): {large_batch_bias(largest_batch)}, so the capacity planned on them "
        "is likely optimistic by about that much"
    )
