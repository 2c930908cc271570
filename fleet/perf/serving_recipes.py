"""What an InferenceX run's server was told beyond the deployment its log row records, read from
the benchmark's recipes (SemiAnalysisAI/InferenceX, the scripts under ``benchmarks/``): the scorer
(``fleet.perf.measured``) estimates each run the way it was served.

How often the server's scheduler polls for new requests (``recv_interval``; ``Run.recv_interval``,
``Configs.recv_interval``): 1 (every decode step, every engine's default) unless the row is an
aggregated SGLang run of InferenceX whose recipe sets ``--scheduler-recv-interval``. The logs do
not record the flag; the recipes do, per model, precision, GPU, tensor-parallel width and
concurrency (``SGLANG_RECV_RULES``, read from SemiAnalysisAI/InferenceX
``benchmarks/single_node/<recipe>.sh`` at commit 5632483, the revision whose
``.github/configs/nvidia-master.yaml`` names the images of the rows' months; the older
``benchmarks/<recipe>.sh`` layout, commit 1fc5d73c, has the same DeepSeek-R1 rules). Where a
recipe's revisions differ, the rule is the one of the revision that ran the row's image
(Qwen3.5 FP8 on B200: the v0.5.9 rows ran the revision with 30 from 16 users, commits 3e2ebc03
and 01fa35cf; later revisions switch above 4 users). Recipes that pass no interval (DeepSeek-R1
FP8 on H200, GLM-5 FP8 on B200 / B300 / H200, Qwen3.5 FP8 on H200) and runs with
data-parallel attention (the DeepSeek-R1 FP4 recipe then passes 1) poll every step.

Whether the run drafted tokens with the model's MTP module (``mtp_draft``): InferenceX keeps its
MTP recipes under their own workflow keys, and from early February to 2026-05-18 its TensorRT-LLM
DeepSeek-R1 keys on B200 ran their MTP variants on their own image: ``dsr1-fp8-b200-trt`` and
``dsr1-fp4-b200-trt`` on ``release:1.2.0rc6.post2``, ``dsr1-fp8-b200-trt-mtp`` and
``dsr1-fp4-b200-trt-mtp`` on ``release:1.2.0rc6.post3`` (``.github/configs/nvidia-master.yaml``
at commit 48f302cc; its PRs #1488 and #1489 of 2026-05-18 retire "off: v1.2.0rc6.post2 / mtp:
v1.2.0rc6.post3"). Those MTP recipes (``benchmarks/dsr1_fp8_b200_trt_mtp.sh``,
``dsr1_fp4_b200_trt_mtp.sh``) draft 3 tokens (``num_nextn_predict_layers: 3``), 1 with
data-parallel attention. A row of that image is an MTP run; the logs say nothing else of it.

Whether the server held new prompts to batch their prefills (``trtllm_hold``; ``Run.ctx_hold``,
``fleet.perf.closed_loop.ctx_hold_steps``): InferenceX's aggregated TensorRT-LLM recipes write it
into their ``--extra_llm_api_options`` (``benchmarks/dsr1_fp8_b200_trt.sh`` at commit 0a919c5f,
``dsr1_fp4_b200_trt.sh``, ``dsr1_fp8_h200_trt.sh`` and their ``_mtp`` variants,
``gptoss_fp4_b200_trt.sh``, ``70b_fp8_b200_trt_slurm.sh`` and ``70b_fp4_b200_trt_docker.sh``):
- DeepSeek-R1 with data-parallel attention: ``attention_dp_config: {enable_balance: true,
  timeout_iters: 60, batching_wait_iters: 0}``; gpt-oss-120b on B200 with it: ``enable_balance``
  at TensorRT-LLM's defaults (``timeout_iters`` 50; its ``batching_wait_iters`` 10 is not
  charged). TensorRT-LLM (``py_executor._balance_adp_requests``) holds new prompts until every
  attention rank has one, releasing them when its counter reaches the timeout (the counter ticks
  whenever some rank lacks a prompt: a free-running clock) or when a rank has no generation
  request (taken as fewer than two users per rank: then nothing is held). Arrivals land on the
  ranks whose requests finished, so covering the other ranks takes dp (1 + 1/2 + ... +
  1/(dp - 1)) arrivals (the coupon collector's).
- DeepSeek-R1 FP8 on B200 without it, at 1k/1k and 64 to 255 users: ``batch_wait_timeout_iters:
  40``, ``batch_wait_max_tokens_ratio: 0.8`` of ``max_num_tokens`` = max(8192, (users + isl +
  127) // 64 x 64); Llama 3.1 70B on B200 at 1k/1k below tp 8: 20 and 0.9 of 16,384.
  TensorRT-LLM (``py_executor._waiting_requests``) holds the prompts while their tokens plus one
  per generating request are below that share, for at most the timeout counted from the first.

Which MoE kernel a TensorRT-LLM run chose (``trtllm_moe_backend``): the DeepSeek-R1 FP8 B200
recipe (``benchmarks/dsr1_fp8_b200_trt.sh`` at commit 0a919c5f, and the later ``single_node``
revisions) sets ``moe_config: backend: TRTLLM`` (TensorRT-LLM's TRTLLM-Gen kernels) and
``DEEPGEMM`` only at 1k/1k and 1k/8k from 256 users; its oldest revisions always ran DEEPGEMM.
The revision that chooses is taken to be the one of the ``release:1.2.0rc6.post2`` image, the
image that key ran from PR #594 (2026-01-28) to 2026-05-18; rows of earlier images keep
DEEPGEMM. The block-scaled FP8 MoE rows of TensorRT-LLM's B200 tables are DeepGEMM's, with their
fixed time per expert held (``fleet.perf.kernel_moe_grid``); the TRTLLM-Gen kernels those tables
time (NVFP4, MXFP4) pay no such term, so a run on that backend is charged none
(``Configs.moe_held_expert_time``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from fleet.perf.protocol import INFERENCEX_MARKERS


@dataclass(frozen=True, slots=True)
class RecvRule:
    """An InferenceX SGLang recipe's ``--scheduler-recv-interval``: ``high`` from ``from_users``
    concurrent users on, ``low`` below; ``tp4`` instead at tensor-parallel width 4 where the
    recipe sets its own."""

    low: int
    high: int
    from_users: int
    tp4: int | None = None


_DEEPSEEK_FP8 = RecvRule(low=10, high=30, from_users=16, tp4=10)
_FROM_16 = RecvRule(low=10, high=30, from_users=16)
_FIXED_10 = RecvRule(low=10, high=10, from_users=1)
_DEEPSEEK = ("deepseek-r1", "deepseek-v3")
"""InferenceX's DeepSeek recipes (dsr1_*) serve DeepSeek-R1; aiconfigurator-core's export of its
database labels those runs (ids ``dsr1_...``) DeepSeek-V3."""
SGLANG_RECV_RULES: dict[tuple[str, str, str], RecvRule] = {
    # (catalog model, weight precision, accelerator): the recipe's rule (module docstring).
    # dsr1_fp8_b200.sh / dsr1_fp8_b300.sh: tp 8 -> 30 at >= 16 users, else 10; tp 4 -> 10.
    **{(m, "fp8", a): _DEEPSEEK_FP8 for m in _DEEPSEEK for a in ("b200", "b300")},
    # dsr1_fp4_b200.sh / dsr1_fp4_b300.sh: 30 at >= 16 users, else 10 (1 with dp attention).
    **{(m, "fp4", a): _FROM_16 for m in _DEEPSEEK for a in ("b200", "b300")},
    # glm5_fp4_b200.sh: 10 always.
    ("glm-5", "fp4", "b200"): _FIXED_10,
    # qwen3.5_bf16_b200.sh, qwen3.5_bf16_b300.sh, qwen3.5_fp4_b300.sh: 30 at >= 16 users, else 10.
    ("qwen3.5-397b-a17b", "bf16", "b200"): _FROM_16,
    ("qwen3.5-397b-a17b", "bf16", "b300"): _FROM_16,
    ("qwen3.5-397b-a17b", "fp4", "b300"): _FROM_16,
    # qwen3.5_fp8_b200.sh at the v0.5.9 image (commits 3e2ebc03, 01fa35cf): 30 at >= 16 users.
    ("qwen3.5-397b-a17b", "fp8", "b200"): _FROM_16,
    # qwen3.5_fp4_b200.sh (commit 5632483): 30 above 4 users, else 10.
    ("qwen3.5-397b-a17b", "fp4", "b200"): RecvRule(low=10, high=30, from_users=5),
    # qwen3.5_fp8_b300.sh: 10 always.
    ("qwen3.5-397b-a17b", "fp8", "b300"): _FIXED_10,
}
"""InferenceX's aggregated SGLang recipes that set ``--scheduler-recv-interval``."""


