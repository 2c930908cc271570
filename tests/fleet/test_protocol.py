"""A log row's benchmark protocol (fleet.perf.protocol): drawn lengths are read at their range's
mean, a benchmark of drawn lengths brings later waves in staggered under any scheduler, and an
InferenceX SGLang row's scheduler polls for new requests as its recipe sets."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays
from fleet.perf.closed_loop import BENCHMARK_WAVES, ctx_hold_steps
from fleet.perf.configs import make_configs
from fleet.perf.engines import engine_arrays
from fleet.perf.measured import MeasuredRuns, aggregated_runs, parse_row
from fleet.perf.model import estimate
from fleet.perf.protocol import INFERENCEX_RANGE_RATIO, mean_length, range_ratio
from fleet.perf.score import main as score_main
from fleet.perf.serving_recipes import SGLANG_RECV_RULES
from fleet.perf.types import Estimate
from tests.fleet.measured_runs import needs_runs

ROW = {
    "model_path": "Qwen/Qwen3-32B",
    "system": "h100_sxm",
    "backend": "sglang",
    "mode": "agg",
    "isl": "1024",
    "osl": "8192",
    "batch_size": "16",
    "tp_size": "2",
    "silicon_ttft_ms": "840.8",
    "silicon_tpot_ms": "16.5",
    "silicon_data_source": "source_file=x.csv; silicon_concurrency=16",
}
INFERENCEX_SOURCES = (
    "db-dump/2026-04-27; config_id=82; measured=2026-02-03; workflow_run_id=253; image",
    "source_file=2026-04-06.csv; model=GPT-OSS-120B; measured=2025-11-02; wip=False",
)


def _estimate(catalog: Catalog, arrays: CatalogArrays, **config: Any) -> Estimate:
    """``estimate`` of ``make_configs(catalog, **config)`` at ``arrays``."""
    return estimate(arrays, make_configs(catalog, **config))


@pytest.mark.parametrize("nominal", [1, 7, 1000, 1024, 8192])
@pytest.mark.parametrize("ratio", [0.5, 0.8, 1.0])
def test_mean_length_is_the_mean_of_the_draw(nominal: int, ratio: float) -> None:
    """The integers [int(r L), L] drawn uniformly, as the benchmark client draws them."""
    draws = np.arange(int(nominal * ratio), nominal + 1)
    assert abs(mean_length(nominal, ratio) - draws.mean()) <= 0.5


def test_inferencex_lengths() -> None:
    assert mean_length(1024, INFERENCEX_RANGE_RATIO) == 922
    assert mean_length(8192, INFERENCEX_RANGE_RATIO) == 7373
    assert mean_length(1024, 1.0) == 1024


@pytest.mark.parametrize("source", INFERENCEX_SOURCES)
def test_inferencex_results_draw_their_lengths(source: str) -> None:
    assert range_ratio({"silicon_data_source": source}) == INFERENCEX_RANGE_RATIO


def test_other_rows_keep_fixed_lengths_unless_they_say() -> None:
    assert range_ratio(ROW) == 1.0
    assert range_ratio({**ROW, "random_range_ratio": "0.5"}) == 0.5
    assert range_ratio({**ROW, "random_range_ratio": " "}) == 1.0
    # the row's own column wins over the source's
    assert (
        range_ratio({"silicon_data_source": INFERENCEX_SOURCES[0], "random_range_ratio": "1"})
        == 1.0
    )


@pytest.mark.parametrize("bad", ["0", "1.5", "-0.2", "half"])
def test_a_bad_ratio_is_the_rows_reason(catalog: Catalog, bad: str) -> None:
    reason = parse_row(catalog, {**ROW, "random_range_ratio": bad}, 2)
    assert isinstance(reason, str)
    assert reason.startswith("benchmark lengths: random_range_ratio")


def test_a_drawn_row_runs_at_its_mean_and_keeps_its_logged_lengths(catalog: Catalog) -> None:
    fixed = parse_row(catalog, ROW, 2)
    drawn = parse_row(catalog, {**ROW, "silicon_data_source": INFERENCEX_SOURCES[1]}, 3)
    assert not isinstance(fixed, str) and not isinstance(drawn, str)
    assert (fixed.isl, fixed.osl, fixed.lengths_vary) == (1024, 8192, False)
    assert (drawn.isl, drawn.osl, drawn.lengths_vary) == (922, 7373, True)
    assert (drawn.logged_isl, drawn.logged_osl) == (1024, 8192)


@needs_runs
def test_the_reference_runs_keep_their_series_keys(runs: MeasuredRuns) -> None:
    """The run series (and so the seeded held-out draws) are keyed by the logged lengths: every
    InferenceX run's configuration is at the mean, its key at the nominal length."""
    vary = runs.configs.lengths_vary
    assert 400 < vary.sum() < len(runs)
    assert np.all(runs.logged_lengths[vary, 0] > runs.configs.isl[vary])
    assert np.all(runs.logged_lengths[~vary, 0] == runs.configs.isl[~vary])


