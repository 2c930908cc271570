"""The checked-in catalogs: they decode, hold exactly the required entries, cite a source for every
figure and agree with each other; a broken file is reported by file and field."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from fleet.catalog import Catalog, CatalogError, UnknownIdError, load_catalog
from fleet.catalog.load import DATA_DIR
from fleet.catalog.schema import ARCHITECTURE_FIELDS, PRECISIONS, Frozen
from fleet.errors import InputError

ACCELERATOR_IDS = {
    "h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300", "mi300x", "mi325x",
    "tpu-v5e", "tpu-v5p", "tpu-v6e", "gaudi3", "wse3", "groq-lpu", "a100-sxm", "l40s",
    "rtx-pro-6000-server", "b60",
}  # fmt: skip
SYSTEM_IDS = {
    "hgx-h100-8", "hgx-h200-8", "hgx-b200-8", "gb200-nvl72", "hgx-b300-8", "gb300-nvl72",
    "mi300x-8", "mi325x-8",
    "tpu-v5e-8", "tpu-v5e-16", "tpu-v5p-4chip", "tpu-v5p-64chip", "tpu-v6e-8", "tpu-v6e-64",
    "gaudi3-8", "cs3", "groqrack", "hgx-a100-8", "l40s-8", "rtx-pro-6000-server-8",
    "b60-8",
}  # fmt: skip
MODEL_IDS = {
    "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-32b", "qwen3-30b-a3b",
    "qwen3.5-397b-a17b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b", "deepseek-v3", "deepseek-r1",
    "gpt-oss-20b", "gpt-oss-120b", "kimi-k2.5", "glm-5", "minimax-m2.5", "llama-4-maverick",
    "qwen3.5-122b-a10b", "qwen3.5-35b-a3b", "qwen3.5-27b", "llama-4-scout", "qwen3-8b",
    "mixtral-8x7b", "mixtral-8x22b", "qwen3-0.6b", "qwen3-1.7b", "qwen3-vl-4b", "mimo-7b",
    "deepseek-v3.2", "deepseek-v4-flash", "deepseek-v4-pro",
    "nemotron-3-nano-30b-a3b", "nemotron-h-56b", "nemotron-3-super-120b-a12b",
    "nemotron-3-ultra-550b-a55b",
    "gemma-4-26b-a4b", "gemma-4-31b", "mimo-v2-flash",
}  # fmt: skip
SRAM_ACCELERATORS = {"wse3", "groq-lpu"}
MLA_MODELS = {"deepseek-v3", "deepseek-r1", "kimi-k2.5", "glm-5", "deepseek-v3.2"}


def _numeric_paths(value: Frozen, prefix: str = "") -> Iterator[str]:
    """Dotted paths of every numeric field that is set, recursing into nested tables."""
    for field in msgspec.structs.fields(value):
        item = getattr(value, field.name)
        path = f"{prefix}{field.name}"
        if isinstance(item, Frozen):
            yield from _numeric_paths(item, f"{path}.")
        elif isinstance(item, int | float) and not isinstance(item, bool):
            yield path


def _covered(path: str, sources: dict[str, str], grouped: frozenset[str]) -> bool:
    """A source for ``a.b`` is keyed ``a.b`` or ``a``, or ``architecture`` for its fields."""
    parts = path.split(".")
    prefixes = {".".join(parts[: i + 1]) for i in range(len(parts))}
    return bool(prefixes & sources.keys()) or (parts[0] in grouped and "architecture" in sources)


def test_ids_are_exactly_the_required_ones(catalog: Catalog) -> None:
    assert set(catalog.accelerators) == ACCELERATOR_IDS
    assert set(catalog.systems) == SYSTEM_IDS
    assert set(catalog.models) == MODEL_IDS


@pytest.mark.parametrize("table", ["accelerators", "systems", "models"])
def test_every_numeric_field_has_a_source(catalog: Catalog, table: str) -> None:
    grouped = ARCHITECTURE_FIELDS if table == "models" else frozenset()
    missing = [
        f"{entry.id}: {path}"
        for entry in getattr(catalog, table).values()
        for path in _numeric_paths(entry)
        if not _covered(path, entry.sources, grouped)
    ]
    assert not missing, f"numeric fields without a source: {missing}"


@pytest.mark.parametrize("table", ["accelerators", "systems", "models"])
def test_every_source_key_names_a_field_and_says_something(catalog: Catalog, table: str) -> None:
    for entry in getattr(catalog, table).values():
        names = {f.name for f in msgspec.structs.fields(entry)}
        if table == "models":
            names.add("architecture")
            names.add("moe_routing")  # the source of moe.routing (fleet.catalog.load requires it)
        assert set(entry.sources) <= names, f"{entry.id}: {set(entry.sources) - names}"
        assert all(len(text) >= 10 for text in entry.sources.values()), entry.id


def test_estimates_and_approximations_say_so(catalog: Catalog) -> None:
    for acc in catalog.accelerators.values():
        assert "estimate" in acc.sources["scale_up_latency_us"], acc.id
        price = acc.sources["usd_per_hour"]
        assert "estimate" in price or "pricing" in price, acc.id
    for system in catalog.systems.values():
        assert "estimate" in system.sources["scale_out_latency_us"], system.id
    for model in catalog.models.values():
        assert model.sources["quality"].startswith("approximation"), model.id


def test_systems_and_accelerators_reference_each_other(catalog: Catalog) -> None:
    for system in catalog.systems.values():
        assert system.accelerator in catalog.accelerators
        assert system.scale_up_domain_devices <= system.devices_per_system
    for acc_id in catalog.accelerators:
        assert catalog.default_system(acc_id).accelerator == acc_id


def test_memory_kinds(catalog: Catalog) -> None:
    for acc in catalog.accelerators.values():
        assert acc.memory_kind == ("sram" if acc.id in SRAM_ACCELERATORS else "hbm"), acc.id
    assert catalog.accelerator("wse3").memory_gb == 44
    assert catalog.accelerator("wse3").memory_bandwidth_tb_per_s == 21_000
    assert catalog.accelerator("groq-lpu").memory_gb == pytest.approx(0.23)
    assert catalog.accelerator("groq-lpu").memory_bandwidth_tb_per_s == 80


def test_precisions_are_consistent_with_peak_flops(catalog: Catalog) -> None:
    for acc in catalog.accelerators.values():
        assert "bf16" in acc.native_precisions, acc.id
        assert not set(acc.native_precisions) & set(acc.weight_only_precisions), acc.id
        for precision in PRECISIONS:
            has_flops = acc.peak_tflops.get(precision) is not None
            assert has_flops == (precision in acc.native_precisions), (acc.id, precision)
        # Narrower formats never run slower than bf16 on the same tensor cores.
        for precision in acc.native_precisions:
            assert acc.peak_tflops.get(precision) >= acc.peak_tflops.bf16, (acc.id, precision)
    hopper = catalog.accelerator("h100-sxm")
    assert hopper.runs("fp4") and "fp4" not in hopper.native_precisions


def test_model_architectures_are_consistent(catalog: Catalog) -> None:
    for model in catalog.models.values():
        assert model.num_attention_heads % model.num_kv_heads == 0, model.id
        assert model.sliding_window_layers <= model.num_layers, model.id
        assert (model.sliding_window is None) == (model.sliding_window_layers == 0), model.id
        assert (model.attention == "mla") == (model.id in MLA_MODELS), model.id
        if model.moe is not None:
            assert model.moe.experts_per_token <= model.moe.num_experts, model.id
            assert model.moe.dense_layers < model.num_layers, model.id
        assert model.published_active_params_b <= model.published_total_params_b, model.id


def test_released_precisions(catalog: Catalog) -> None:
    released = {m.id: m.native_precision for m in catalog.models.values()}
    assert released["deepseek-v3"] == released["deepseek-r1"] == "fp8"
    assert released["gpt-oss-120b"] == released["gpt-oss-20b"] == "fp4"
    assert released["kimi-k2.5"] == "fp4"
    assert released["llama-3.1-70b"] == "bf16"


def test_unknown_id_lists_the_known_ones(catalog: Catalog) -> None:
    with pytest.raises(UnknownIdError) as err:
        catalog.accelerator("h300")
    message = str(err.value)
    assert "unknown accelerator 'h300'" in message
    assert all(acc_id in message for acc_id in ACCELERATOR_IDS)
    assert isinstance(err.value, InputError)
    with pytest.raises(UnknownIdError, match=re.escape("llama-3.1-8b")):
        catalog.model("llama-5")
    with pytest.raises(UnknownIdError, match="hgx-h100-8"):
        catalog.system("dgx-h100")


def _broken_copy(tmp_path: Path, file: str, old: str, new: str) -> Path:
    for name in ("accelerators.toml", "systems.toml", "models.toml"):
        shutil.copy(DATA_DIR / name, tmp_path / name)
    target = tmp_path / file
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))
    return tmp_path


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        (
            "accelerators.toml",
            "memory_gb = 85.52\n",
            "memory_gb = -85.52\n",
            "memory_gb` (id 'h100-sxm')",
        ),
        ("accelerators.toml", "bf16 = 989.4\n", "bf16 = 989.4\nfp6 = 1.0\n", "fp6"),
        ("accelerators.toml", 'memory_kind = "hbm"', 'memory_kind = "dram"', "memory_kind"),
        ("systems.toml", "devices_per_system = 8\n", "devices_per_system = 0\n", "devices_per"),
        ("systems.toml", 'accelerator = "h100-sxm"', 'accelerator = "h100-pcie"', "accelerator"),
        ("models.toml", "num_layers = 32\n", 'num_layers = "32"\n', "num_layers"),
        ("models.toml", "kv_lora_rank = 512\n", "", "kv_lora_rank"),
        ("models.toml", "sliding_window_layers = 12\n", "", "sliding_window (id 'gpt-oss-20b')"),
        (
            "models.toml",
            "num_kv_heads = 8\n",
            "num_kv_heads = 7\n",
            "num_kv_heads (id 'llama-3.1-8b'): must divide",
        ),
        ("models.toml", 'id = "llama-3.1-70b"', 'id = "llama-3.1-8b"', "duplicate id"),
        (
            "models.toml",
            'aliases = ["zhipuai/GLM-5"',
            'aliases = ["deepseek-ai/DeepSeek-R1"',
            "$.models[12].aliases (id 'glm-5'): 'deepseek-ai/DeepSeek-R1' already names",
        ),
        (
            "systems.toml",
            'aliases = ["h200_sxm"]',
            'aliases = ["h100_sxm"]',
            "$.systems[1].aliases (id 'hgx-h200-8'): 'h100_sxm' already names 'hgx-h100-8'",
        ),
        ("models.toml", "[[models]]\n", "[[models]\n", "not valid TOML"),
        (
            "accelerators.toml",
            'native_precisions = ["bf16", "int8"]\nweight_only_precisions = ["int4"]',
            'native_precisions = ["bf16", "fp8", "int8"]\nweight_only_precisions = ["int4"]',
            "native_precisions (id 'a100-sxm'): fp8 has no kernel.gemm_flops_fraction figure",
        ),
        (
            "accelerators.toml",
            'basis = "kernel-transfer"\ntransfer_from = ["h100-sxm", "h200-sxm"]\ncaveats = [\n'
            '  "figures transferred from Hopper through vLLM',
            'basis = "hopper-transfer-estimate"\ntransfer_from = ["h100-sxm", "h200-sxm"]\n'
            'caveats = [\n  "figures transferred from Hopper through vLLM',
            "family_kernel (id 'b60'): only for basis 'kernel-transfer'",
        ),
        (
            "models.toml",
            'moe_routing = "aiconfigurator-core 0.12.0 (PyPI, Apache-2.0) serves this '
            "architecture with power-law expert loads: sdk/config.py workload_distribution = "
            "power_law, sdk/models/moe.py (MOE family: Qwen3MoeForCausalLM, GptOssForCausalLM, "
            'MiniMaxM2ForCausalLM, MixtralForCausalLM) alpha 1.2"\n',
            "",
            "sources.moe_routing (id 'qwen3-30b-a3b'): required when moe.routing is set",
        ),
        ("models.toml", 'routing = "power_law_1.2"', 'routing = "zipf"', "routing"),
        (
            "accelerators.toml",
            "power_law_1_01 = [1.03, 1.13,",
            "power_law_1_01 = [1.13,",
            "power_law_1_01",
        ),
        (
            "accelerators.toml",
            "power_law_1_01 = [1.03, 1.13,",
            "power_law_1_01 = [0.5, 1.13,",
            "power_law_1_01",
        ),
    ],
)
def test_a_broken_file_is_reported_by_file_and_field(
    tmp_path: Path, file: str, old: str, new: str, expected: str
) -> None:
    root = _broken_copy(tmp_path, file, old, new)
    with pytest.raises(CatalogError) as err:
        load_catalog(root)
    message = str(err.value)
    assert message.startswith(f"{file}: ")
    assert expected in message
    assert "\n" not in message


def test_the_unbroken_copy_loads(tmp_path: Path) -> None:
    root = _broken_copy(tmp_path, "models.toml", "quality = 16\n", "quality = 16\n")
    assert set(load_catalog(root).models) == MODEL_IDS


def test_models_and_systems_answer_to_their_log_names(catalog: Catalog) -> None:
    """Benchmark logs name a model by a checkpoint's repo and a system by its own id."""
    assert catalog.model_named("deepseek-r1").id == "deepseek-r1"
    assert catalog.model_named("deepseek-ai/DeepSeek-R1").id == "deepseek-r1"
    assert catalog.model_named("nvidia/DeepSeek-R1-NVFP4").id == "deepseek-r1"
    assert catalog.model_named("meta-llama/Llama-3.1-70B").id == "llama-3.1-70b"
    assert catalog.system_named("b200_sxm").id == "hgx-b200-8"
    assert catalog.system_named("gb200-nvl72").id == "gb200-nvl72"
    assert catalog.system_named("b300_sxm").id == "hgx-b300-8"
    assert catalog.system_named("gb300").id == "gb300-nvl72"
    # a checkpoint of an architecture the catalog lacks (Nano's blocks with an MTP module)
    with pytest.raises(
        UnknownIdError, match=r"unknown model 'nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4'"
    ):
        catalog.model_named("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")
    assert catalog.system_named("a100_sxm").id == "hgx-a100-8"
    assert catalog.system_named("l40s").id == "l40s-8"
    with pytest.raises(UnknownIdError, match="unknown system 'a30'"):
        catalog.system_named("a30")
