"""Catalog types: accelerators, systems and models, as decoded from the TOML data files.

Data files use the human units their names carry (``memory_gb``, ``memory_bandwidth_tb_per_s``,
``peak_tflops``); the ``*_bytes``/``*_per_s`` properties convert to SI for the performance model.
Every figure from outside (datasheet, benchmark, config file) is cited in the entry's ``sources``
table, keyed by field name (a nested table such as ``peak_tflops`` may have one key for all its
fields; a model's ``sources.architecture`` covers its ``ARCHITECTURE_FIELDS``, which all come from
one config file); ``tests/fleet/test_catalog.py`` checks that each numeric field has one.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

Id = Annotated[str, Meta(pattern=r"^[a-z0-9][a-z0-9.\-]*$", max_length=64)]
PositiveFloat = Annotated[float, Meta(gt=0)]
NonNegativeFloat = Annotated[float, Meta(ge=0)]
PositiveInt = Annotated[int, Meta(gt=0)]
NonNegativeInt = Annotated[int, Meta(ge=0)]
Fraction = Annotated[float, Meta(gt=0, le=1)]

Precision = Literal["bf16", "fp8", "fp4", "int8", "int4"]
PRECISIONS: tuple[Precision, ...] = ("bf16", "fp8", "fp4", "int8", "int4")
BYTES_PER_ELEMENT: dict[Precision, float] = {
    "bf16": 2.0,
    "fp8": 1.0,
    "fp4": 0.5,
    "int8": 1.0,
    "int4": 0.5,
}
FOUR_BIT: frozenset[Precision] = frozenset({"fp4", "int4"})
"""Weight formats that published checkpoints apply to the FFN weights only in MoE models: the
routed experts are 4-bit, attention, shared experts, dense layers and the embedding tables stay at
BF16 (gpt-oss MXFP4: "quantization of the MoE weights"; NVIDIA ModelOpt NVFP4 checkpoints such as
GLM-4.7-NVFP4 list every self_attn and the lm_head in exclude_modules; Kimi K2 Thinking: INT4 on the
MoE components). Dense models at 4 bits quantize every linear layer of the blocks (AWQ/GPTQ INT4
and NVFP4 Llama checkpoints keep only the lm_head at 16 bits)."""

MemoryKind = Literal["hbm", "sram"]

MoeRouting = Literal["power_law_1.01", "power_law_1.2"]
MOE_ROUTINGS: tuple[MoeRouting, ...] = ("power_law_1.01", "power_law_1.2")
"""Expert-load distributions a model's router is taken to follow: aiconfigurator-core's power
laws (its MoE tables' ``distribution``; alpha 1.01 or 1.2), against which its kernels are
timed beside balanced routing (``fleet.perf.kernel_moe_skew``)."""
MOE_SKEW_EP: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Expert-parallel widths at which a part's routing skew is given (the MoE tables' widths)."""


class Frozen(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every catalog type: immutable, unknown fields rejected."""


class PeakTflops(Frozen, frozen=True, kw_only=True):
    """Dense (no sparsity) peak tensor throughput per precision, TFLOP/s; absent = not offered."""

    bf16: PositiveFloat
    fp8: PositiveFloat | None = None
    fp4: PositiveFloat | None = None
    int8: PositiveFloat | None = None
    int4: PositiveFloat | None = None

    def get(self, precision: Precision) -> float | None:
        return getattr(self, precision)


EfficiencyBasis = Literal[
    "fitted-on-runs", "kernel-transfer", "hopper-transfer-estimate", "published-speed"
]
"""Where an accelerator's efficiency factors come from (docs/calibration.md):
- fitted-on-runs: fitted end to end on measured serving runs (the six figures are given);
- kernel-transfer: the ``transfer_from`` family's fitted figures, each scaled by the ratio of this
  part's measured kernel efficiency (``Accelerator.kernel``) to the family's;
- hopper-transfer-estimate: no measurements of this part: the ``transfer_from`` family's fitted
  figures as they are, an estimate that plans flag; where a ``partial_kernel`` block measures a
  factor (MI300X / MI325X: 8-bit compute), that one moves by its kernel ratio;
- published-speed: set by hand so the model reproduces vendors' published speeds (given)."""
TRANSFERRED: frozenset[str] = frozenset({"kernel-transfer", "hopper-transfer-estimate"})


class Efficiency(Frozen, frozen=True, kw_only=True):
    """Achievable fractions of the datasheet figures and fixed per-step costs.

    Given here for ``fitted-on-runs`` and ``published-speed`` parts; derived from the
    ``transfer_from`` family when the figures are transferred (``fleet.perf.transfer``), in which
    case they are absent here.
    """

    basis: EfficiencyBasis
    transfer_from: tuple[Id, ...] = ()
    """Accelerators sharing one fitted set whose figures are transferred (``TRANSFERRED`` bases)."""
    caveats: tuple[str, ...] = ()
    """Known limits of this part's figures that its basis does not say (a figure taken from
    another kernel, a fit that misses its own data); every plan offering a pool of the part
    repeats them as warnings."""
    bandwidth_fraction: Fraction | None = None
    """Weight streaming of decode (memory-bound GEMMs), of 8- and 16-bit weights."""
    flops_fraction: Fraction | None = None
    step_overhead_us: NonNegativeFloat | None = None
    link_bandwidth_fraction: Fraction | None = None
    layer_overhead_us: NonNegativeFloat | None = None
    """Fixed cost per layer per step (kernel launches and their synchronisation)."""
    collective_overhead_us: NonNegativeFloat | None = None
    """Fixed cost per collective call (all-reduce, all-to-all) on top of the link latency."""
    kv_bandwidth_fraction: Fraction | None = None
    """KV-cache reads of decode attention (a different kernel from weight streaming)."""
    fp8_flops_fraction: Fraction | None = None
    """Fraction of the 8-bit (FP8, INT8) peak; ``flops_fraction`` is BF16's."""
    four_bit_bandwidth_fraction: Fraction | None = None
    """Weight streaming of 4-bit weights (FP4, INT4: dequantizing or block-scaled GEMVs)."""


EFFICIENCY_FIGURES: tuple[str, ...] = (
    "bandwidth_fraction",
    "flops_fraction",
    "step_overhead_us",
    "link_bandwidth_fraction",
    "layer_overhead_us",
    "collective_overhead_us",
    "kv_bandwidth_fraction",
    "fp8_flops_fraction",
    "four_bit_bandwidth_fraction",
)


class KernelFlopsFraction(Frozen, frozen=True, kw_only=True):
    """Fraction of the dense datasheet peak that large GEMMs reach, per precision."""

    bf16: PositiveFloat
    fp8: PositiveFloat | None = None
    """FP8 (per-tensor and block-scaled); absent where the part has no FP8 kernels (A100)."""
    fp4: PositiveFloat | None = None
    int8: PositiveFloat | None = None
    """INT8 W8A8 (SmoothQuant), measured where the part has no FP8 (A100); elsewhere INT8 takes
    the FP8 figure."""


class KernelFigures(Frozen, frozen=True, kw_only=True):
    """Kernel-level efficiencies fitted on measured kernel tables (``fleet.perf.kernel_fit``).

    Fractions are of this entry's datasheet figures; latencies are one small-message call.
    """

    gemm_flops_fraction: KernelFlopsFraction
    gemm_bandwidth_fraction: PositiveFloat
    """Weight streaming of decode-regime GEMMs (at most 64 tokens, weights of at least 16.8M
    elements), BF16 and FP8 weights."""
    gemm_fp4_bandwidth_fraction: PositiveFloat | None = None
    """Weight streaming of decode-regime NVFP4 GEMMs (scales included), where the part has FP4."""
    gemm_int4_bandwidth_fraction: PositiveFloat | None = None
    """Weight streaming of decode-regime INT4 weight-only GEMMs, where the tables measure them
    (A100)."""
    attention_bandwidth_fraction: PositiveFloat | None = None
    """KV-cache read of decode attention; absent where the part's table is not read
    (``kernel_parts.KV_READ_UNPHYSICAL``): KV reads then transfer at the GEMM streaming ratio."""
    moe_bandwidth_fraction: PositiveFloat | None = None
    """Weight streaming of an MoE layer's routed experts (grouped GEMM), BF16 and FP8 weights;
    absent where the tables hold no balanced-routing MoE rows (A100): experts then stream at
    the GEMM figure's transfer."""
    moe_fp4_bandwidth_fraction: PositiveFloat | None = None
    """Weight streaming of routed FP4 experts (MXFP4 grouped GEMM, scales included), where the
    part has FP4."""
    moe_int4_bandwidth_fraction: PositiveFloat | None = None
    """Weight streaming of routed INT4 weight-only experts (W4A16 grouped GEMM, half a byte per
    weight), where the part has that kernel's table; absent: INT4 experts transfer as the 8/16-bit
    ones."""
    moe_call_us: PositiveFloat | None = None
    """Fixed time of one MoE layer's routed-expert call (routing, permutation, the grouped GEMMs'
    launch and tail), the call term of the 8/16-bit MoE kernel fits (geometric mean over the
    expert dtypes measured); absent where the tables hold no balanced-routing MoE rows."""
    moe_fp4_call_us: PositiveFloat | None = None
    """The same fixed time for routed FP4 experts: the call term of the MXFP4 MoE fit whose
    streaming term is ``moe_fp4_bandwidth_fraction``, where the part has FP4; absent: FP4
    experts take ``moe_call_us``."""
    dsa_call_us: PositiveFloat | None = None
    """Fixed time of one DeepSeek Sparse Attention layer's attention module per forward pass
    (its dozen-odd kernels' launch and tail, the indexer and top-k included): the call term of
    the measured module's fit (``fleet.perf.kernel_dsa``); absent where the tables lack it."""
    context_attention_flops_fraction: PositiveFloat
    """Fraction of the BF16 peak that prefill (context, flash) attention reaches."""
    all_reduce_link_fraction: PositiveFloat
    all_reduce_call_us_2: PositiveFloat
    all_reduce_call_us_4: PositiveFloat
    state_bandwidth_fraction: PositiveFloat | None = None
    """Linear-attention decode: each stream's float32 recurrent state read and written back, as
    a fraction of HBM bandwidth (above 1 where the kernel keeps the state narrower)."""
    state_prefill_flops_fraction: PositiveFloat | None = None
    """Linear-attention prefill: the chunked scan's state update and read-out FLOPs per token
    (4 x value heads x key dim x value dim) as a fraction of the BF16 peak."""
    mamba_conv_bandwidth_fraction: PositiveFloat | None = None
    """Mamba2 decode: each stream's convolution window (conv_kernel - 1 inputs of x, B and C,
    BF16) read and written back by the causal-conv update kernel, as a fraction of HBM
    bandwidth."""
    mamba_conv_prefill_bandwidth_fraction: PositiveFloat | None = None
    """Mamba2 prefill: the causal convolution over a prompt's x, B and C channels (each read
    and written once, BF16), as a fraction of HBM bandwidth."""
    moe_routing_skew: MoeRoutingSkew | None = None
    """How much longer the most-loaded expert-parallel rank's routed experts take than the
    balanced router's, per routing and width; absent where the tables lack power-law rows."""
    moe_compute: MoeCompute | None = None
    """The routed experts' grouped-GEMM compute by tokens per expert and expert width, per expert
    kind (``fleet.perf.kernel_moe_efficiency``); absent where the part has no MoE tables."""


SkewCurve = Annotated[
    tuple[Annotated[float, Meta(ge=1, le=10)], ...],
    Meta(min_length=len(MOE_SKEW_EP), max_length=len(MOE_SKEW_EP)),
]


class MoeRoutingSkew(Frozen, frozen=True, kw_only=True):
    """Per routing of ``MOE_ROUTINGS``, at each width of ``MOE_SKEW_EP``: the most-loaded rank's
    routed-expert time over the balanced router's, on compute-bound calls
    (``fleet.perf.kernel_moe_skew``)."""

    power_law_1_01: SkewCurve
    power_law_1_2: SkewCurve

    def curve(self, routing: MoeRouting) -> tuple[float, ...]:
        return getattr(self, routing.replace(".", "_"))


class MoeComputeForm(Frozen, frozen=True, kw_only=True):
    """compute = FLOPs / (peak x flops_fraction) x (1 + half_rate_pairs_per_expert / m) x
    (1 + half_rate_width / n), m the (token, expert) pairs per expert a call touches and n the
    expert's intermediate width on the rank: each term halves the rate where m or n equals it."""

    flops_fraction: Annotated[float, Meta(gt=0, le=1.5)]
    half_rate_pairs_per_expert: Annotated[float, Meta(ge=0, le=4096)]
    half_rate_width: Annotated[float, Meta(ge=0, le=8192)]
    """In elements of the expert's intermediate (FFN) width."""


class MoeCompute(Frozen, frozen=True, kw_only=True):
    """``MoeComputeForm`` per expert kind (``fleet.catalog.engines.EXPERT_KINDS``: BF16,
    per-tensor FP8, block-scaled FP8, FP4, INT4 weight-only); a kind left out has no fitted form
    on the part."""

    bf16: MoeComputeForm | None = None
    fp8: MoeComputeForm | None = None
    fp8_block: MoeComputeForm | None = None
    fp4: MoeComputeForm | None = None
    int4: MoeComputeForm | None = None


class PartialKernelFigures(Frozen, frozen=True, kw_only=True):
    """Kernel figures of a ``hopper-transfer-estimate`` part whose tables measure some kernels
    only (MI300X / MI325X: AMD's block-scaled FP8 GEMM timings, ``fleet.perf.kernel_aiter``),
    each with the family's figure fitted the same way at the same shapes: the factor they
    measure moves by their ratio, every other factor stays the family's estimate."""

    fp8_gemm_flops_fraction: PositiveFloat
    """This part's compute-regime FP8 GEMM FLOP fraction of its FP8 peak."""
    family_fp8_gemm_flops_fraction: PositiveFloat
    """The family's, fitted the same way on the same GEMM shapes."""


class Accelerator(Frozen, frozen=True, kw_only=True):
    id: Id
    name: str
    vendor: str
    memory_kind: MemoryKind
    memory_gb: PositiveFloat
    memory_bandwidth_tb_per_s: PositiveFloat
    peak_tflops: PeakTflops
    native_precisions: tuple[Precision, ...]
    weight_only_precisions: tuple[Precision, ...] = ()
    power_w: PositiveFloat
    scale_up_bandwidth_gb_per_s: PositiveFloat
    """Per-device, one direction, to the rest of its scale-up domain."""
    scale_up_latency_us: PositiveFloat
    """One hop of a collective on the scale-up fabric."""
    usd_per_hour: PositiveFloat
    """Typical cloud on-demand price per device."""
    efficiency: Efficiency
    kernel: KernelFigures | None = None
    """Measured kernel efficiencies, where kernel tables of this part exist."""
    family_kernel: KernelFigures | None = None
    """The ``transfer_from`` family's kernel figures measured with the engine this part's tables
    were, where that is not the family's own [accelerators.kernel] engine (TensorRT-LLM): the
    reference this part's kernel ratios are taken against (Intel Arc Pro B60: vLLM only)."""
    partial_kernel: PartialKernelFigures | None = None
    """Measured figures of some kernels of a ``hopper-transfer-estimate`` part and the family's
    at the same shapes: those factors move by the ratio (``fleet.perf.transfer``)."""
    sources: dict[str, str]

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_tb_per_s * 1e12

    @property
    def scale_up_bandwidth_bytes_per_s(self) -> float:
        return self.scale_up_bandwidth_gb_per_s * 1e9

    def runs(self, precision: str) -> bool:
        """True when weights in ``precision`` can be served (natively or weight-only)."""
        return precision in self.native_precisions or precision in self.weight_only_precisions

    @property
    def default_precision(self) -> Precision:
        """The weight precision to assume when none is asked: the native floating-point format
        (bf16, fp8, fp4) with the highest peak tensor throughput, the narrower on a tie. So fp8
        on Hopper, CDNA 3 and Gaudi 3, fp4 on Blackwell, bf16 on TPUs, the LPU and the wafer.
        int8 is never the default: integer weights need a calibrated quantization."""
        floats = [p for p in ("fp4", "fp8", "bf16") if p in self.native_precisions]
        if not floats:
            return "bf16"
        return max(floats, key=lambda p: self.peak_tflops.get(p) or 0.0)


class System(Frozen, frozen=True, kw_only=True):
    """The unit a pool counts: a node, a rack, a slice, a wafer-scale system."""

    id: Id
    name: str
    accelerator: Id
    devices_per_system: PositiveInt
    scale_up_domain_devices: PositiveInt
    """Devices reachable over the scale-up fabric (NVLink, ICI, on-wafer); bounds tp x ep."""
    scale_out_bandwidth_gb_per_s: PositiveFloat
    """Per-system network bandwidth to other systems (pipeline stages across systems use it)."""
    scale_out_latency_us: PositiveFloat = 5.0
    usd_per_hour: PositiveFloat | None = None
    """Whole-system price; ``None`` = devices_per_system x the accelerator's price."""
    aliases: tuple[str, ...] = ()
    """Other names of this system in serving-benchmark logs (e.g. aiconfigurator-core's
    ``h100_sxm``); ``Catalog.system_named`` resolves them."""
    sources: dict[str, str]


AttentionKind = Literal["gqa", "mla"]
EmbeddingsCounted = Literal["input_and_output", "output_only", "none"]


class Mla(Frozen, frozen=True, kw_only=True):
    """Multi-head latent attention ranks (DeepSeek-V3 family)."""

    kv_lora_rank: PositiveInt
    q_lora_rank: NonNegativeInt
    qk_rope_head_dim: PositiveInt
    qk_nope_head_dim: PositiveInt
    v_head_dim: PositiveInt
    index_n_heads: NonNegativeInt = 0
    """DeepSeek Sparse Attention indexer heads (GLM-5); 0 = no indexer."""
    index_head_dim: NonNegativeInt = 0
    """Indexer key width; the indexer caches one such key per token and layer."""
    index_topk: NonNegativeInt = 0
    """Context tokens the indexer selects per query (DeepSeek Sparse Attention's top-k); 0 =
    dense attention. Attention then reads and scores only the min(context, top-k) selected
    latent entries, in MLA's MQA (absorbed) form in prefill as in decode, while the indexer
    reads and scores every token's key."""


class LinearAttention(Frozen, frozen=True, kw_only=True):
    """Gated DeltaNet linear-attention layers (Qwen3-Next, Qwen3.5): each keeps a fixed-size
    recurrent state per request instead of a KV cache that grows with the context."""

    layers: PositiveInt
    """How many of ``num_layers`` are linear-attention layers (the rest attend over a KV cache)."""
    num_key_heads: PositiveInt
    key_head_dim: PositiveInt
    num_value_heads: PositiveInt
    value_head_dim: PositiveInt
    conv_kernel: PositiveInt = 4
    """Width of the short causal convolution before the recurrence (its last kernel - 1 inputs
    are kept per request)."""
    state_bytes: PositiveInt = 4
    """Bytes per element of the recurrent state as served (float32 unless the config pins
    another ``mamba_ssm_dtype``); the convolution window is kept at 2 bytes (model dtype)."""


class Mamba2(Frozen, frozen=True, kw_only=True):
    """Mamba2 (state-space) mixers of a hybrid model (NVIDIA Nemotron-H): each keeps a fixed
    state per request, ``num_heads x head_dim x state_size`` of recurrent state plus the last
    ``conv_kernel - 1`` inputs of its causal convolution, instead of a KV cache."""

    num_heads: PositiveInt
    """``mamba_num_heads``; the mixer's inner width is num_heads x head_dim."""
    head_dim: PositiveInt
    state_size: PositiveInt
    """``ssm_state_size`` (d_state)."""
    n_groups: PositiveInt
    """Groups sharing one B and C projection of ``state_size`` each (``n_groups``)."""
    conv_kernel: PositiveInt = 4
    state_bytes: PositiveInt = 4
    """Bytes per element of the recurrent state as served (``mamba_ssm_cache_dtype``, float32
    by default); the convolution window is kept at 2 bytes (model dtype)."""


class SlidingAttention(Frozen, frozen=True, kw_only=True):
    """The sliding-window layers' attention shape where it differs from the full-attention
    layers' (the model's own ``num_attention_heads``, ``num_kv_heads``, ``head_dim`` and
    ``v_head_dim``): Gemma 4's full layers have wider heads and fewer KV heads than its sliding
    ones, MiMo-V2-Flash's sliding layers twice the KV heads of its full ones."""

    num_attention_heads: PositiveInt
    num_kv_heads: PositiveInt
    head_dim: PositiveInt
    """Width of a query and a key head."""
    v_head_dim: PositiveInt | None = None
    """Width of a value head; None = ``head_dim``."""


class BlockSparseAttention(Frozen, frozen=True, kw_only=True):
    """Block-sparse attention on GQA layers with an indexer of its own (MiniMax Sparse
    Attention, MiniMax-M3 ``sparse_attention_config``): the KV cache is cut into blocks of
    ``block_size`` tokens; per query, an indexer of ``index_n_heads`` heads (one per KV head)
    scores every cached token's index key (``index_head_dim`` wide, one per token and layer,
    shared by the heads) and keeps the ``topk_blocks`` best blocks, the query's own (local)
    block among them; attention then reads and scores only those blocks' keys and values. The
    KV cache still holds every token's keys and values, plus its index key."""

    layers: PositiveInt
    """How many of ``num_layers`` attend so (MiniMax-M3: all but the 3 leading dense layers);
    the others attend densely over every token."""
    block_size: PositiveInt
    topk_blocks: PositiveInt
    """Blocks each query attends to, the local ones included."""
    local_blocks: NonNegativeInt = 1
    """Of ``topk_blocks``, the query's own most recent blocks, always kept."""
    index_n_heads: PositiveInt
    index_head_dim: PositiveInt


class CompressedAttention(Frozen, frozen=True, kw_only=True):
    """DeepSeek-V4's hybrid attention (``compress_ratios``): every layer attends over one shared
    key-value vector of ``head_dim`` per token (one KV head; the key doubles as the value) of
    the last ``sliding_window`` tokens, and on top of that window

    - ``csa_layers`` (compressed sparse attention, ratio ``csa_ratio``) over one compressed entry
      per ``csa_ratio`` tokens, of which a lightning indexer (``index_n_heads`` x
      ``index_head_dim``, its own key compressed the same way and cached at 4 bits) selects the
      ``index_topk`` that attention reads;
    - ``hca_layers`` (heavily compressed attention, ratio ``hca_ratio``) over every compressed
      entry, one per ``hca_ratio`` tokens;
    - the other layers over the window alone.

    A compressor (key-value and gate projections to ``head_dim``, twice that where its windows
    overlap, ratio 4) pools each run of tokens; its partial window is a float32 state per
    request. Queries come through the ``q_lora_rank`` bottleneck; the heads' outputs through
    ``o_groups`` grouped projections to ``o_lora_rank`` each and one to the hidden width. The
    residual stream is ``hc_mult`` copies of the hidden state (hyper-connections), mixed before
    and after each sublayer by small learned maps."""

    q_lora_rank: PositiveInt
    o_lora_rank: PositiveInt
    o_groups: PositiveInt
    qk_rope_head_dim: PositiveInt
    csa_layers: NonNegativeInt
    csa_ratio: PositiveInt = 4
    hca_layers: NonNegativeInt
    hca_ratio: PositiveInt = 128
    index_n_heads: PositiveInt
    index_head_dim: PositiveInt
    index_topk: PositiveInt
    hc_mult: PositiveInt = 1
    """Copies of the hidden state in the residual stream (1 = a plain residual)."""
    hash_layers: NonNegativeInt = 0
    """Leading MoE layers that route each token by a fixed token-id -> experts table instead of
    the learned router's top-k (the same experts per token; no weights of their own beyond it)."""


BlockPattern = Annotated[str, Meta(pattern=r"^[M*E\-]+$", max_length=1024)]
"""One character per block of a hybrid model (Nemotron-H ``hybrid_override_pattern``):
``M`` Mamba2 mixer, ``*`` attention, ``E`` MoE FFN, ``-`` dense FFN."""


class Moe(Frozen, frozen=True, kw_only=True):
    num_experts: PositiveInt
    experts_per_token: PositiveInt
    num_shared_experts: NonNegativeInt = 0
    expert_intermediate_size: PositiveInt
    shared_expert_intermediate_size: NonNegativeInt = 0
    """0 = the same as ``expert_intermediate_size`` per shared expert."""
    dense_layers: NonNegativeInt = 0
    """Leading layers with a dense FFN (``first_k_dense_replace``)."""
    moe_layer_interval: PositiveInt = 1
    """Every n-th layer is MoE, the others dense (Llama-4 ``interleave_moe_layer_step``)."""
    routing: MoeRouting | None = None
    """The expert-load distribution the router is taken to follow (``sources.moe_routing``
    says whose); its skew slows the routed experts' compute on the most-loaded rank. None:
    balanced routing, every rank an equal share."""
    latent_size: NonNegativeInt = 0
    """Latent MoE (Nemotron 3 Super/Ultra ``moe_latent_size``): each token is projected from the
    hidden width to this width before the routed experts, which work in it, and back after
    them; the router and the shared experts work in the hidden width. 0 = none."""


class Model(Frozen, frozen=True, kw_only=True):
    id: Id
    name: str
    hf_repo: str
    aliases: tuple[str, ...] = ()
    """Other checkpoints of this architecture (quantized or re-released Hugging Face repos), as
    serving-benchmark logs name the model; ``Catalog.model_named`` resolves them and ``hf_repo``."""
    num_layers: PositiveInt
    hidden_size: PositiveInt
    num_attention_heads: PositiveInt
    num_kv_heads: PositiveInt
    head_dim: PositiveInt
    """Width of a query and a key head (of the full-attention layers where ``sliding_attention``
    gives the sliding ones their own)."""
    v_head_dim: PositiveInt | None = None
    """Width of a value head where it differs from ``head_dim`` (MiMo-V2-Flash: 192-wide queries
    and keys, 128-wide values); None = ``head_dim``. GQA only (MLA has its own)."""
    attention_k_eq_v: bool = False
    """The full-attention layers have no value projection: the key projection's output also
    serves as values (Gemma 4 ``attention_k_eq_v``). Only the weights change: keys are then
    normalised and rotated, values normalised only, so the KV cache still holds both."""
    sliding_attention: SlidingAttention | None = None
    """The ``sliding_window_layers``' own attention shape; None = the fields above."""
    intermediate_size: PositiveInt
    """Dense FFN width (of dense layers in an MoE model)."""
    vocab_size: PositiveInt
    tie_word_embeddings: bool = False
    attention: AttentionKind = "gqa"
    mla: Mla | None = None
    moe: Moe | None = None
    sliding_window: PositiveInt | None = None
    sliding_window_layers: NonNegativeInt = 0
    """Layers whose KV cache holds only the last ``sliding_window`` tokens."""
    linear_attention: LinearAttention | None = None
    """Linear-attention layers with a per-request state (the other layers attend as above)."""
    block_pattern: BlockPattern | None = None
    """Hybrid models whose blocks are single sublayers (Nemotron-H): a mixer (``M``, ``*``)
    without an FFN or an FFN (``E``, ``-``) without a mixer, each residual with its own norm and
    one tensor-parallel all-reduce; ``num_layers`` then counts blocks. None = every layer is
    attention (or linear attention) followed by an FFN."""
    mamba: Mamba2 | None = None
    """The ``M`` blocks' Mamba2 mixers (with ``block_pattern``)."""
    compressed_attention: CompressedAttention | None = None
    """DeepSeek-V4's compressed attention (then ``sliding_window_layers`` = ``num_layers``: every
    layer keeps the window, and ``num_kv_heads`` x ``head_dim`` is the one shared key-value
    vector per token)."""
    ffn_gated: bool = True
    """FFNs (dense and experts) are gated, 3 matrices (gate, up, down); False: 2 (up, down),
    as Nemotron-H's relu2 MLPs."""
    attention_output_gate: bool = False
    """The attention layers' q projection also yields a sigmoid gate on the output (Qwen3.5
    ``attn_output_gate``): twice the q width."""
    qk_norm_across_heads: bool = False
    """The attention layers' q and k RMSNorms each span the whole projection, every head together
    (MiniMax-M2's ``qk_norm_type = "per_layer"``), not one head (Qwen3's): a rank holding some of
    the heads must all-reduce the norms' statistics over its tensor-parallel group, one small
    all-reduce per attention layer at tp > 1."""
    native_precision: Precision = "bf16"
    """Precision of the released weights."""
    four_bit_companion: Literal["bf16", "fp8"] = "bf16"
    """Precision of the non-expert linear weights when the routed experts are served at 4 bits
    (``FOUR_BIT``): BF16, as most 4-bit MoE checkpoints keep them; FP8 where the 4-bit
    checkpoints keep them so (DeepSeek-V4: MXFP4 experts, FP8 block-scaled attention and shared
    experts)."""
    mtp_layers: NonNegativeInt = 0
    """Multi-token-prediction modules shipped with the checkpoint (HF ``num_nextn_predict_layers``,
    MiniMax ``num_mtp_modules``): the model's own draft for speculative decoding."""
    mtp_acceptance: Annotated[float, Meta(ge=0, lt=1)] | None = None
    """Published per-token acceptance of that MTP draft at ``mtp_draft`` draft tokens; the
    planner's grid offers MTP speculative decoding only where it is set."""
    mtp_draft_tokens: Annotated[int, Meta(ge=1, le=16)] | None = None
    """Draft tokens per step at which ``mtp_acceptance`` was measured, where the serving
    recipes chain the MTP layer(s) for more tokens than there are modules (SGLang's EAGLE over
    one MTP layer, ``--speculative-num-steps``); None: one per MTP module (``mtp_layers``)."""
    fp8_block_scaled: bool = False
    """The model's FP8 checkpoint scales its weights per 128 x 128 block (DeepSeek-style
    ``quantization_config.weight_block_size``), so its FP8 experts run through the engines'
    block-scaled FP8 MoE kernels (``fleet.perf.kernel_moe_grid``); cited in
    ``sources.fp8_block_scaled`` when set. False: per-tensor FP8 or no FP8 checkpoint."""
    published_total_params_b: PositiveFloat
    published_active_params_b: PositiveFloat
    published_active_embeddings: EmbeddingsCounted = "input_and_output"
    """Which embedding tables the publisher's active figure counts (conventions differ)."""
    quality: Annotated[float, Meta(ge=0, le=100)]
    """Relative capability score used when a distilled variant serves a tier."""
    sources: dict[str, str]
    block_sparse_attention: BlockSparseAttention | None = None
    """Block-sparse attention with its own indexer on some GQA layers (MiniMax-M3)."""

    @property
    def mtp_draft(self) -> int:
        """Draft tokens per step of the model's own MTP speculative decoding (0: no MTP)."""
        if self.mtp_layers == 0:
            return 0
        return self.mtp_draft_tokens or self.mtp_layers


ARCHITECTURE_FIELDS: frozenset[str] = frozenset(
    {
        "num_layers",
        "hidden_size",
        "num_attention_heads",
        "num_kv_heads",
        "head_dim",
        "v_head_dim",
        "attention_k_eq_v",
        "sliding_attention",
        "intermediate_size",
        "vocab_size",
        "tie_word_embeddings",
        "attention",
        "mla",
        "moe",
        "sliding_window",
        "sliding_window_layers",
        "linear_attention",
        "attention_output_gate",
        "qk_norm_across_heads",
        "mtp_layers",
        "block_pattern",
        "mamba",
        "ffn_gated",
        "block_sparse_attention",
        "compressed_attention",
    }
)
"""Model fields read from the model's config.json, cited together as ``sources.architecture``."""


class AcceleratorFile(Frozen, frozen=True, kw_only=True):
    accelerators: tuple[Accelerator, ...]


class SystemFile(Frozen, frozen=True, kw_only=True):
    systems: tuple[System, ...]


class ModelFile(Frozen, frozen=True, kw_only=True):
    models: tuple[Model, ...]
