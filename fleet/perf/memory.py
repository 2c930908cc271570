"""Memory per device: weights per shard, KV cache, workspace, and the largest batch that fits.

Conventions (docs/performance-model.md):
- A replica has pp pipeline stages of tp x dp devices, balanced by bytes: each holds layers / pp
  of the layers and of the embedding tables (deployments split unevenly dividing layers so).
- Attention, dense FFNs, shared experts and routers are split by tp and replicated over the dp
  attention ranks; routed experts are split over all tp x dp devices of the stage (ep groups of
  experts, each expert tensor-parallel over tp x dp / ep devices: same bytes per device).
- Embedding and LM head stay in BF16, split by tp (and spread over the stages with the layers).
  4-bit weight formats on an MoE model store only the routed experts at 4 bits; the caller
  passes the non-expert bytes per parameter (``fleet.catalog.FOUR_BIT``).
- KV cache: every stream of the replica keeps isl + osl (+ draft) tokens in each of its stage's
  layers, on its dp rank only. GQA splits KV heads over tp (replicated once tp exceeds them); MLA's
  latent is replicated on every tp rank. Sliding-window layers hold at most the window.
- Workspace: on HBM a fixed reserve (runtime, CUDA graphs, communication buffers) of
  ``HBM_RESERVED_FRACTION`` of memory plus activations of one prefill chunk and of every stream in
  flight; SRAM parts have no runtime reserve and no prefill chunk buffer.
- Usable memory is ``USABLE_FRACTION`` of the device (what serving engines let themselves use).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.perf.types import FloatArray

USABLE_FRACTION = 0.9
"""vLLM's default gpu_memory_utilization, of the memory the device reports (the catalog's
``memory_gb``); the rest is left to the driver and fragmentation."""
HBM_RESERVED_FRACTION = 0.03
"""Runtime, CUDA graphs and NCCL buffers: ~2.6 GB on an H100 (85.52 GB reported)."""
PREFILL_CHUNK_TOKENS = 2048
"""Chunked-prefill tokens per step whose activations are resident (vLLM/TRT-LLM scale)."""
ACTIVATION_BUFFERS = 8.0
"""Hidden-sized BF16 buffers per token in flight (residual, norms, q/k/v, attention out, FFN)."""
EMBEDDING_BYTES = 2.0


@dataclass(frozen=True, slots=True)
class MemoryTerms:
    weight_bytes: FloatArray
    kv_bytes_per_stream: FloatArray
    """KV bytes one stream holds on one device (all its stage's layers)."""
    kv_bytes: FloatArray
    workspace_bytes: FloatArray
    total_bytes: FloatArray
    usable_bytes: FloatArray
    max_batch: FloatArray


def weight_bytes_per_device(
    *,
    weight_bytes_per_param: FloatArray,
    replicated_bytes_per_param: FloatArray,
    replicated_params: FloatArray,
    expert_params: FloatArray,
    embedding_params: FloatArray,
    lm_head_params: FloatArray,
    tied: FloatArray,
    stage_fraction: FloatArray,
    tp: FloatArray,
    devices_per_stage: FloatArray,
    pp: FloatArray,
) -> FloatArray:
    """Bytes of weights per device (stages balanced by bytes); routed experts at
    ``weight_bytes_per_param``, the other linear weights at ``replicated_bytes_per_param``."""
    linear = stage_fraction * (
        replicated_bytes_per_param * replicated_params / tp
        + weight_bytes_per_param * expert_params / devices_per_stage
    )
    tables = embedding_params + lm_head_params * (1.0 - tied)
    return linear + EMBEDDING_BYTES * tables / (tp * pp)


def memory_terms(
    *,
    weight_bytes: FloatArray,
    kv_bytes_per_stream: FloatArray,
    batch: FloatArray,
    dp: FloatArray,
    tp: FloatArray,
    isl: FloatArray,
    hidden_size: FloatArray,
    vocab_size: FloatArray,
    memory_bytes: FloatArray,
    is_sram: FloatArray,
    kv_of_free_memory: FloatArray | float = 0.0,
) -> MemoryTerms:
    """KV and workspace for ``batch`` streams, totals, and the largest batch that fits.

    Usable memory is ``USABLE_FRACTION`` of the device's (vLLM's rule: the KV pool is what that
    leaves after weights and workspace); where ``kv_of_free_memory`` is 1 the KV pool is instead
    ``USABLE_FRACTION`` of what the weights and workspace leave free (TensorRT-LLM's rule), so
    usable memory is that pool plus the weights and workspace.
    """
    streams = np.ceil(batch / dp)
    reserve = np.where(is_sram > 0, 0.0, HBM_RESERVED_FRACTION * memory_bytes)
    chunk = np.where(is_sram > 0, 0.0, np.minimum(isl, PREFILL_CHUNK_TOKENS))
    per_token_activation = ACTIVATION_BUFFERS * hidden_size * 2.0
    per_stream = per_token_activation + 4.0 * vocab_size / tp  # + FP32 logits row
    fixed_ws = reserve + chunk * per_token_activation
    kv = kv_bytes_per_stream * streams
    workspace = fixed_ws + per_stream * streams
    total = weight_bytes + kv + workspace
    of_free = np.where(is_sram > 0, 0.0, kv_of_free_memory)
    usable = USABLE_FRACTION * memory_bytes + of_free * (1.0 - USABLE_FRACTION) * (
        weight_bytes + fixed_ws
    )
    room = usable - weight_bytes - fixed_ws
    max_streams = np.floor(np.maximum(room, 0.0) / (kv_bytes_per_stream + per_stream))
    return MemoryTerms(
        weight_bytes=weight_bytes,
        kv_bytes_per_stream=kv_bytes_per_stream,
        kv_bytes=kv,
        workspace_bytes=workspace,
        total_bytes=total,
        usable_bytes=usable,
        max_batch=max_streams * dp,
    )


def kv_tokens_held(
    context: FloatArray, full_layers: FloatArray, sliding_layers: FloatArray, window: FloatArray
) -> FloatArray:
    """Layer-tokens of KV one stream holds (or reads) at ``context`` tokens."""
    return full_layers * context + sliding_layers * np.minimum(context, window)
