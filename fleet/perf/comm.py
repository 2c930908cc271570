"""Collective communication per pipeline-stage step: latency (alpha) + bytes / bandwidth (beta).

- All-reduce over n devices (ring/tree): each device moves 2 (n-1)/n of the message, plus
  2 log2(n) latency hops (reduce-scatter then all-gather), plus a fixed cost per collective call
  (launch and synchronisation; the accelerator's fitted ``collective_overhead_us``).
- Tensor parallel: two all-reduces per layer of the activations of the tokens in the step
  (after attention, after the FFN); hybrid models of single-sublayer blocks (Nemotron-H) one per
  block: after each mixer (attention or Mamba2) and after each FFN.
- Attention whose q and k norms span every head (MiniMax-M2's per-layer qk norm) all-reduces
  the norms' statistics too: one more all-reduce per attention layer within tp, of each token's
  q and k variances (two FP32 values, ``NORM_STATS_BYTES``).
- Data-parallel attention (dp > 1): attention outputs are all-reduced within tp; the FFN of every
  layer runs over all tp x dp devices of the stage, so the tokens of all dp ranks are gathered and
  the partial outputs scattered back: the cost of an all-reduce over tp x dp of the whole step.
- Expert parallel (ep > 1): MoE layers dispatch each token to its k experts and combine the
  results: two all-to-alls moving (ep-1)/ep of tokens x k x hidden bytes per device, two latency
  hops; the tp x dp / ep devices sharing an expert group reduce their partial sums. A latent MoE
  (Nemotron 3 Super/Ultra) dispatches and combines in its latent width.
- Across systems (a stage's tp x dp larger than the scale-up domain, ``domain`` devices each):
  collectives are hierarchical. An all-reduce is a reduce-scatter and all-gather inside each
  domain over the scale-up fabric plus an all-reduce of each device's 1/domain shard between the
  domains over its own scale-out NIC (``out_bytes_per_s`` per device, ``out_hop_s`` latency); an
  all-to-all sends the share of its tokens whose experts sit in other domains, (g - 1)/g over g
  domains with uniform routing, over the NIC and the rest over the scale-up fabric. Inside one
  domain (an 8-GPU node, a 72-GPU NVL72 rack) everything stays on the scale-up fabric.
- Pipeline stages pass the residual stream (tokens x hidden x 2 bytes) to the next stage: over the
  scale-up fabric when the whole replica sits in one scale-up domain of one system, else over the
  system's scale-out network.
Activations cross links in BF16.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.perf.types import FloatArray

ACTIVATION_BYTES = 2.0
NORM_STATS_BYTES = 8.0
"""Per token, what a q/k norm spanning every head all-reduces: its q and k variances in FP32."""


@dataclass(frozen=True, slots=True)
class Links:
    """Per-device link figures of a stage (arrays broadcast with the configurations)."""

    up_bytes_per_s: FloatArray
    """Scale-up fabric (NVLink) bandwidth per device, efficiency applied."""
    up_hop_s: FloatArray
    out_bytes_per_s: FloatArray
    """Scale-out NIC bandwidth per device (the system's network over its devices), efficiency
    applied."""
    out_hop_s: FloatArray
    call_s: FloatArray
    """Fixed cost per collective call."""


def all_reduce_s(
    n: FloatArray,
    message_bytes: FloatArray,
    link_bytes_per_s: FloatArray,
    hop_s: FloatArray,
    call_s: FloatArray | float,
) -> FloatArray:
    """Time of one all-reduce over ``n`` devices (0 when n == 1)."""
    n_safe = np.maximum(n, 1.0)
    t = 2.0 * (n_safe - 1.0) / n_safe * message_bytes / link_bytes_per_s
    t = t + 2.0 * np.log2(n_safe) * hop_s + call_s
    return np.where(n_safe > 1.0, t, 0.0)


def hierarchical_all_reduce_s(
    n: FloatArray,
    message_bytes: FloatArray,
    domain: FloatArray,
    link: Links,
) -> FloatArray:
    """All-reduce over ``n`` devices packed into scale-up domains of ``domain`` devices."""
    local = np.minimum(np.maximum(n, 1.0), domain)
    groups = np.ceil(np.maximum(n, 1.0) / local)
    inside = all_reduce_s(local, message_bytes, link.up_bytes_per_s, link.up_hop_s, link.call_s)
    between = all_reduce_s(groups, message_bytes / local, link.out_bytes_per_s, link.out_hop_s, 0.0)
    return inside + between


def all_to_all_s(
    n: FloatArray,
    bytes_per_device: FloatArray,
    domain: FloatArray,
    link: Links,
) -> FloatArray:
    """One all-to-all in which every one of ``n`` devices sends ``bytes_per_device`` to the others
    (destinations spread uniformly over the n devices)."""
    n_safe = np.maximum(n, 1.0)
    groups = np.ceil(n_safe / np.minimum(n_safe, domain))
    remote = (groups - 1.0) / groups
    t = bytes_per_device * ((1.0 - remote) / link.up_bytes_per_s + remote / link.out_bytes_per_s)
    return t + np.where(groups > 1.0, link.out_hop_s, link.up_hop_s) + link.call_s


@dataclass(frozen=True, slots=True)
class _AllReduce:
    """The token-independent parts of ``all_reduce_s`` over fixed ``n`` and links (same
    arithmetic, in the same order, so the result is bit-identical)."""

    coef: FloatArray
    """2 (n-1)/n."""
    latency: FloatArray
    """2 log2(n) x hop."""
    call: FloatArray | float
    link: FloatArray
    active: np.ndarray
    """n > 1."""

    @classmethod
    def of(
        cls, n: FloatArray, link: FloatArray, hop: FloatArray, call: FloatArray | float
    ) -> _AllReduce:
        n_safe = np.maximum(n, 1.0)
        return cls(
            2.0 * (n_safe - 1.0) / n_safe, 2.0 * np.log2(n_safe) * hop, call, link, n_safe > 1.0
        )

    def __call__(self, message_bytes: FloatArray) -> FloatArray:
        t = self.coef * message_bytes / self.link
        t = t + self.latency + self.call
        return np.where(self.active, t, 0.0)


@dataclass(frozen=True, slots=True)
class _Hierarchical:
    """``hierarchical_all_reduce_s`` over fixed ``n``, domain and links."""

    local: FloatArray
    inside: _AllReduce
    between: _AllReduce

    @classmethod
    def of(cls, n: FloatArray, domain: FloatArray, link: Links) -> _Hierarchical:
        local = np.minimum(np.maximum(n, 1.0), domain)
        groups = np.ceil(np.maximum(n, 1.0) / local)
        return cls(
            local,
            _AllReduce.of(local, link.up_bytes_per_s, link.up_hop_s, link.call_s),
            _AllReduce.of(groups, link.out_bytes_per_s, link.out_hop_s, 0.0),
        )

    def __call__(self, message_bytes: FloatArray) -> FloatArray:
        return self.inside(message_bytes) + self.between(message_bytes / self.local)


class StageComm:
    """Communication of one stage step for one set of layouts: ``StageComm(...)(tokens)`` is the
    time of a step carrying ``tokens`` tokens (all dp ranks together).

    ``dense_layers`` and ``moe_layers`` are the stage's FFNs of each kind (may be fractional),
    ``mixer_layers`` its attention and state-space mixers (default: one per FFN, a layer of both;
    hybrid single-sublayer blocks count them apart); ``expert_width_ratio`` the width tokens are
    dispatched to the experts in over the hidden width (a latent MoE's latent width; 1 otherwise);
    ``norm_layers`` the stage's attention layers whose q/k norms span every head (None: none);
    ``domain`` is the scale-up domain in devices. Attention output: an all-reduce within each tp
    group over that rank's share of the tokens; dense FFN (and MoE without ep): over all tp x dp
    devices of the stage; MoE with ep > 1: dispatch + combine all-to-all, then a reduce inside
    each expert group. Everything that does not depend on the tokens (group sizes, latency terms,
    per-byte link times) is computed once, so the model's decode, mixed and prefill steps share it.
    """

    __slots__ = (
        "_a2a_fixed",
        "_a2a_per_byte",
        "_attention",
        "_call",
        "_ffn",
        "_group",
        "_routed_width",
        "dense_layers",
        "dp",
        "ep",
        "expert_width_ratio",
        "experts_per_token",
        "has_ep",
        "hidden",
        "layers",
        "moe_layers",
        "n",
        "norm_layers",
    )  # fmt: skip

    def __init__(
        self,
        *,
        tp: FloatArray,
        dp: FloatArray,
        ep: FloatArray,
        hidden_size: FloatArray,
        experts_per_token: FloatArray,
        dense_layers: FloatArray,
        moe_layers: FloatArray,
        domain: FloatArray,
        link: Links,
        mixer_layers: FloatArray | None = None,
        expert_width_ratio: FloatArray | float = 1.0,
        norm_layers: FloatArray | None = None,
    ) -> None:
        n = tp * dp
        self.n, self.dp, self.hidden = n, dp, hidden_size
        self.experts_per_token = experts_per_token
        self.expert_width_ratio = expert_width_ratio
        # bytes routed per activation byte: k experts, in the latent width where there is one
        self._routed_width = expert_width_ratio * experts_per_token
        self.dense_layers, self.moe_layers = dense_layers, moe_layers
        self.layers = dense_layers + moe_layers if mixer_layers is None else mixer_layers
        self.norm_layers = norm_layers
        self._attention = _Hierarchical.of(tp, domain, link)
        self._ffn = _Hierarchical.of(n, domain, link)
        self.ep = np.maximum(ep, 1.0)
        self.has_ep = self.ep > 1.0
        self._group = _Hierarchical.of(n / self.ep, domain, link)
        n_safe = np.maximum(n, 1.0)
        groups = np.ceil(n_safe / np.minimum(n_safe, domain))
        remote = (groups - 1.0) / groups
        self._a2a_per_byte = (1.0 - remote) / link.up_bytes_per_s + remote / link.out_bytes_per_s
        self._a2a_fixed = np.where(groups > 1.0, link.out_hop_s, link.up_hop_s)
        self._call = link.call_s

    def __call__(self, tokens: FloatArray) -> FloatArray:
        """Communication of one stage step carrying ``tokens`` tokens (all dp ranks together)."""
        act = tokens * self.hidden * ACTIVATION_BYTES
        attention = self.layers * self._attention(act / self.dp)
        if self.norm_layers is not None:
            attention = attention + self.norm_layers * self._attention(
                tokens / self.dp * NORM_STATS_BYTES
            )
        ffn_dense = self._ffn(act)
        routed = act * self._routed_width
        sent = (routed / self.n) * (self.ep - 1.0) / self.ep
        a2a = 2.0 * (sent * self._a2a_per_byte + self._a2a_fixed + self._call)
        moe_ep = a2a + self._group(routed / self.ep)
        moe = np.where(self.has_ep, moe_ep, ffn_dense)
        return attention + self.dense_layers * ffn_dense + self.moe_layers * moe


def pipeline_hop_s(
    *,
    tokens: FloatArray,
    hidden_size: FloatArray,
    link_bytes_per_s: FloatArray,
    latency_s: FloatArray,
) -> FloatArray:
    """One stage-to-stage transfer of the residual stream of ``tokens`` tokens."""
    return tokens * hidden_size * ACTIVATION_BYTES / link_bytes_per_s + latency_s
