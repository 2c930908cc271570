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

Precision = Literal["bf16", "fp8", "fp4", "int8"]
PRECISIONS: tuple[Precision, ...] = ("bf16", "fp8", "fp4", "int8")
BYTES_PER_ELEMENT: dict[Precision, float] = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5, "int8": 1.0}

MemoryKind = Literal["hbm", "sram"]


class Frozen(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every catalog type: immutable, unknown fields rejected."""


class PeakTflops(Frozen, kw_only=True):
    """Dense (no sparsity) peak tensor throughput per precision, TFLOP/s; absent = not offered."""

    bf16: PositiveFloat
    fp8: PositiveFloat | None = None
    fp4: PositiveFloat | None = None
    int8: PositiveFloat | None = None

    def get(self, precision: Precision) -> float | None:
        return getattr(self, precision)


class Efficiency(Frozen, kw_only=True):
    """Achievable fractions of the datasheet figures and fixed per-step costs.

    Fitted on measurements (see docs/calibration.md) where they exist; otherwise the shared
    defaults, which the entry's ``sources.efficiency`` says.
    """

    bandwidth_fraction: Fraction
    flops_fraction: Fraction
    step_overhead_us: NonNegativeFloat
    link_bandwidth_fraction: Fraction = 0.7
    layer_overhead_us: NonNegativeFloat = 0.0
    """Fixed cost per layer per step (kernel launches and their synchronisation)."""
    collective_overhead_us: NonNegativeFloat = 0.0
    """Fixed cost per collective call (all-reduce, all-to-all) on top of the link latency."""


class Accelerator(Frozen, kw_only=True):
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

    def runs(self, precision: Precision) -> bool:
        """True when weights in ``precision`` can be served (natively or weight-only)."""
        return precision in self.native_precisions or precision in self.weight_only_precisions


class System(Frozen, kw_only=True):
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
    sources: dict[str, str]


AttentionKind = Literal["gqa", "mla"]
EmbeddingsCounted = Literal["input_and_output", "output_only", "none"]


class Mla(Frozen, kw_only=True):
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


class Moe(Frozen, kw_only=True):
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


class Model(Frozen, kw_only=True):
    id: Id
    name: str
    hf_repo: str
    num_layers: PositiveInt
    hidden_size: PositiveInt
    num_attention_heads: PositiveInt
    num_kv_heads: PositiveInt
    head_dim: PositiveInt
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
    native_precision: Precision = "bf16"
    """Precision of the released weights."""
    mtp_layers: NonNegativeInt = 0
    """Multi-token-prediction modules shipped with the checkpoint (HF ``num_nextn_predict_layers``,
    MiniMax ``num_mtp_modules``): the model's own draft for speculative decoding."""
    mtp_acceptance: Annotated[float, Meta(ge=0, lt=1)] | None = None
    """Published per-token acceptance of that MTP draft; the planner's grid offers MTP
    speculative decoding (draft length ``mtp_layers``) only where it is set."""
    published_total_params_b: PositiveFloat
    published_active_params_b: PositiveFloat
    published_active_embeddings: EmbeddingsCounted = "input_and_output"
    """Which embedding tables the publisher's active figure counts (conventions differ)."""
    quality: Annotated[float, Meta(ge=0, le=100)]
    """Relative capability score used when a distilled variant serves a tier."""
    sources: dict[str, str]


ARCHITECTURE_FIELDS: frozenset[str] = frozenset(
    {
        "num_layers",
        "hidden_size",
        "num_attention_heads",
        "num_kv_heads",
        "head_dim",
        "intermediate_size",
        "vocab_size",
        "tie_word_embeddings",
        "attention",
        "mla",
        "moe",
        "sliding_window",
        "sliding_window_layers",
        "mtp_layers",
    }
)
"""Model fields read from the model's config.json, cited together as ``sources.architecture``."""


class AcceleratorFile(Frozen, kw_only=True):
    accelerators: tuple[Accelerator, ...]


class SystemFile(Frozen, kw_only=True):
    systems: tuple[System, ...]


class ModelFile(Frozen, kw_only=True):
    models: tuple[Model, ...]
