"""MiniMax-M3 with and without its block-sparse attention: decode step and TTFT floor.

    python bench/block_sparse_points.py

MiniMax-M3 (entry held in tests/fleet/data/minimax-m3.toml, appended to a copy of the catalog)
on 8 B200s (hgx-b200-8), tp 8, ep 8, batch 32, 1k output tokens, FP8 and FP4 weights with an FP8
KV cache, at prompts of 1k to 128k tokens: the estimate as it is, and with the model's
block-sparse layers read densely (every context token, no index keys).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

from fleet.catalog.load import DATA_DIR, load_catalog
from fleet.perf.arrays import build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate

ENTRY = Path(__file__).resolve().parents[1] / "tests" / "fleet" / "data" / "minimax-m3.toml"
MODEL = "minimax-m3"


def main() -> int:
    catalog = load_catalog()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path in DATA_DIR.glob("*.toml"):
            shutil.copy(path, root / path.name)
        models = (DATA_DIR / "models.toml").read_text(encoding="utf-8")
        (root / "models.toml").write_text(models + "\n" + ENTRY.read_text(encoding="utf-8"))
        if MODEL not in catalog.models:  # the entry is held in the tests' data until it checks
            catalog = load_catalog(root)
    arrays = build_arrays(catalog)
    m = arrays.models
    layers = m.block_sparse_layers.copy()
    layers[m.ids.index(MODEL)] = 0.0
    dense = dataclasses.replace(arrays, models=dataclasses.replace(m, block_sparse_layers=layers))
    print("weights isl     step ms (dense)   TTFT floor ms (dense)   KV GB/device  max batch")
    for precision in ("fp8", "fp4"):
        for isl in (1024, 8192, 32768, 131072):
            configs = make_configs(
                catalog, model=MODEL, system="hgx-b200-8", precision=precision,
                kv_precision="fp8", tp=8, ep=8, batch=32, isl=isl, osl=1024,
            )  # fmt: skip
            s, d = estimate(arrays, configs), estimate(dense, configs)
            print(
                f"{precision:<7} {isl:>6}  {s.step_s[0] * 1e3:6.2f} ({d.step_s[0] * 1e3:6.2f})"
                f"   {s.ttft_floor_s[0] * 1e3:8.1f} ({d.ttft_floor_s[0] * 1e3:8.1f})"
                f"   {s.kv_bytes_per_device[0] / 1e9:11.1f}  {s.max_batch[0]:9d}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
