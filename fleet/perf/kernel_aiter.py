"""MI300X FP8 GEMM efficiency from AMD's measured kernel timings (PyPI ``amd-aiter``), set
against Hopper's at the same GEMM shapes.

AMD's AI Tensor Engine for ROCm (``amd-aiter`` 0.1.7.post2.dev18, MIT licence in the wheel's
LICENSE file) ships the tables its GEMM tuner wrote: ``aiter/configs/*_tuned_gemm.csv``, one row
per (part, M, N, K) with the winning kernel's measured time ``us``. The part is its compute-unit
count ``cu_num``: 304 is the CDNA 3 die of MI300X and MI325X (the tables cannot tell them apart),
256 MI355X, 80 MI308X. For 304 CUs the only plain GEMM table is ``a8w8_blockscale_tuned_gemm.csv``:
FP8 weights and activations with one scale per 128 x 128 weight block and per 1 x 128
activation group (DeepSeek-V3's block-scaled FP8), at DeepSeek-V3's projection shapes
(``N x K`` of 9 weight matrices, 1.8M-33M elements) for M = 16 to 20,480 tokens. The batched
tables of 304 CUs (``a8w8_tuned_batched_gemm.csv``, ``bf16_tuned_batched_gemm.csv``: 16
MLA-style matrices) are not read: their working sets sit in the 256 MB Infinity Cache (their
``bw`` column reaches 5.0 TB/s on a 5.3 TB/s part) and Hopper's tables hold no batched GEMM.

What the table can and cannot say about the model's factors:
- weight streaming (the decode regime of ``fleet.perf.kernel_fit``): not measurable. Every
  weight matrix in the table is at most 33 MB of FP8 (4,608 x 7,168 plus its scales), an eighth
  of MI300X's 256 MB Infinity Cache, so a timing loop over one matrix can stream it from cache,
  not HBM; no call's weights exceed the cache (``cache_exceeding_calls``). The small-M calls run
  at 0.2-1.95 TB/s of apparent traffic, set by per-call cost, not bandwidth.
- FP8 compute (the compute regime): measurable, like for like. Hopper's figure is refitted on
  aiconfigurator-core's H100 SXM ``fp8_block`` GEMM table (TensorRT-LLM 1.3.0rc20, DeepSeek-V3's
  block-scaled FP8 as well) at exactly the (M, N, K) both tables hold: 6 weight shapes x 12
  token counts = 72 calls (H100's table lacks 576 x 7,168, 4,608 x 7,168 and 7,168 x 2,304;
  MI300X's lacks M = 20,480 on H100's side). The compute regime is M >= ``COMPUTE_MIN_TOKENS``
  (2,048) on those shapes: 24 calls. ``kernel_fit``'s regime also asks for weights of at least
  16.8M elements, which none of the shared shapes has (the largest, 7,168 x 2,048, is 14.7M);
  the roofline's memory term charges what the small weights' activations and outputs move.

Fits, the same on both parts and the same forms as ``fleet.perf.kernel_fit.gemm_fits``: the
roofline time = roof(2MNK / (FP8 peak x f_flops), bytes / (HBM x f_bw)) + call cost over every
shared call, then its FLOP fraction (and call cost) refitted on the compute regime at the
first fit's bandwidth fraction. Held out: a seeded quarter (``kernel_tables.held_out_keys``) of
each fit's own (M, N, K) calls, drawn per fit: drawn by weight shape, as ``kernel_fit`` draws,
the 6 shared shapes leave none held out, and drawn once over all 72 calls, none of the 24
compute-regime calls. So held-out rows test unseen token counts on seen weight shapes, a weaker
test than ``kernel_fit``'s unseen weight shapes. The ratio MI300X / H100 of the compute-regime
FLOP fractions is what ``fleet.perf.transfer`` scales Hopper's run-fitted 8-bit FLOP fraction by.

Re-run (prints the [accelerators.partial_kernel] figures of the mi300x and mi325x entries):

    pip download --no-deps amd-aiter==0.1.7.post2.dev18 -d build/aiter
    python -m zipfile -e build/aiter/amd_aiter-0.1.7.post2.dev18-py3-none-any.whl build/aiter/whl
    python -m fleet.perf.kernel_aiter --aiter build/aiter/whl --data build/aic/whl
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fleet.catalog import Accelerator, load_catalog
from fleet.perf import kernel_fit as kf
from fleet.perf import kernel_tables as kt
from fleet.perf.types import FloatArray

PACKAGE = "amd-aiter 0.1.7.post2.dev18 (MIT)"
BLOCKSCALE_TABLE = Path("aiter") / "configs" / "a8w8_blockscale_tuned_gemm.csv"
CU_NUM = 304
"""Compute units of the CDNA 3 die MI300X and MI325X share (AMD Instinct MI300X and MI325X
datasheets: 304 CUs)."""
PARTS = ("mi300x", "mi325x")
"""Catalog entries the 304-CU rows describe: one compute die, the same peak FLOPS and engine
clock (2,100 MHz) on both datasheets; their HBM differs (5.3 and 6.0 TB/s)."""
REFERENCE = "h100-sxm"
"""The Hopper part whose block-scaled FP8 GEMM table the ratio is taken against."""
INFINITY_CACHE_BYTES = 256 * 2.0**20
"""MI300X's and MI325X's last-level cache (AMD CDNA 3 white paper: 256 MB Infinity Cache)."""
BLOCK = 128
"""Block-scaled FP8: one float32 scale per 128 x 128 weights."""


def find_aiter(root: Path) -> Path:
    """The unpacked wheel's root under ``root`` (the directory holding ``aiter/configs``)."""
    if (root / BLOCKSCALE_TABLE).is_file():
        return root
    raise FileNotFoundError(
        f"no amd-aiter tuned-GEMM tables under {root}; see fleet/perf/kernel_aiter.py"
    )