def test_drawn_lengths_stagger_a_prefill_first_schedulers_waves(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Under SGLang (prefill-first) a benchmark of drawn lengths reads as a mixed scheduler's:
    only the first wave is a burst, and the benchmark TPOT takes a whole wave's prefill; under a
    mixed scheduler (vLLM) it changes nothing."""
    sglang = engine_arrays(catalog, arrays, "sglang")
    mixed = sglang.with_scheduling(
        request_overhead_s=float(sglang.accelerators.request_overhead_s[0]), prefill_first=False
    )
    vllm = engine_arrays(catalog, arrays, "vllm")

    def run(a: CatalogArrays, vary: bool) -> Estimate:
        return _estimate(
            catalog, a, model="qwen3-32b", system="hgx-h100-8", tp=2, precision="fp8",
            batch=[4, 32, 128], isl=922, osl=922, lengths_vary=vary,
        )  # fmt: skip

    burst, drawn, as_mixed = run(sglang, False), run(sglang, True), run(mixed, False)
    assert np.all(drawn.ttft_burst_s < burst.ttft_burst_s)
    np.testing.assert_allclose(drawn.ttft_burst_s, as_mixed.ttft_burst_s)
    np.testing.assert_allclose(drawn.tpot_burst_s, drawn.tpot_s)
    assert np.all(burst.tpot_burst_s < burst.tpot_s)
    v_fixed, v_drawn = run(vllm, False), run(vllm, True)
    np.testing.assert_allclose(v_drawn.ttft_burst_s, v_fixed.ttft_burst_s)
    np.testing.assert_allclose(v_drawn.tpot_burst_s, v_fixed.tpot_burst_s)


def test_the_scorer_says_which_rows_ran_drawn_lengths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, out = tmp_path / "log.csv", tmp_path / "rows.csv"
    rows = [ROW, {**ROW, "silicon_data_source": INFERENCEX_SOURCES[0] + "; silicon_concurrency=16"}]
    with log.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(ROW))
        writer.writeheader()
        writer.writerows(rows)
    assert score_main([str(log), "--rows", str(out)]) == 0
    printed = capsys.readouterr().out
    drawn = [line for line in printed.splitlines() if line.startswith("benchmark lengths drawn")]
    assert len(drawn) == 1 and "n=    1 " in drawn[0]
    written = list(csv.DictReader(out.open()))
    assert [r["lengths_drawn"] for r in written] == ["False", "True"]
    assert all(not r["not_scored"] for r in written)


DEEPSEEK_B200 = {
    **ROW,
    "model_path": "deepseek-ai/DeepSeek-R1",
    "system": "b200_sxm",
    "gemm_quant_mode": "fp8_block",
    "moe_quant_mode": "fp8_block",
    "tp_size": "8",
    "isl": "1024",
    "osl": "1024",
}


@pytest.mark.parametrize(
    ("users", "tp", "expected"), [(4, 8, 10), (8, 8, 10), (16, 8, 30), (64, 8, 30), (32, 4, 10)]
)
def test_an_inferencex_sglang_row_polls_as_its_recipe_says(
    catalog: Catalog, users: int, tp: int, expected: int
) -> None:
    """InferenceX's DeepSeek-R1 FP8 B200 SGLang recipe: --scheduler-recv-interval 30 from 16
    users at tp 8, 10 below and at tp 4."""
    source = f"{INFERENCEX_SOURCES[0]}; silicon_concurrency={users}"
    row = {**DEEPSEEK_B200, "tp_size": str(tp), "silicon_data_source": source}
    run = parse_row(catalog, row, 2)
    assert not isinstance(run, str) and run.concurrency == users
    assert run.recv_interval == expected


@pytest.mark.parametrize(
    "change",
    [
        {"backend": "vllm"},  # another engine
        {"silicon_data_source": "source_file=x.csv; silicon_concurrency=32"},  # not InferenceX
        {"system": "h200_sxm"},  # its H200 recipe passes no interval
        {"attention_dp_size": "8", "tp_size": "1"},  # data-parallel attention: 1
    ],
)
def test_other_rows_poll_every_step(catalog: Catalog, change: dict[str, str]) -> None:
    source = f"{INFERENCEX_SOURCES[0]}; silicon_concurrency=32"
    run = parse_row(catalog, {**DEEPSEEK_B200, "silicon_data_source": source, **change}, 2)
    assert not isinstance(run, str)
    assert run.recv_interval == 1


def test_recv_rules_name_catalog_models_and_accelerators(catalog: Catalog) -> None:
    for model, precision, accelerator in SGLANG_RECV_RULES:
        assert model in catalog.models and accelerator in catalog.accelerators
        assert precision in ("bf16", "fp8", "fp4")


def test_the_poll_interval_delays_staggered_arrivals_only(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """A request arriving at a decoding replica waits (N - 1) / 2 decode steps for the poll;
    the burst that starts an idle replica and the TTFT floor do not; decode is unchanged."""
    sglang = engine_arrays(catalog, arrays, "sglang")

    qwen = dict(
        model="qwen3-32b", system="hgx-h100-8", tp=2, precision="fp8", batch=[4, 32, 128],
        isl=922, osl=922, lengths_vary=True,
    )  # fmt: skip
    every = _estimate(catalog, sglang, **qwen, recv_interval=1)
    thirty = _estimate(catalog, sglang, **qwen, recv_interval=30)
    np.testing.assert_allclose(thirty.ttft_floor_s, every.ttft_floor_s)
    np.testing.assert_allclose(thirty.tpot_burst_s, every.tpot_burst_s)
    staggered = 1.0 - 1.0 / BENCHMARK_WAVES  # drawn lengths: every wave after the first
    np.testing.assert_allclose(
        thirty.ttft_burst_s - every.ttft_burst_s, staggered * 14.5 * every.step_s, rtol=1e-9
    )


def test_a_poll_interval_below_one_is_refused(catalog: Catalog) -> None:
    with pytest.raises(InputError, match="recv_interval"):
        make_configs(catalog, model="qwen3-32b", accelerator="h100-sxm", recv_interval=0)


@pytest.mark.parametrize(("dp", "draft"), [(1, 3), (8, 1)])
def test_an_inferencex_mtp_image_marks_an_mtp_run(catalog: Catalog, dp: int, draft: int) -> None:
    """InferenceX ran its DeepSeek-R1 MTP recipes on B200 under TensorRT-LLM on their own image
    (release:1.2.0rc6.post3): 3 draft tokens, 1 with data-parallel attention. A 3-token draft has
    no published acceptance: the row names that; a 1-token draft is scored with the catalog's."""
    source = (
        "source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency=8; wip=False; "
        "image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3"
    )
    row = {
        **DEEPSEEK_B200, "backend": "trtllm", "silicon_data_source": source,
        "tp_size": "8" if dp == 1 else "1", "attention_dp_size": str(dp),
    }  # fmt: skip
    run = parse_row(catalog, row, 2)
    if draft > 1:
        assert isinstance(run, str) and run.startswith("MTP draft of 3 tokens:")
    else:
        assert not isinstance(run, str)
        acceptance = catalog.models["deepseek-r1"].mtp_acceptance
        assert (run.spec_draft_tokens, run.spec_acceptance) == (1, acceptance)
    # The same run under the non-MTP recipe's image drafts nothing.
    plain = parse_row(catalog, {**row, "silicon_data_source": source.replace("post3", "post2")}, 3)
    assert not isinstance(plain, str) and plain.spec_draft_tokens == 0


def test_a_held_prompt_waits_for_its_batch_or_its_clock() -> None:
    """closed_loop.ctx_hold_steps: counted from the first held prompt, the mean prompt waits half
    the fill time when the batch fills in time, else about the timeout (all of it when prompts
    are rare, half of it when many arrive); on a free-running clock, half a period at most."""
    lam = np.array([0.001, 1.0, 0.001, 1.0, 0.5])
    more = np.array([7.0, 7.0, 7.0, 7.0, 0.0])
    timeout = np.array([40, 40, 60, 60, 60])
    periodic = np.array([False, False, True, True, True])
    held = ctx_hold_steps(more, timeout, periodic, lam)
    assert held[0] == pytest.approx(40 * (1 + 0.02) / 1.04)  # rare prompts: about the timeout
    assert held[1] == pytest.approx(3.5)  # the batch fills in 7 steps: 3.5 on average
    assert held[2] == pytest.approx(30.0)  # the clock's half period
    assert held[3] == pytest.approx(7.0 - 49.0 / 120.0)  # min(U x 60, 7) on average
    assert held[4] == 0.0  # nothing held


INFERENCEX_TRT = "db-dump/2026-04-27; config_id=9; silicon_concurrency={users}; workflow_run_id=1"


@pytest.mark.parametrize(
    ("change", "users", "expected"),
    [
        # DeepSeek-R1 with attention DP: every rank's prompt, or the 60-iteration clock
        (
            {"tp_size": "1", "attention_dp_size": "8"},
            64,
            (8 * (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6 + 1 / 7), 60, True),
        ),
        ({"tp_size": "1", "attention_dp_size": "8"}, 8, (0.0, 0, False)),  # one user per rank
        # FP8 without it at 1k/1k and 64-255 users: 0.8 of an 8,192-token budget, 40 iterations
        ({}, 64, (7, 40, False)),
        ({}, 16, (0.0, 0, False)),
        ({"isl": "8192"}, 64, (0.0, 0, False)),
    ],
)
def test_an_inferencex_trtllm_row_holds_prompts_as_its_recipe_says(
    catalog: Catalog, change: dict[str, str], users: int, expected: tuple[float, int, bool]
) -> None:
    row = {
        **DEEPSEEK_B200,
        "backend": "trtllm",
        "silicon_data_source": INFERENCEX_TRT.format(users=users),
        **change,
    }
    run = parse_row(catalog, row, 2)
    assert not isinstance(run, str)
    hold = run.ctx_hold
    assert (hold.more, hold.timeout, hold.periodic) == pytest.approx(expected)


def test_llama_below_tp8_waits_for_a_batch_at_1k1k(catalog: Catalog) -> None:
    """InferenceX's Llama 3.1 70B TensorRT-LLM recipes on B200: 0.9 of 16,384 tokens or 20
    iterations at 1k/1k below tp 8; nothing at tp 8 or other lengths; not outside InferenceX."""
    row = {
        **ROW, "model_path": "meta-llama/Llama-3.1-70B-Instruct", "system": "b200_sxm",
        "backend": "trtllm", "isl": "1024", "osl": "1024", "tp_size": "2",
        "gemm_quant_mode": "fp8", "silicon_data_source": INFERENCEX_TRT.format(users=4),
    }  # fmt: skip
    held = parse_row(catalog, row, 2)
    assert not isinstance(held, str) and held.ctx_hold.timeout == 20
    assert held.ctx_hold.more == math.ceil((0.9 * 16384 - 4) / held.isl) - 1
    for change in (
        {"tp_size": "8"},
        {"osl": "8192"},
        {"silicon_data_source": "x; silicon_concurrency=4"},
    ):
        other = parse_row(catalog, {**row, **change}, 3)
        assert not isinstance(other, str) and other.ctx_hold.timeout == 0


def test_holding_prompts_delays_staggered_arrivals_only(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    trt = engine_arrays(catalog, arrays, "trtllm")

    llama = dict(
        model="llama-3.1-70b", system="hgx-b200-8", tp=2, precision="fp8", batch=[4, 64],
        isl=922, osl=922, lengths_vary=True, ctx_hold_requests=15,
    )  # fmt: skip
    none = _estimate(catalog, trt, **llama, ctx_hold_iters=0)
    held = _estimate(catalog, trt, **llama, ctx_hold_iters=20)
    np.testing.assert_allclose(held.ttft_floor_s, none.ttft_floor_s)
    np.testing.assert_allclose(held.tpot_burst_s, none.tpot_burst_s)
    assert np.all(held.ttft_burst_s > none.ttft_burst_s)


@pytest.mark.parametrize(
    ("image", "users", "lengths", "backend"),
    [
        ("release:1.2.0rc6.post2", 64, ("1024", "1024"), "TRTLLM"),
        ("release:1.2.0rc6.post2", 256, ("1024", "1024"), "DEEPGEMM"),
        ("release:1.2.0rc6.post2", 256, ("8192", "1024"), "TRTLLM"),
        ("release:1.1.0rc2.post2", 64, ("1024", "1024"), ""),  # an earlier revision: no choice
    ],
)
def test_the_fp8_b200_recipe_chooses_its_moe_backend(
    catalog: Catalog, image: str, users: int, lengths: tuple[str, str], backend: str
) -> None:
    """InferenceX's DeepSeek-R1 FP8 B200 TensorRT-LLM recipe of the 1.2.0rc6.post2 image runs
    TRTLLM-Gen MoE kernels, DeepGEMM at 1k/1k and 1k/8k from 256 users; a TRTLLM-Gen run pays no
    time per expert held."""
    source = (
        f"source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency={users}; "
        f"wip=False; image=nvcr.io#nvidia/tensorrt-llm/{image}"
    )
    row = {
        **DEEPSEEK_B200, "backend": "trtllm", "silicon_data_source": source,
        "isl": lengths[0], "osl": lengths[1],
    }  # fmt: skip
    run = parse_row(catalog, row, 2)
    assert not isinstance(run, str) and run.moe_backend == backend
    configs = aggregated_runs(catalog, [run]).configs
    assert bool(configs.moe_held_expert_time[0]) is (backend != "TRTLLM")


def test_a_kernel_without_the_held_expert_time_steps_faster(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """The block-scaled FP8 MoE time per expert held (TensorRT-LLM's DeepGEMM on B200) is charged
    only where the configuration's kernel pays it."""
    trt = engine_arrays(catalog, arrays, "trtllm")

    deepseek = dict(
        model="deepseek-r1", system="hgx-b200-8", tp=8, precision="fp8", batch=[4, 64],
        isl=1024, osl=1024,
    )  # fmt: skip
    deepgemm = _estimate(catalog, trt, **deepseek, moe_held_expert_time=True)
    trtllm_gen = _estimate(catalog, trt, **deepseek, moe_held_expert_time=False)
    # 256 experts held per rank at ep 1, in each MoE layer of a forward pass
    per_expert = trt.accelerators.block_fp8_moe_local_expert_s[
        list(catalog.accelerators).index("b200")
    ]
    layers = trt.models.moe_layers[list(catalog.models).index("deepseek-r1")]
    assert per_expert > 0.0
    np.testing.assert_allclose(deepgemm.step_s - trtllm_gen.step_s, per_expert * layers * 256)
