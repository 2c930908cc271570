"""Measured serving runs as ``Configs`` + observations.

The data: end-to-end aggregated-serving measurements on H100 SXM and H200 SXM nodes (one row = one
replica layout at a fixed concurrency, with measured TTFT and TPOT), from ``systems/
silicon_sample.csv`` of the Apache-2.0 package aiconfigurator-core 0.12.0 (NVIDIA), kept as
``shared/reference/measured_calibration.csv`` beside the repo. Column mapping:
- model: ``MODEL_IDS`` maps each ``model_path`` to a catalog model (the NVIDIA FP8 checkpoint of
  Llama 3.1 8B is the same architecture); system: ``SYSTEM_IDS`` (8-GPU HGX nodes);
- layout: tp = ``tp_size``; dp = ``attention_dp_size`` (empty/0 -> 1); pp = ``pp_size``;
  ep = ``moe_ep_size`` (empty/0 -> 1; ``moe_tp_size`` = tp x dp / ep is implied by our convention);
  GPUs per replica = tp x dp x pp;
- batch = the ``silicon_concurrency=N`` inside ``silicon_data_source`` (``batch_size`` when absent);
- precision: ``gemm_quant_mode`` fp8 / fp8_block -> fp8, nvfp4 -> fp4, empty -> bf16; the KV cache
  precision is not recorded, so it takes ``default_kv_precision`` (FP8 with FP8/FP4 weights);
- observations: TPOT = ``silicon_tpot_ms``; tokens/s per GPU = concurrency x osl /
  (ttft_s + osl x tpot_s) / GPUs (closed loop), from the measured TTFT and TPOT.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import Catalog
from fleet.errors import InputError
from fleet.perf.configs import make_configs
from fleet.perf.types import Configs, FloatArray

MODEL_IDS = {
    "Qwen/Qwen3-32B": "qwen3-32b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "deepseek-ai/DeepSeek-R1": "deepseek-r1",
}
SYSTEM_IDS = {"h100_sxm": "hgx-h100-8", "h200_sxm": "hgx-h200-8"}
PRECISION_NAMES = {"": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
CSV_NAME = "measured_calibration.csv"


@dataclass(frozen=True, slots=True)
class MeasuredRuns:
    configs: Configs
    model_ids: tuple[str, ...]
    """Catalog model id per row."""
    system_ids: tuple[str, ...]
    backend: tuple[str, ...]
    tpot_s: FloatArray
    ttft_s: FloatArray
    tokens_per_s_per_gpu: FloatArray

    def __len__(self) -> int:
        return len(self.configs)

    def take(self, rows: np.ndarray) -> MeasuredRuns:
        """The runs at ``rows`` (indices), every column alike."""

        def pick(values: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(np.asarray(values)[rows].tolist())

        return MeasuredRuns(
            configs=self.configs.take(rows),
            model_ids=pick(self.model_ids),
            system_ids=pick(self.system_ids),
            backend=pick(self.backend),
            tpot_s=self.tpot_s[rows],
            ttft_s=self.ttft_s[rows],
            tokens_per_s_per_gpu=self.tokens_per_s_per_gpu[rows],
        )


def reference_csv(repo_root: Path) -> Path:
    """Where the measurements live: ``<repo>/../shared/reference/measured_calibration.csv``."""
    return repo_root.parent / "shared" / "reference" / CSV_NAME


def _int(text: str, default: int = 1) -> int:
    text = text.strip()
    if not text:
        return default
    value = int(float(text))
    return value if value > 0 else default


def load_measured(catalog: Catalog, path: Path) -> MeasuredRuns:
    """Parse the CSV into configurations (one per row) and the measured figures."""
    if not path.exists():
        raise InputError(f"calibration csv: {path} does not exist")
    cols: dict[str, list] = {
        k: []
        for k in (
            "model",
            "system",
            "tp",
            "pp",
            "dp",
            "ep",
            "precision",
            "batch",
            "isl",
            "osl",
            "backend",
            "tpot",
            "ttft",
        )
    }
    with path.open(newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            try:
                model = MODEL_IDS[row["model_path"]]
                system = SYSTEM_IDS[row["system"]]
                precision = PRECISION_NAMES[row["gemm_quant_mode"].strip()]
            except KeyError as err:
                raise InputError(f"calibration csv: row {i + 2}: unknown value {err}") from None
            match = re.search(r"silicon_concurrency=(\d+)", row["silicon_data_source"])
            batch = int(match.group(1)) if match else _int(row["batch_size"])
            cols["model"].append(model)
            cols["system"].append(system)
            cols["tp"].append(_int(row["tp_size"]))
            cols["pp"].append(_int(row["pp_size"]))
            cols["dp"].append(_int(row["attention_dp_size"]))
            cols["ep"].append(_int(row["moe_ep_size"]))
            cols["precision"].append(precision)
            cols["batch"].append(batch)
            cols["isl"].append(_int(row["isl"]))
            cols["osl"].append(_int(row["osl"]))
            cols["backend"].append(row["backend"])
            cols["tpot"].append(float(row["silicon_tpot_ms"]) / 1e3)
            cols["ttft"].append(float(row["silicon_ttft_ms"]) / 1e3)
    configs = make_configs(
        catalog,
        model=cols["model"],
        system=cols["system"],
        tp=cols["tp"],
        pp=cols["pp"],
        dp=cols["dp"],
        ep=cols["ep"],
        precision=cols["precision"],
        batch=cols["batch"],
        isl=cols["isl"],
        osl=cols["osl"],
    )
    tpot = np.asarray(cols["tpot"])
    ttft = np.asarray(cols["ttft"])
    gpus = configs.tp * configs.dp * configs.pp
    tput = configs.batch * configs.osl / (ttft + configs.osl * tpot) / gpus
    return MeasuredRuns(
        configs=configs,
        model_ids=tuple(cols["model"]),
        system_ids=tuple(cols["system"]),
        backend=tuple(cols["backend"]),
        tpot_s=tpot,
        ttft_s=ttft,
        tokens_per_s_per_gpu=tput,
    )