def mi300_rows(aiter: Path) -> pl.DataFrame:
    """The 304-CU rows of the block-scaled FP8 table as (m, n, k, latency in ms), the columns
    ``kernel_tables.gemm_samples`` reads."""
    d = pl.read_csv(aiter / BLOCKSCALE_TABLE).filter(pl.col("cu_num") == CU_NUM)
    ms = pl.col("us") * 1e-3
    return d.select(m="M", n="N", k="K", latency=ms).sort("n", "k", "m")


def hopper_rows(data: Path) -> pl.DataFrame:
    """H100's ``fp8_block`` GEMM rows, fastest per (m, n, k)."""
    d = kt.gemm_rows(kt.table_path(data, REFERENCE, kt.GEMM_TABLE), "fp8_block")
    return d.group_by("m", "n", "k").agg(pl.col("latency").min()).sort("n", "k", "m")


def weight_bytes(rows: pl.DataFrame) -> FloatArray:
    """FP8 weights plus their float32 block scales, per row."""
    n, k = (rows[c].to_numpy().astype(np.float64) for c in ("n", "k"))
    return n * k + np.ceil(n / BLOCK) * np.ceil(k / BLOCK) * 4.0


def cache_exceeding_calls(rows: pl.DataFrame) -> int:
    """Calls whose weights exceed the Infinity Cache: the only ones that would time HBM."""
    return int((weight_bytes(rows) > INFINITY_CACHE_BYTES).sum())


def _samples(rows: pl.DataFrame) -> kt.Samples:
    """``kernel_tables.gemm_samples`` of FP8 rows, held out: a seeded quarter of these calls."""
    s = kt.gemm_samples(rows, "fp8_block")
    held_out = kt.held_out_keys(rows.select("m", "n", "k"))
    return kt.Samples(s.flops, s.bytes, s.n, s.latency_s, held_out)


@dataclass(frozen=True, slots=True)
class ComputeFits:
    """One part's fits on the shared calls."""

    full: kf.KernelFit
    """The roofline over every shared call (reported; the compute fit starts from it)."""
    compute: kf.KernelFit
    """Its FLOP fraction refitted on the compute regime: the figure the ratio takes."""


