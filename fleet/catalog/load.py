"""Load the catalogs from their TOML data files, explicitly (never at import time)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec

from fleet.catalog.engines import POOLED, Engine, EngineFile, engine_problem
from fleet.catalog.schema import (
    EFFICIENCY_FIGURES,
    TRANSFERRED,
    Accelerator,
    AcceleratorFile,
    Model,
    ModelFile,
    System,
    SystemFile,
)
from fleet.errors import InputError

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

T = TypeVar("T")


class CatalogError(InputError):
    """A catalog file that does not decode, or entries that contradict each other."""


class UnknownIdError(InputError):
    """An id that is not in the catalog; the message lists what is."""

    def __init__(self, kind: str, value: str, known: list[str]) -> None:
        super().__init__(f"unknown {kind} {value!r}; known: {', '.join(known)}")
        self.kind = kind
        self.value = value
        self.known = known


@dataclass(frozen=True, slots=True)
class Catalog:
    """All catalog entries, by id, in file order."""

    accelerators: dict[str, Accelerator]
    systems: dict[str, System]
    models: dict[str, Model]
    engines: dict[str, Engine] = field(default_factory=dict)
    """Serving engines with multipliers on the pooled factors (``fleet.catalog.engines``); the
    pooled default ``POOLED`` is not among them."""

    def accelerator(self, accelerator_id: str) -> Accelerator:
        return _get(self.accelerators, "accelerator", accelerator_id)

    def system(self, system_id: str) -> System:
        return _get(self.systems, "system", system_id)

    def model(self, model_id: str) -> Model:
        return _get(self.models, "model", model_id)

    def model_named(self, name: str) -> Model:
        """The model whose id, ``hf_repo`` or one of whose ``aliases`` is ``name``."""
        for model in self.models.values():
            if name == model.id or name == model.hf_repo or name in model.aliases:
                return model
        raise UnknownIdError("model", name, list(self.models))

    def system_named(self, name: str) -> System:
        """The system whose id or one of whose ``aliases`` is ``name``."""
        for system in self.systems.values():
            if name == system.id or name in system.aliases:
                return system
        raise UnknownIdError("system", name, list(self.systems))

    @property
    def engine_ids(self) -> tuple[str, ...]:
        """Every engine a request may name: the pooled default first."""
        return (POOLED, *self.engines)

    def engine(self, engine_id: str) -> Engine | None:
        """The engine ``engine_id``; None for the pooled default."""
        if engine_id == POOLED:
            return None
        if engine_id not in self.engines:
            raise UnknownIdError("engine", engine_id, list(self.engine_ids))
        return self.engines[engine_id]

    def default_system(self, accelerator_id: str) -> System:
        """The first system in the catalog built from ``accelerator_id``."""
        self.accelerator(accelerator_id)
        for system in self.systems.values():
            if system.accelerator == accelerator_id:
                return system
        raise CatalogError(f"no system in the catalog is built from accelerator {accelerator_id!r}")


def _get(table: dict[str, T], kind: str, key: str) -> T:
    try:
        return table[key]
    except KeyError:
        raise UnknownIdError(kind, key, list(table)) from None


def _decode(path: Path, kind: type[T]) -> T:
    data = path.read_bytes()
    try:
        return msgspec.toml.decode(data, type=kind)
    except msgspec.ValidationError as err:
        raise CatalogError(f"{path.name}: {err}{_entry_hint(data, str(err))}") from None
    except msgspec.DecodeError as err:
        raise CatalogError(f"{path.name}: not valid TOML: {err}") from None


def _entry_hint(data: bytes, message: str) -> str:
    """`` (id 'x')`` for the entry a validation error points into, when it has a readable id."""
    match = re.search(r"\$\.(\w+)\[(\d+)\]", message)
    if match is None:
        return ""
    entries = msgspec.toml.decode(data).get(match[1], [])
    index = int(match[2])
    entry = entries[index] if index < len(entries) else None
    entry_id = entry.get("id") if isinstance(entry, dict) else None
    return f" (id {entry_id!r})" if isinstance(entry_id, str) else ""


def _by_id(entries: tuple[T, ...], file: str, table: str) -> dict[str, T]:
    out: dict[str, T] = {}
    for i, entry in enumerate(entries):
        key = entry.id  # type: ignore[attr-defined]
        if key in out:
            raise CatalogError(f"{file}: duplicate id {key!r} at $.{table}[{i}]")
        out[key] = entry
    return out


def _check_names(file: str, table: str, names: list[tuple[str, tuple[str, ...]]]) -> None:
    """Every id, repo and alias names one entry only."""
    owner: dict[str, str] = {}
    for i, (entry_id, own) in enumerate(names):
        for name in dict.fromkeys(own):
            if owner.setdefault(name, entry_id) != entry_id:
                raise CatalogError(
                    f"{file}: $.{table}[{i}].aliases (id {entry_id!r}): {name!r} already names "
                    f"{owner[name]!r}"
                )


def _model_problem(model: Model) -> tuple[str, str] | None:
    """(field, problem) for a cross-field rule msgspec constraints cannot express, else None."""
    moe = model.moe
    if (model.attention == "mla") != (model.mla is not None):
        return "mla", "required exactly when attention = 'mla'"
    if model.num_attention_heads % model.num_kv_heads:
        return "num_kv_heads", "must divide num_attention_heads"
    if (model.sliding_window is None) != (model.sliding_window_layers == 0):
        return "sliding_window", "set exactly when sliding_window_layers > 0"
    if model.sliding_window_layers > model.num_layers:
        return "sliding_window_layers", "exceeds num_layers"
    shapes = _shape_problem(model)
    if shapes is not None:
        return shapes
    linear = model.linear_attention
    if linear is not None and linear.layers + model.sliding_window_layers >= model.num_layers:
        return "linear_attention.layers", "leaves no full-attention layer"
    if linear is not None and model.mla is not None:
        return "linear_attention", "not combined with mla"
    if linear is not None and linear.num_value_heads % linear.num_key_heads:
        return "linear_attention.num_key_heads", "must divide num_value_heads"
    hybrid = _hybrid_problem(model)
    if hybrid is not None:
        return hybrid
    block_sparse = _block_sparse_problem(model)
    if block_sparse is not None:
        return block_sparse
    if moe is not None and moe.experts_per_token > moe.num_experts:
        return "moe.experts_per_token", "exceeds num_experts"
    if moe is not None and moe.dense_layers >= model.num_layers:
        return "moe.dense_layers", "must be less than num_layers"
    if model.mtp_draft_tokens is not None and (
        model.mtp_layers == 0 or model.mtp_acceptance is None
    ):
        return "mtp_draft_tokens", "set only with mtp_layers > 0 and an mtp_acceptance"
    if model.mtp_acceptance is not None and "mtp_acceptance" not in model.sources:
        return "sources.mtp_acceptance", "required when mtp_acceptance is set"
    if model.fp8_block_scaled and "fp8_block_scaled" not in model.sources:
        return "sources.fp8_block_scaled", "required when fp8_block_scaled is set"
    if moe is not None and moe.routing is not None and "moe_routing" not in model.sources:
        return "sources.moe_routing", "required when moe.routing is set"
    return None


def _block_sparse_problem(model: Model) -> tuple[str, str] | None:
    """(field, problem) for block-sparse attention: full-attention GQA layers only (the
    performance model charges its selection on layers that hold every token)."""
    sparse = model.block_sparse_attention
    if sparse is None:
        return None
    if model.mla is not None or model.sliding_window_layers or model.block_pattern is not None:
        return "block_sparse_attention", "GQA full-attention layers only (no mla, sliding, blocks)"
    if model.linear_attention is not None:
        return "block_sparse_attention", "not combined with linear_attention"
    if sparse.layers > model.num_layers:
        return "block_sparse_attention.layers", "exceeds num_layers"
    if sparse.local_blocks >= sparse.topk_blocks:
        return "block_sparse_attention.local_blocks", "must be less than topk_blocks"
    return None


def _shape_problem(model: Model) -> tuple[str, str] | None:
    """(field, problem) for attention-shape fields (value width, sliding layers' own shape) that
    contradict the model; each has one spelling, unset when equal to the default."""
    gqa_only = model.v_head_dim is not None or model.attention_k_eq_v
    if model.mla is not None and (gqa_only or model.sliding_attention is not None):
        return "mla", "not combined with v_head_dim, attention_k_eq_v or sliding_attention"
    if model.v_head_dim == model.head_dim:
        return "v_head_dim", "leave unset when equal to head_dim"
    sliding = model.sliding_attention
    if sliding is None:
        return None
    if not model.sliding_window_layers:
        return "sliding_attention", "needs sliding_window_layers"
    if sliding.num_attention_heads % sliding.num_kv_heads:
        return "sliding_attention.num_kv_heads", "must divide num_attention_heads"
    if sliding.v_head_dim == sliding.head_dim:
        return "sliding_attention.v_head_dim", "leave unset when equal to head_dim"
    main = (model.num_attention_heads, model.num_kv_heads, model.head_dim, model.v_head_dim)
    own = (sliding.num_attention_heads, sliding.num_kv_heads, sliding.head_dim, sliding.v_head_dim)
    if own == main:
        return "sliding_attention", "equals the full layers' shape; leave it unset"
    return None


def _hybrid_problem(model: Model) -> tuple[str, str] | None:
    """(field, problem) for a ``block_pattern`` / ``mamba`` pair that contradicts the model."""
    pattern = model.block_pattern
    if pattern is None:
        return ("mamba", "needs a block_pattern with its M blocks") if model.mamba else None
    if len(pattern) != model.num_layers:
        return "block_pattern", f"has {len(pattern)} blocks, num_layers is {model.num_layers}"
    if ("M" in pattern) != (model.mamba is not None):
        return "mamba", "set exactly when block_pattern has M blocks"
    if ("E" in pattern) != (model.moe is not None):
        return "moe", "set exactly when block_pattern has E blocks"
    if "*" not in pattern:
        return "block_pattern", "has no attention (*) block"
    if model.linear_attention is not None or model.mla is not None or model.sliding_window_layers:
        return "block_pattern", "not combined with linear_attention, mla or sliding windows"
    moe = model.moe
    if moe is not None and (moe.dense_layers or moe.moe_layer_interval != 1):
        return "moe", "a block_pattern places the MoE blocks (no dense_layers or interval)"
    return None


def _efficiency_problem(
    acc: Accelerator, accelerators: dict[str, Accelerator]
) -> tuple[str, str] | None:
    """(field, problem) when the efficiency basis and its figures disagree, else None."""
    eff = acc.efficiency
    given = [f for f in EFFICIENCY_FIGURES if getattr(eff, f) is not None]
    if acc.family_kernel is not None and eff.basis != "kernel-transfer":
        return "family_kernel", "only for basis 'kernel-transfer'"
    if acc.partial_kernel is not None and eff.basis != "hopper-transfer-estimate":
        return "partial_kernel", "only for basis 'hopper-transfer-estimate'"
    if acc.partial_kernel is not None and not eff.caveats:
        return "efficiency.caveats", "needed with partial_kernel: say what stays estimated"
    if eff.basis not in TRANSFERRED:
        if eff.transfer_from:
            return "efficiency.transfer_from", f"only for bases {sorted(TRANSFERRED)}"
        missing = sorted(set(EFFICIENCY_FIGURES) - set(given))
        return ("efficiency", f"basis {eff.basis!r} needs {missing}") if missing else None
    if given:
        return "efficiency", f"basis {eff.basis!r} derives {given}; remove them"
    if not eff.transfer_from:
        return "efficiency.transfer_from", f"required for basis {eff.basis!r}"
    family = [accelerators.get(a) for a in eff.transfer_from]
    if any(f is None or f.efficiency.basis != "fitted-on-runs" for f in family):
        return "efficiency.transfer_from", "must name accelerators with basis 'fitted-on-runs'"
    if len({f.efficiency for f in family if f is not None}) != 1:
        return "efficiency.transfer_from", "must share one fitted set"
    if eff.basis == "kernel-transfer" and any(
        f is None or f.kernel is None for f in (acc, *family)
    ):
        return "kernel", "kernel-transfer needs kernel figures here and in transfer_from"
    if eff.basis == "kernel-transfer" and acc.kernel is not None:
        return _unmeasured_precision(acc)
    return None


def _unmeasured_precision(acc: Accelerator) -> tuple[str, str] | None:
    """A kernel-transfer part offers a native precision only with a kernel FLOP figure it
    transfers from (INT8 may take FP8's): none is stood in for."""
    assert acc.kernel is not None
    f = acc.kernel.gemm_flops_fraction
    own = {"bf16": f.bf16, "fp8": f.fp8, "fp4": f.fp4, "int8": f.int8 or f.fp8}
    for p in acc.native_precisions:
        if p in own and own[p] is None:
            return "native_precisions", f"{p} has no kernel.gemm_flops_fraction figure to transfer"
    return None


def load_catalog(data_dir: Path | None = None) -> Catalog:
    """Decode accelerators.toml, systems.toml, models.toml and engines.toml (optional) and check
    cross-references."""
    root = data_dir or DATA_DIR
    accelerators = _by_id(
        _decode(root / "accelerators.toml", AcceleratorFile).accelerators,
        "accelerators.toml",
        "accelerators",
    )
    systems = _by_id(_decode(root / "systems.toml", SystemFile).systems, "systems.toml", "systems")
    models = _by_id(_decode(root / "models.toml", ModelFile).models, "models.toml", "models")
    for i, acc in enumerate(accelerators.values()):
        problem = _efficiency_problem(acc, accelerators)
        if problem is not None:
            raise CatalogError(
                f"accelerators.toml: $.accelerators[{i}].{problem[0]} (id {acc.id!r}): {problem[1]}"
            )
    for i, system in enumerate(systems.values()):
        if system.accelerator not in accelerators:
            raise CatalogError(
                f"systems.toml: $.systems[{i}].accelerator: unknown accelerator "
                f"{system.accelerator!r}"
            )
        if system.scale_up_domain_devices < system.devices_per_system and (
            system.devices_per_system % system.scale_up_domain_devices
        ):
            raise CatalogError(
                f"systems.toml: $.systems[{i}]: scale_up_domain_devices must divide "
                "devices_per_system"
            )
    for i, model in enumerate(models.values()):
        problem = _model_problem(model)
        if problem is not None:
            raise CatalogError(
                f"models.toml: $.models[{i}].{problem[0]} (id {model.id!r}): {problem[1]}"
            )
    _check_names(
        "models.toml", "models", [(m.id, (m.id, m.hf_repo, *m.aliases)) for m in models.values()]
    )
    _check_names("systems.toml", "systems", [(s.id, (s.id, *s.aliases)) for s in systems.values()])
    engines: dict[str, Engine] = {}
    if (root / "engines.toml").exists():  # absent: only the pooled default
        engines = _by_id(
            _decode(root / "engines.toml", EngineFile).engines, "engines.toml", "engines"
        )
    for i, engine in enumerate(engines.values()):
        problem = engine_problem(engine, set(accelerators))
        if problem is not None:
            raise CatalogError(
                f"engines.toml: $.engines[{i}].{problem[0]} (id {engine.id!r}): {problem[1]}"
            )
    return Catalog(accelerators=accelerators, systems=systems, models=models, engines=engines)