@dataclass(frozen=True, slots=True)
class Deployment:
    """What a log row says its run served, as the recipe rules read it."""

    model: str
    """Catalog model id."""
    precision: str
    accelerator: str
    tp: int
    dp: int
    users: int
    isl: int
    """The prompts' mean length."""
    logged_lengths: tuple[int, int]
    """The benchmark's nominal prompt and output lengths, as logged."""


def inferencex_aggregated(row: Mapping[str, str], backend: str) -> bool:
    """The row is an aggregated run of InferenceX's on ``backend``."""
    source = row.get("silicon_data_source") or ""
    engine, mode = (row.get("backend") or "").strip(), (row.get("mode") or "agg").strip()
    return engine == backend and mode == "agg" and any(m in source for m in INFERENCEX_MARKERS)


def recv_interval(row: Mapping[str, str], run: Deployment) -> int:
    """Decode steps between the scheduler's polls for new requests in the row's run (module
    docstring): its InferenceX SGLang recipe's rule for an aggregated run, else 1."""
    if not inferencex_aggregated(row, "sglang") or run.dp > 1:
        return 1
    rule = SGLANG_RECV_RULES.get((run.model, run.precision, run.accelerator))
    if rule is None:
        return 1
    if run.tp == 4 and rule.tp4 is not None:
        return rule.tp4
    return rule.high if run.users >= rule.from_users else rule.low