def compute_fits(acc: Accelerator, rows: pl.DataFrame) -> ComputeFits:
    """The roofline of ``rows`` (the shared calls) on ``acc``'s datasheet figures, then its FLOP
    fraction and call cost refitted on the calls of at least ``kernel_tables
    .COMPUTE_MIN_TOKENS`` tokens, each fit with its own seeded held-out quarter."""
    peak = (acc.peak_tflops.fp8 or 0.0) * 1e12
    bw = acc.memory_bandwidth_bytes_per_s
    full = kf._roofline(acc, "gemm fp8_block", _samples(rows), peak, (0.6, 0.7, 5.0), 100.0)
    start = full.params

    def on_flops(x: np.ndarray, s: kt.Samples) -> FloatArray:
        memory = s.bytes / (bw * start["bandwidth_fraction"])
        return kf._roof(s.flops / (peak * x[0]), memory) + x[1] * 1e-6

    regime = rows.filter(pl.col("m") >= kt.COMPUTE_MIN_TOKENS)
    compute = kf._fit(
        acc.id, "gemm fp8_block compute", _samples(regime), on_flops,
        ("flops_fraction", "call_us"),
        (start["flops_fraction"], start["call_us"]), ((0.01, 0.0), (1.5, 100.0)),
    )  # fmt: skip
    return ComputeFits(full, compute)


def shared_calls(amd: pl.DataFrame, hopper: pl.DataFrame) -> pl.DataFrame:
    """The (m, n, k) both tables time."""
    return amd.select("m", "n", "k").join(hopper.select("m", "n", "k"), on=["m", "n", "k"])


@dataclass(frozen=True, slots=True)
class Comparison:
    """The like-for-like FP8 compute comparison and what the table says about streaming."""

    part: ComputeFits
    reference: ComputeFits
    calls: int
    cache_exceeding: int
    largest_weight_bytes: float

    @property
    def ratio(self) -> float:
        """MI300X's compute-regime FP8 FLOP fraction over H100's at the same calls."""
        mine = self.part.compute.params["flops_fraction"]
        return mine / self.reference.compute.params["flops_fraction"]


def compare(aiter: Path, data: Path, part: Accelerator, reference: Accelerator) -> Comparison:
    """Both parts' fits on the calls both tables hold."""
    amd, hopper = mi300_rows(aiter), hopper_rows(data)
    keys = shared_calls(amd, hopper)
    mine = keys.join(amd, on=["m", "n", "k"]).sort("n", "k", "m")
    theirs = keys.join(hopper, on=["m", "n", "k"]).sort("n", "k", "m")
    return Comparison(
        part=compute_fits(part, mine),
        reference=compute_fits(reference, theirs),
        calls=keys.height,
        cache_exceeding=cache_exceeding_calls(amd),
        largest_weight_bytes=float(weight_bytes(amd).max()),
    )


def figures(c: Comparison) -> dict[str, float]:
    """The [accelerators.partial_kernel] figures: this part's and the reference's FP8 FLOP
    fractions in the compute regime at the shared calls."""
    return {
        "fp8_gemm_flops_fraction": c.part.compute.params["flops_fraction"],
        "family_fp8_gemm_flops_fraction": c.reference.compute.params["flops_fraction"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiter", type=Path, default=Path("build/aiter/whl"))
    parser.add_argument("--data", type=Path, default=Path("build/aic/whl"))
    args = parser.parse_args(argv)
    try:
        aiter, data = find_aiter(args.aiter), kt.find_data(args.data)
    except FileNotFoundError as err:
        parser.exit(2, f"{err}\n")
    catalog = load_catalog()
    c = compare(aiter, data, catalog.accelerator(PARTS[0]), catalog.accelerator(REFERENCE))
    print(f"[accelerators.partial_kernel]  # {', '.join(PARTS)}: {CU_NUM}-CU rows")
    for name, value in figures(c).items():
        print(f"{name} = {value:.3g}")
    print(f"# ratio {c.ratio:.3f} over {c.calls} shared calls")
    print(
        f"# weight streaming not measured: {c.cache_exceeding} calls' weights exceed the "
        f"{INFINITY_CACHE_BYTES / 2**20:.0f} MB Infinity Cache "
        f"(largest {c.largest_weight_bytes / 1e6:.1f} MB)"
    )
    for f in (c.part.full, c.part.compute, c.reference.full, c.reference.compute):
        print(kf.fit_line(f))
    own = compute_fits(catalog.accelerator(PARTS[0]), mi300_rows(aiter))
    print(f"# {PARTS[0]} on every {CU_NUM}-CU row (reported, not in the ratio):")
    for f in (own.full, own.compute):
        print(kf.fit_line(f))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
