"""Measured serving runs (serving-benchmark logs in aiconfigurator-core's silicon format) as
``Configs`` + observations.

The data: end-to-end serving measurements, one row = one deployment at a fixed concurrency with
its measured TTFT and TPOT, in the column format of ``systems/silicon_sample.csv`` of the
Apache-2.0 package aiconfigurator-core 0.12.0 (NVIDIA). The calibration reads its H100/H200
aggregated rows, kept as ``shared/reference/measured_calibration.csv`` beside the repo
(``load_measured``, strict: every row must map); ``read_log`` reads any log of that format and
says, row by row, why a row has no configuration (``fleet.perf.score`` scores the rest).

Column mapping (``parse_row``):
- model: ``model_path`` through ``Catalog.model_named`` (catalog id, ``hf_repo`` or one of the
  model's ``aliases``: quantized re-releases share the architecture); system: ``system`` through
  ``Catalog.system_named`` (aiconfigurator's ``h100_sxm``, ``b200_sxm``, ``gb200`` ...);
- layout: tp = ``tp_size``; dp = ``attention_dp_size`` (empty/0 -> 1); pp = ``pp_size``;
  ep = ``moe_ep_size`` (empty/0 -> 1; ``moe_tp_size`` = tp x dp / ep is implied by our convention);
  GPUs per replica = tp x dp x pp;
- concurrency = the ``silicon_concurrency=N`` inside ``silicon_data_source``, else ``batch_size``
  x the attention-DP ranks (``batch_size`` is per rank with attention DP);
- weight precision: ``QUANT_PRECISIONS`` of ``moe_quant_mode`` on an MoE model (the experts' format,
  which the catalog's precision of an MoE variant means), else of ``gemm_quant_mode``: fp8 /
  fp8_block -> fp8, nvfp4 / mxfp4 (and their weight-only modes) -> fp4, int4 weight-only and
  w4afp8 -> int4, int8 weight-only and SmoothQuant -> int8, empty / bfloat16 -> bf16; the KV cache
  precision is not recorded, so it takes ``default_kv_precision`` (FP8 with FP8/FP4 weights);
- ``mode`` = ``disagg`` rows: the same per-worker columns with ``prefill_`` / ``decode_`` prefixes
  and ``prefill_num_workers`` / ``decode_num_workers`` (``DisaggRun``). Both counts are required:
  without them the row names no deployment (how many GPUs, how many streams each decode worker
  holds), so it is not scored and is counted under that reason rather than read as one worker
  of each kind;
- the benchmark's lengths: fixed, or drawn from a range (``fleet.perf.protocol.range_ratio``),
  then isl and osl are the range's means (the logged ones are kept as ``logged_isl`` /
  ``logged_osl``, the run series' keys);
- observations: TPOT = ``silicon_tpot_ms``; tokens/s per GPU = concurrency x osl /
  (ttft_s + osl x tpot_s) / GPUs (closed loop), from the measured TTFT and TPOT.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import Catalog
from fleet.errors import InputError
from fleet.perf.configs import make_configs
from fleet.perf.protocol import mean_length, range_ratio
from fleet.perf.serving_recipes import (
    NO_HOLD,
    Deployment,
    Hold,
    mtp_draft,
    pays_held_expert_time,
    recv_interval,
    trtllm_hold,
    trtllm_moe_backend,
)
from fleet.perf.types import Configs, FloatArray, IntArray

QUANT_PRECISIONS = {
    "": "bf16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "bf16",
    "float16": "bf16",
    "fp8": "fp8",
    "fp8_block": "fp8",
    "fp8_static": "fp8",
    "fp8_ootb": "fp8",
    "nvfp4": "fp4",
    "nvfp4_wo": "fp4",
    "w4a16_nvfp4": "fp4",
    "mxfp4": "fp4",
    "w4a16_mxfp4": "fp4",
    "w4a16_mxfp4_cutlass": "fp4",
    "w4a8_mxfp4_mxfp8": "fp4",
    "w4a8_mxfp4_mxfp8_trtllm": "fp4",
    "int4_wo": "int4",
    "w4a16": "int4",
    "w4afp8": "int4",
    "int8_wo": "int8",
    "sq": "int8",
}
"""aiconfigurator-core's quantization modes (the GEMM and MoE mode enums of its 0.12.0 SDK,
``sdk/common.py``) -> catalog weight precisions. The catalog's precision is the weights' storage
format; whether the math runs at it or dequantizes to BF16 is the accelerator's (its native and
weight-only precisions): NVFP4 / MXFP4 weight-only modes (``nvfp4_wo``, ``w4a16_*``) are 4-bit
floats, ``w4afp8`` (DeepSeek's INT4 experts with FP8 activations) 4-bit integers, ``sq``
(SmoothQuant W8A8) 8-bit integers."""
CSV_NAME = "measured_calibration.csv"


@dataclass(frozen=True, slots=True)
class Worker:
    """One replica layout of a row: tp, pp, attention-DP ranks, expert-parallel degree."""

    tp: int
    pp: int
    dp: int
    ep: int

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.pp


@dataclass(frozen=True, slots=True)
class Run:
    """One parsed row. Aggregated: ``worker`` serves all ``concurrency`` users. Disaggregated:
    ``decode_workers`` replicas of ``worker`` decode, fed by ``prefill_workers`` of ``prefill``."""

    line: int
    """The row's line in the file (the header is line 1)."""
    model: str
    system: str
    backend: str
    precision: str
    worker: Worker
    concurrency: int
    isl: int
    """Mean prompt tokens of the benchmark's requests (``logged_isl`` with fixed lengths)."""
    osl: int
    """Mean output tokens likewise."""
    tpot_s: float
    ttft_s: float
    prefill: Worker | None = None
    prefill_workers: int = 0
    decode_workers: int = 1
    logged_isl: int = 0
    """The row's ``isl`` as logged (the benchmark's nominal length); 0 = ``isl``."""
    logged_osl: int = 0
    lengths_vary: bool = False
    """The benchmark drew its lengths from a range (``fleet.perf.protocol``)."""
    recv_interval: int = 1
    """The server's scheduler polled for new requests every this many decode steps
    (``fleet.perf.serving_recipes.recv_interval``)."""
    spec_draft_tokens: int = 0
    """Tokens the model's MTP module drafted per step (``fleet.perf.serving_recipes.mtp_draft``)."""
    spec_acceptance: float = 0.0
    """The catalog's published acceptance of that draft."""
    ctx_hold: Hold = NO_HOLD
    """How the server held new prompts to batch them (``serving_recipes.trtllm_hold``)."""
    moe_backend: str = ""
    """The MoE kernel the run chose, where its recipe says (``trtllm_moe_backend``)."""

    @property
    def gpus(self) -> int:
        spare = self.prefill.gpus * self.prefill_workers if self.prefill is not None else 0
        return self.worker.gpus * self.decode_workers + spare

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens/s per GPU of the closed loop, from the measured TTFT and TPOT."""
        return self.concurrency * self.osl / (self.ttft_s + self.osl * self.tpot_s) / self.gpus


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
    logged_lengths: IntArray
    """(rows, 2): each row's isl and osl as logged (``configs`` carries the mean lengths the
    benchmark ran); run series are keyed by these."""

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
            logged_lengths=self.logged_lengths[rows],
        )


@dataclass(frozen=True, slots=True)
class RunLog:
    """A whole log: the aggregated rows as ``MeasuredRuns``, the disaggregated rows as parsed,
    and every other row's reason."""

    rows: int
    aggregated: MeasuredRuns
    aggregated_lines: IntArray
    disaggregated: tuple[Run, ...]
    skipped: tuple[tuple[int, str], ...]
    """(line, reason) of rows that name no configuration of the catalog."""