MTP_IMAGES: dict[tuple[str, str], str] = {
    ("trtllm", "b200"): "tensorrt-llm/release:1.2.0rc6.post3",
}
"""(engine, accelerator) -> the image only InferenceX's MTP recipes of DeepSeek-R1 ran there."""
MTP_DRAFT_TOKENS = 3
"""Draft tokens of those recipes; 1 with data-parallel attention (module docstring)."""


def ran_image(row: Mapping[str, str], image: str) -> bool:
    """The row's run names ``image`` (its source writes the registry's "/" as "#" or "/")."""
    return image in (row.get("silicon_data_source") or "").replace("#", "/")


def mtp_draft(row: Mapping[str, str], run: Deployment) -> int:
    """Draft tokens of the MTP module the row's run ran (module docstring); 0: none."""
    backend = (row.get("backend") or "").strip()
    image = MTP_IMAGES.get((backend, run.accelerator))
    if run.model not in _DEEPSEEK or image is None or not inferencex_aggregated(row, backend):
        return 0
    if not ran_image(row, image):
        return 0
    return 1 if run.dp > 1 else MTP_DRAFT_TOKENS


@dataclass(frozen=True, slots=True)
class Hold:
    """How a run's scheduler held new prompts (``fleet.perf.closed_loop.ctx_hold_steps``)."""

    more: float = 0.0
    """Further arrivals that release a held batch; 0: nothing is held."""
    timeout: int = 0
    periodic: bool = False


NO_HOLD = Hold()
ADP_TIMEOUT = {"deepseek": 60, "gpt-oss-120b": 50}
"""``timeout_iters`` of the recipes' attention-DP balance (module docstring)."""


def _cover(ranks: int) -> float:
    """Expected arrivals until every one of ``ranks`` has one, one rank covered already."""
    return float(ranks * sum(1.0 / k for k in range(1, ranks)))


def _batch_wait(users: int, isl: int, budget: float, share: float, timeout: int) -> Hold:
    need = share * budget - users  # the generating requests count a token each
    return Hold(more=max(math.ceil(need / isl) - 1, 0), timeout=timeout)


def trtllm_hold(row: Mapping[str, str], run: Deployment) -> Hold:
    """How the row's aggregated TensorRT-LLM run held new prompts (module docstring)."""
    if not inferencex_aggregated(row, "trtllm"):
        return NO_HOLD
    family = "deepseek" if run.model in _DEEPSEEK else run.model
    if run.dp > 1:
        timeout = ADP_TIMEOUT.get(family)
        if timeout is None or (family == "gpt-oss-120b" and run.accelerator != "b200"):
            return NO_HOLD
        if run.users < 2 * run.dp:
            return NO_HOLD
        return Hold(more=_cover(run.dp), timeout=timeout, periodic=True)
    if run.logged_lengths != (1024, 1024) or run.accelerator != "b200":
        return NO_HOLD
    if family == "deepseek" and run.precision == "fp8" and 64 <= run.users < 256:
        budget = max(8192, (run.users + 1024 + 127) // 64 * 64)
        return _batch_wait(run.users, run.isl, budget, 0.8, 40)
    if run.model == "llama-3.1-70b" and run.tp < 8:
        return _batch_wait(run.users, run.isl, 16384, 0.9, 20)
    return NO_HOLD


MOE_BACKEND_IMAGE = "tensorrt-llm/release:1.2.0rc6.post2"
"""The image of the DeepSeek-R1 FP8 B200 recipe revision that chooses its MoE backend."""


def trtllm_moe_backend(row: Mapping[str, str], run: Deployment) -> str:
    """The MoE backend the row's aggregated TensorRT-LLM run chose (module docstring); "" where
    no recipe says."""
    if not inferencex_aggregated(row, "trtllm") or run.model not in _DEEPSEEK:
        return ""
    if run.precision != "fp8" or run.accelerator != "b200" or not ran_image(row, MOE_BACKEND_IMAGE):
        return ""
    deepgemm = run.logged_lengths in ((1024, 1024), (1024, 8192)) and run.users >= 256
    return "DEEPGEMM" if deepgemm else "TRTLLM"


WITHOUT_HELD_EXPERT_TIME = frozenset({"TRTLLM"})
"""MoE backends whose block-scaled FP8 kernel pays no time per expert held (module docstring)."""


def pays_held_expert_time(backend: str) -> bool:
    """Whether a run on ``backend`` ("" = unknown: the tables' kernel) pays the block-scaled FP8
    MoE kernel's time per expert held (``Configs.moe_held_expert_time``)."""
    return backend not in WITHOUT_HELD_EXPERT_TIME
