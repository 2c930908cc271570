"""Each serving engine's measured all-reduce kernel time per message size, next to the model's.

A measurement, not used by the model. aiconfigurator-core 0.12.0 (PyPI, Apache-2.0) ships, per
accelerator and engine, a table of the engine's own all-reduce kernels
(``comm/<engine>/<version>/custom_allreduce_perf.parquet``): the latency of one all-reduce over 2,
4 and 8 GPUs of one node (2 and 4 on GB200, one compute tray) at every power-of-two message size
from 128 to 2^29 BF16 elements. Here each (engine, accelerator) table becomes a curve: per device
count, the fastest kernel the table holds at each size (the engine picks its best strategy:
one-shot, two-shot or NCCL), in microseconds, at ``MESSAGE_BYTES`` (bytes = elements x 2).

The model charges an all-reduce the pooled form of ``fleet.perf.comm.all_reduce_s`` at the
catalog's fitted figures: 2 log2(n) hops + a fixed call cost + 2 (n-1)/n x bytes over the fitted
link bandwidth. ``pooled_us`` evaluates it for comparison.

    python -m fleet.perf.kernel_allreduce [--data build/aic/whl]

prints each curve at a few message sizes beside the pooled form (docs/calibration.md reads them).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fleet.catalog import load_catalog
from fleet.perf import kernel_tables as kt
from fleet.perf.arrays import AcceleratorArrays, build_arrays
from fleet.perf.comm import all_reduce_s
from fleet.perf.kernel_engines import ENGINES

GPUS = (2, 4, 8)
"""Device counts a curve holds (one 8-GPU node at most)."""
MESSAGE_BYTES = tuple(2**k for k in range(8, 31))
"""Message sizes of a curve's points: 256 B to 1 GiB (the tables' 128 to 2^29 BF16 elements)."""
BF16_BYTES = 2
TABLE = "custom_allreduce_perf.parquet"


@dataclass(frozen=True, slots=True)
class Curve:
    """One engine's all-reduce kernel time (us) per ``MESSAGE_BYTES`` size and ``GPUS`` count."""

    us: dict[int, tuple[float, ...]]
    measured_8: bool
    """False: the table has no 8-GPU rows and ``us[8]`` is ``derived_8``'s."""

    def at(self, n: int, message_bytes: int) -> float:
        return self.us[n][MESSAGE_BYTES.index(message_bytes)]


def table_path(data: Path, accelerator_id: str, engine: str) -> Path:
    """Where ``engine``'s all-reduce table of ``accelerator_id`` sits under ``data``."""
    return data / kt.SYSTEMS[accelerator_id] / f"comm/{engine}/{ENGINES[engine]}/{TABLE}"


def curve(data: Path, accelerator_id: str, engine: str, acc: AcceleratorArrays) -> Curve | None:
    """``engine``'s all-reduce curve on ``accelerator_id`` (None: no table, or a table missing a
    size of the grid, or 2 or 4 devices). A table measured over one 4-GPU compute tray (GB200)
    has no 8-device rows: its 8-device curve is ``derived_8``'s."""
    if accelerator_id not in kt.SYSTEMS:
        return None
    path = table_path(data, accelerator_id, engine)
    if not path.is_file():
        return None
    d = (
        pl.read_parquet(path)
        .filter(pl.col("op_name") == "all_reduce")
        .group_by("num_gpus", "message_size")
        .agg(pl.col("latency").min())
    )
    fastest = {
        (int(n), int(size) * BF16_BYTES): float(ms) * 1e3
        for n, size, ms in d.select("num_gpus", "message_size", "latency").iter_rows()
    }
    us: dict[int, tuple[float, ...]] = {}
    for n in GPUS:
        points = [fastest.get((n, b)) for b in MESSAGE_BYTES]
        if all(p is not None and p > 0.0 for p in points):
            us[n] = tuple(float(p) for p in points)  # type: ignore[arg-type]
    if 2 not in us or 4 not in us:
        return None
    measured_8 = 8 in us
    if not measured_8:
        us[8] = derived_8(us[4], acc, accelerator_id)
    return Curve(us, measured_8)


def _figures(acc: AcceleratorArrays, accelerator_id: str) -> tuple[float, float, float]:
    """(link bytes/s with the fitted fraction, hop s, call s) of the pooled form on the part."""
    i = acc.ids.index(accelerator_id)
    link = float(acc.scale_up_bytes_per_s[i] * acc.link_fraction[i])
    return link, float(acc.scale_up_latency_s[i]), float(acc.collective_overhead_s[i])


def derived_8(
    gpus_4: Sequence[float], acc: AcceleratorArrays, accelerator_id: str
) -> tuple[float, ...]:
    """An 8-device curve from a 4-device one: + what the pooled form adds from 4 to 8 devices
    (2 x 7/8 - 2 x 3/4 of the bytes over the part's link, two more hops)."""
    link, hop, _ = _figures(acc, accelerator_id)
    return tuple(
        t + ((1.75 - 1.5) * b / link + 2.0 * hop) * 1e6
        for t, b in zip(gpus_4, MESSAGE_BYTES, strict=True)
    )


def pooled_us(acc: AcceleratorArrays, accelerator_id: str, n: int, message_bytes: float) -> float:
    """The model's all-reduce (``fleet.perf.comm.all_reduce_s``) at the catalog's pooled figures
    for the part, in microseconds."""
    link, hop, call = _figures(acc, accelerator_id)
    t = all_reduce_s(
        np.array(float(n)), np.array(message_bytes), np.array(link), np.array(hop), call
    )
    return float(t) * 1e6


SHOWN_BYTES = (8 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024, 16 * 1024 * 1024)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=kt.DEFAULT_WHEEL)
    args = parser.parse_args(argv)
    data = kt.find_data(args.data)
    acc = build_arrays(load_catalog()).accelerators
    head = "  ".join(f"{b // 1024:>6d}K" for b in SHOWN_BYTES)
    print(f"{'accelerator':20s} {'engine':7s} {'gpus':>4s}  {head}   (us per all-reduce)")
    for acc_id in acc.ids:
        curves = {e: curve(data, acc_id, e, acc) for e in ENGINES}
        if all(c is None for c in curves.values()):
            continue
        for n in GPUS:
            cells = "  ".join(f"{pooled_us(acc, acc_id, n, b):7.1f}" for b in SHOWN_BYTES)
            print(f"{acc_id:20s} {'model':7s} {n:4d}  {cells}")
            for engine, c in curves.items():
                if c is None:
                    continue
                cells = "  ".join(f"{c.at(n, b):7.1f}" for b in SHOWN_BYTES)
                mark = "" if c.measured_8 or n != 8 else "  (derived from 4 GPUs)"
                print(f"{acc_id:20s} {engine:7s} {n:4d}  {cells}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