def reference_csv(repo_root: Path) -> Path:
    """Where the measurements live: ``<repo>/../shared/reference/measured_calibration.csv``."""
    return repo_root.parent / "shared" / "reference" / CSV_NAME


WORKER_COUNTS = ("prefill_num_workers", "decode_num_workers")
"""A disaggregated row's worker counts: required (``parse_row``)."""


def _int(text: str | None, default: int = 1) -> int:
    text = (text or "").strip()
    if not text:
        return default
    value = int(float(text))
    return value if value > 0 else default


def _worker(row: Mapping[str, str], prefix: str = "") -> Worker:
    return Worker(
        tp=_int(row.get(f"{prefix}tp_size")),
        pp=_int(row.get(f"{prefix}pp_size")),
        dp=_int(row.get(f"{prefix}attention_dp_size")),
        ep=_int(row.get(f"{prefix}moe_ep_size")),
    )


def parse_row(catalog: Catalog, row: Mapping[str, str], line: int) -> Run | str:
    """The row's deployment, or the one-line reason it names none of the catalog."""
    try:
        model = catalog.model_named((row.get("model_path") or "").strip())
        system = catalog.system_named((row.get("system") or "").strip())
    except InputError as err:
        return str(err).split(";")[0]
    quant_column = "moe_quant_mode" if model.moe is not None else "gemm_quant_mode"
    quant = (row.get(quant_column) or row.get("gemm_quant_mode") or "").strip()
    if quant not in QUANT_PRECISIONS:
        return f"unknown quantization {quant!r} ({quant_column})"
    mode = (row.get("mode") or "agg").strip()
    if mode not in ("agg", "disagg"):
        return f"unknown serving mode {mode!r} (mode)"
    try:
        match = re.search(r"silicon_concurrency=(\d+)", row.get("silicon_data_source") or "")
        if mode == "disagg":
            missing = [c for c in WORKER_COUNTS if not (row.get(c) or "").strip()]
            if missing:
                return (
                    f"disaggregated row without {' and '.join(missing)}: its deployment "
                    "(workers, GPUs, streams per decode worker) is not recorded"
                )
            worker, prefill = _worker(row, "decode_"), _worker(row, "prefill_")
            decode_workers = _int(row.get("decode_num_workers"))
            prefill_workers = _int(row.get("prefill_num_workers"))
            per_rank = _int(row.get("decode_batch_size")) * decode_workers
        else:
            worker, prefill, decode_workers, prefill_workers = _worker(row), None, 1, 0
            per_rank = _int(row.get("batch_size"))
        concurrency = int(match.group(1)) if match else per_rank * worker.dp
        tpot_s = float(row["silicon_tpot_ms"]) / 1e3
        ttft_s = float(row["silicon_ttft_ms"]) / 1e3
        isl, osl = _int(row.get("isl"), 0), _int(row.get("osl"), 0)
    except (KeyError, ValueError) as err:
        return f"unreadable number or missing column: {err}"
    if not (tpot_s > 0 and ttft_s > 0 and isl > 0 and osl > 0):
        return "silicon_tpot_ms, silicon_ttft_ms, isl and osl must be positive"
    try:
        ratio = range_ratio(row)
    except ValueError as err:
        return f"benchmark lengths: {err}"
    deployment = Deployment(
        model=model.id,
        precision=QUANT_PRECISIONS[quant],
        accelerator=system.accelerator,
        tp=worker.tp,
        dp=worker.dp,
        users=concurrency,
        isl=mean_length(isl, ratio),
        logged_lengths=(isl, osl),
    )
    draft = mtp_draft(row, deployment)
    if draft and (model.mtp_acceptance is None or draft != model.mtp_draft):
        return (
            f"MTP draft of {draft} tokens: the run is its benchmark's MTP recipe (its image says "
            f"so, fleet.perf.serving_recipes), and no acceptance is published for {model.id} "
            f"drafting {draft} tokens with its {model.mtp_layers} MTP module(s)"
        )
    return Run(
        line=line,
        model=model.id,
        system=system.id,
        backend=(row.get("backend") or "").strip(),
        precision=QUANT_PRECISIONS[quant],
        worker=worker,
        concurrency=concurrency,
        isl=deployment.isl,
        osl=mean_length(osl, ratio),
        tpot_s=tpot_s,
        ttft_s=ttft_s,
        prefill=prefill,
        prefill_workers=prefill_workers,
        decode_workers=decode_workers,
        logged_isl=isl,
        logged_osl=osl,
        lengths_vary=ratio < 1.0,
        recv_interval=recv_interval(row, deployment),
        spec_draft_tokens=draft,
        spec_acceptance=(model.mtp_acceptance or 0.0) if draft else 0.0,
        ctx_hold=trtllm_hold(row, deployment),
        moe_backend=trtllm_moe_backend(row, deployment),
    )


