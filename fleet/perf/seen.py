"""Which rows of a serving-benchmark log another log already holds: the measurements a fit read.

A log scored as unseen data (``farebox score LOG --seen FIT.csv``) can repeat rows of the runs the
model's factors were fitted on; those rows are in-sample and flatter its errors. A row of LOG is
*seen* when FIT holds the same measurement: the same model, system, engine, precision, serving
mode, lengths, concurrency, layout and measured TTFT and TPOT (``KEYS``; measured figures compared
to 1e-6 ms, so two spellings of one number match). Columns a file lacks count as empty in it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from fleet.perf.measured import read_rows

KEYS = (
    "model_path", "system", "backend", "precision", "gemm_quant_mode", "moe_quant_mode", "mode",
    "isl", "osl", "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size",
    "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms",
)  # fmt: skip
"""What makes two rows the same measurement."""
MEASURED = ("silicon_ttft_ms", "silicon_tpot_ms")


def _key(row: dict[str, str]) -> tuple[str, ...]:
    out = []
    for k in KEYS:
        value = (row.get(k) or "").strip()
        if k in MEASURED:
            with contextlib.suppress(ValueError):  # not a number: compared as written
                value = f"{float(value):.6f}"
        out.append(value)
    return tuple(out)


def seen_lines(log: Path, fit: Path) -> frozenset[int]:
    """The lines of ``log`` (the header is line 1) whose measurement ``fit`` holds too."""
    held = {_key(r) for r in read_rows(fit, "--seen log")}
    return frozenset(i + 2 for i, r in enumerate(read_rows(log, "log")) if _key(r) in held)
