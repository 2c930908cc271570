"""Words for estimates: why a configuration has no result, and a row as labelled SI-free figures.

Faces (CLI, API) and the planner's infeasibility reports use these so that a capacity planner
reads "tp 3 does not divide the 64 attention heads of llama-3.1-70b", not a code.
"""

from __future__ import annotations

from fleet.catalog import PRECISIONS, Catalog, Model
from fleet.perf.types import Configs, Estimate, Problem


def layout_label(configs: Configs, i: int, *, compact: bool = False) -> str:
    """``tp8 pp1 dp1 ep1 fp8 b64`` (+ ``spec3@0.7``); ``compact`` drops degrees equal to 1."""
    degrees = [
        f"{name}{int(getattr(configs, name)[i])}"
        for name in ("tp", "pp", "dp", "ep")
        if not compact or name == "tp" or getattr(configs, name)[i] != 1
    ]
    label = f"{' '.join(degrees)} {PRECISIONS[configs.weight_precision[i]]} b{configs.batch[i]}"
    if configs.spec_draft_tokens[i] > 0:
        label += f" spec{configs.spec_draft_tokens[i]}@{configs.spec_acceptance[i]:g}"
    return label


def describe_problem(catalog: Catalog, configs: Configs, est: Estimate, i: int) -> str | None:
    """One line saying why row ``i`` has no usable estimate; None when it is fine."""
    code = Problem(int(est.problem[i]))
    if code == Problem.OK:
        return None
    model = list(catalog.models.values())[configs.model[i]]
    system = list(catalog.systems.values())[configs.system[i]]
    acc = catalog.accelerators[system.accelerator]
    tp, pp, dp, ep = (int(x[i]) for x in (configs.tp, configs.pp, configs.dp, configs.ep))
    if code == Problem.BAD_LAYOUT:
        return _bad_layout(model, configs, i, tp, pp, dp, ep)
    if code == Problem.OVER_SCALE_UP:
        return (
            f"layout: tp x dp = {tp * dp} devices exceeds the scale-up domain of {system.id} "
            f"({system.scale_up_domain_devices} devices) and is not a whole number of domains; "
            "a stage spans systems only in whole domains"
        )
    if code == Problem.PRECISION_UNSUPPORTED:
        wp = PRECISIONS[configs.weight_precision[i]]
        kp = PRECISIONS[configs.kv_precision[i]]
        if not acc.runs(wp):
            return f"precision: {acc.id} runs {wp} weights neither natively nor weight-only"
        return f"kv precision: {acc.id} has no native {kp} support for the KV cache"
    need = est.memory_bytes_per_device[i] / 1e9
    usable = est.usable_bytes_per_device[i] / 1e9
    return (
        f"does not fit: {model.id} at {layout_label(configs, i)} needs {need:.1f} GB per device "
        f"(weights {est.weight_bytes_per_device[i] / 1e9:.1f}, "
        f"KV {est.kv_bytes_per_device[i] / 1e9:.1f}, "
        f"workspace {est.workspace_bytes_per_device[i] / 1e9:.1f}) of {usable:.1f} GB usable on "
        f"{acc.id}; largest batch that fits: {int(est.max_batch[i])}"
    )


def _bad_layout(model: Model, configs: Configs, i: int, tp: int, pp: int, dp: int, ep: int) -> str:
    if min(tp, pp, dp, ep) < 1:
        return "layout: tp, pp, dp and ep must be >= 1"
    if configs.batch[i] < 1 or configs.isl[i] < 1 or configs.osl[i] < 1:
        return "batch, isl and osl must be >= 1"
    if not 0 <= configs.prefix_cached_tokens[i] < configs.isl[i]:
        return "prefix_cached_tokens: must be >= 0 and below isl"
    if configs.spec_draft_tokens[i] < 0 or not 0 <= configs.spec_acceptance[i] <= 1:
        return "speculative decoding: draft tokens must be >= 0 and acceptance in [0, 1]"
    if model.num_attention_heads % tp:
        heads = model.num_attention_heads
        return f"tp: {tp} does not divide the {heads} attention heads of {model.id}"
    if model.mla is None and model.num_kv_heads % tp and tp % model.num_kv_heads:
        return (
            f"tp: {tp} neither divides nor is a multiple of the {model.num_kv_heads} KV heads "
            f"of {model.id}"
        )
    sw = model.sliding_attention
    if sw is not None and sw.num_attention_heads % tp:
        heads = sw.num_attention_heads
        return f"tp: {tp} does not divide the {heads} heads of {model.id}'s sliding layers"
    if sw is not None and sw.num_kv_heads % tp and tp % sw.num_kv_heads:
        return (
            f"tp: {tp} neither divides nor is a multiple of the {sw.num_kv_heads} KV heads of "
            f"{model.id}'s sliding layers"
        )
    if pp > model.num_layers:
        return f"pp: {pp} stages exceed the {model.num_layers} layers of {model.id}"
    if model.moe is None:
        return f"ep: {model.id} is dense; ep must be 1"
    if model.moe.num_experts % ep:
        return f"ep: {ep} does not divide the {model.moe.num_experts} experts of {model.id}"
    return f"ep: {ep} does not divide the tp x dp = {tp * dp} devices of a stage"