def aggregated_runs(catalog: Catalog, runs: Sequence[Run]) -> MeasuredRuns:
    """Aggregated ``runs`` as configurations at their concurrency, with the measured figures."""
    configs = make_configs(
        catalog,
        model=[r.model for r in runs],
        system=[r.system for r in runs],
        tp=[r.worker.tp for r in runs],
        pp=[r.worker.pp for r in runs],
        dp=[r.worker.dp for r in runs],
        ep=[r.worker.ep for r in runs],
        precision=[r.precision for r in runs],
        batch=[r.concurrency for r in runs],
        isl=[r.isl for r in runs],
        osl=[r.osl for r in runs],
        lengths_vary=[r.lengths_vary for r in runs],
        recv_interval=[r.recv_interval for r in runs],
        spec_draft_tokens=[r.spec_draft_tokens for r in runs],
        spec_acceptance=[r.spec_acceptance for r in runs],
        ctx_hold_requests=[r.ctx_hold.more for r in runs],
        ctx_hold_iters=[r.ctx_hold.timeout for r in runs],
        ctx_hold_periodic=[r.ctx_hold.periodic for r in runs],
        moe_held_expert_time=[pays_held_expert_time(r.moe_backend) for r in runs],
    )
    return MeasuredRuns(
        configs=configs,
        model_ids=tuple(r.model for r in runs),
        system_ids=tuple(r.system for r in runs),
        backend=tuple(r.backend for r in runs),
        tpot_s=np.asarray([r.tpot_s for r in runs], dtype=float),
        ttft_s=np.asarray([r.ttft_s for r in runs], dtype=float),
        tokens_per_s_per_gpu=np.asarray([r.tokens_per_s_per_gpu for r in runs], dtype=float),
        logged_lengths=np.asarray(
            [(r.logged_isl or r.isl, r.logged_osl or r.osl) for r in runs], dtype=np.int64
        ).reshape(-1, 2),
    )


