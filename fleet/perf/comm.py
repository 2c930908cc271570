"""Collective communication per pipeline-stage step: latency (alpha) + bytes / bandwidth (beta).

- All-reduce over n devices (ring/tree): each device moves 2 (n-1)/n of the message, plus
  2 log2(n) latency hops (reduce-scatter then all-gather), plus a fixed cost per collective call
  (launch and synchronisation; the accelerator's fitted ``collective_overhead_us``).
- Tensor parallel: two all-reduces per layer of the activations of the tokens in the step
  (after attention, after the FFN).
- Data-parallel attention (dp > 1): attention outputs are all-reduced within tp; the FFN of every
  layer runs over all tp x dp devices of the stage, so the tokens of all dp ranks are gathered and
  the partial outputs scattered back: the cost of an all-reduce over tp x dp of the whole step.
- Expert parallel (ep > 1): MoE layers dispatch each token to its k experts and combine the
  results: two all-to-alls moving (ep-1)/ep of tokens x k x hidden bytes per device, two latency
  hops; the tp x dp / ep devices sharing an expert group reduce their partial sums.
- Pipeline stages pass the residual stream (tokens x hidden x 2 bytes) to the next stage: over the
  scale-up fabric when the whole replica sits in one scale-up domain of one system, else over the
  system's scale-out network.
Activations cross links in BF16.
"""

from __future__ import annotations

import numpy as np

from fleet.perf.types import FloatArray

ACTIVATION_BYTES = 2.0


def all_reduce_s(
    n: FloatArray,
    message_bytes: FloatArray,
    link_bytes_per_s: FloatArray,
    hop_s: FloatArray,
    call_s: FloatArray,
) -> FloatArray:
    """Time of one all-reduce over ``n`` devices (0 when n == 1)."""
    n_safe = np.maximum(n, 1.0)
    t = 2.0 * (n_safe - 1.0) / n_safe * message_bytes / link_bytes_per_s
    t = t + 2.0 * np.log2(n_safe) * hop_s + call_s
    return np.where(n_safe > 1.0, t, 0.0)


def stage_comm_s(
    *,
    tokens: FloatArray,
    tp: FloatArray,
    dp: FloatArray,
    ep: FloatArray,
    hidden_size: FloatArray,
    experts_per_token: FloatArray,
    dense_layers: FloatArray,
    moe_layers: FloatArray,
    link_bytes_per_s: FloatArray,
    hop_s: FloatArray,
    call_s: FloatArray,
) -> FloatArray:
    """Communication of one stage step carrying ``tokens`` tokens (all dp ranks together).

    ``dense_layers`` and ``moe_layers`` are the stage's layers of each kind (may be fractional).
    """
    n = tp * dp
    layers = dense_layers + moe_layers
    act = tokens * hidden_size * ACTIVATION_BYTES
    # Attention output: all-reduce within each tp group over that rank's share of the tokens.
    attention = layers * all_reduce_s(tp, act / dp, link_bytes_per_s, hop_s, call_s)
    # Dense FFN (and MoE without ep): over all tp x dp devices of the stage.
    ffn_dense = all_reduce_s(n, act, link_bytes_per_s, hop_s, call_s)
    # MoE with ep > 1: dispatch + combine all-to-all, then a reduce inside each expert group.
    ep_safe = np.maximum(ep, 1.0)
    routed = act * experts_per_token
    a2a = 2.0 * (routed / n) * (ep_safe - 1.0) / ep_safe / link_bytes_per_s + 2.0 * (hop_s + call_s)
    group = n / ep_safe
    moe_ep = a2a + all_reduce_s(group, routed / ep_safe, link_bytes_per_s, hop_s, call_s)
    moe = np.where(ep_safe > 1.0, moe_ep, ffn_dense)
    return attention + dense_layers * ffn_dense + moe_layers * moe


def pipeline_hop_s(
    *,
    tokens: FloatArray,
    hidden_size: FloatArray,
    link_bytes_per_s: FloatArray,
    latency_s: FloatArray,
) -> FloatArray:
    """One stage-to-stage transfer of the residual stream of ``tokens`` tokens."""
    return tokens * hidden_size * ACTIVATION_BYTES / link_bytes_per_s + latency_s