def read_rows(path: Path, what: str) -> list[dict[str, str]]:
    """Every row of the CSV at ``path`` as a dict; ``what`` names it in a one-line error."""
    if not path.exists():
        raise InputError(f"{what}: {path} does not exist")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except (UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"{what}: {path}: not a readable CSV file: {err}") from None


def load_measured(catalog: Catalog, path: Path) -> MeasuredRuns:
    """Every row of the calibration file, aggregated; a row that does not map is an error."""
    parsed = []
    for i, row in enumerate(read_rows(path, "calibration csv")):
        run = parse_row(catalog, row, i + 2)
        if isinstance(run, str):
            raise InputError(f"calibration csv: row {i + 2}: {run}")
        if run.prefill is not None:
            raise InputError(f"calibration csv: row {i + 2}: a disaggregated run")
        parsed.append(run)
    return aggregated_runs(catalog, parsed)


def read_log(catalog: Catalog, path: Path) -> RunLog:
    """Every row of a serving-benchmark log: aggregated, disaggregated or skipped with a reason."""
    rows = read_rows(path, "serving log")
    agg: list[Run] = []
    disagg: list[Run] = []
    skipped: list[tuple[int, str]] = []
    for i, row in enumerate(rows):
        run = parse_row(catalog, row, i + 2)
        if isinstance(run, str):
            skipped.append((i + 2, run))
        elif run.prefill is None:
            agg.append(run)
        else:
            disagg.append(run)
    return RunLog(
        rows=len(rows),
        aggregated=aggregated_runs(catalog, agg),
        aggregated_lines=np.asarray([r.line for r in agg], dtype=np.int64),
        disaggregated=tuple(disagg),
        skipped=tuple(skipped),
    )
