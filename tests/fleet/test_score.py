"""Scoring against a serving-benchmark log (fleet.perf.score, fleet.perf.measured.read_log): every
row is scored the way its benchmark ran it or counted under the reason it is not; the reference
runs score as the calibration computes them."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest

from fleet.catalog import PRECISIONS, Catalog
from fleet.errors import InputError
from fleet.perf import calibrate
from fleet.perf.arrays import build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.engines import engine_arrays
from fleet.perf.measured import QUANT_PRECISIONS, load_measured, read_log
from fleet.perf.model import estimate
from fleet.perf.score import main, queued, score, summaries
from tests.fleet.measured_runs import MEASURED_CSV, needs_runs

HEADER = (
    "silicon_data_source,backend,model_path,system,mode,isl,osl,gemm_quant_mode,moe_quant_mode,"
    "batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,"
    "prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,"
    "prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,"
    "decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,"
    "silicon_ttft_ms,silicon_tpot_ms"
)
# Invented figures in the log's format (the scorer's arithmetic, not a measurement).
ROWS = {
    "disagg": "silicon_concurrency=64,trtllm,nvidia/DeepSeek-R1-NVFP4,gb200,disagg,8192,1024,"
    "nvfp4,nvfp4,,,,,,,1,2,1,1,4,1,4,16,1,1,1,16,1,16,900,25",
    "agg": "silicon_concurrency=32,vllm,meta-llama/Llama-3.1-70B,b200_sxm,agg,1024,1024,fp8,fp8,"
    "32,4,1,,1,1,,,,,,,,,,,,,,,80,12",
    "per-rank batch": ",sglang,deepseek-ai/DeepSeek-R1,h200_sxm,agg,1024,1024,fp8,fp8,16,1,1,8,"
    "1,8,,,,,,,,,,,,,,,300,40",
    "unknown system": "silicon_concurrency=32,vllm,meta-llama/Llama-3.1-70B,a30,agg,1024,"
    "1024,fp8,fp8,32,4,1,,1,1,,,,,,,,,,,,,,,80,12",
    "unknown model": "silicon_concurrency=32,sglang,"
    "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4,b200_sxm,agg,1024,1024,fp8,fp8_block,32,4,1,,1,1,,,,,,,,,,,,,,,80,12",
    "unknown quantization": "silicon_concurrency=32,sglang,Qwen/Qwen3-32B,b200_sxm,agg,1024,1024,"
    "w4a8_awq,w4a8_awq,32,4,1,,1,1,,,,,,,,,,,,,,,80,12",
    "weights do not fit": "silicon_concurrency=32,sglang,deepseek-ai/DeepSeek-R1,b200_sxm,agg,"
    "1024,1024,fp8,fp8,32,1,1,,1,1,,,,,,,,,,,,,,,80,12",
    # the disaggregated row above without its worker counts (and per-rank batch)
    "no workers": "silicon_concurrency=64,trtllm,nvidia/DeepSeek-R1-NVFP4,gb200,disagg,8192,1024,"
    "nvfp4,nvfp4,,,,,,,,,1,1,4,1,4,,,16,1,1,1,16,900,25",
}


def _log(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "log.csv"
    path.write_text("\n".join([HEADER, *(ROWS[n] for n in names)]) + "\n")
    return path


def test_every_row_is_scored_or_counted_under_its_reason(tmp_path: Path, catalog: Catalog) -> None:
    result = score(catalog, _log(tmp_path, *ROWS))
    s = result.scored
    assert result.rows == len(ROWS)
    assert sorted(s.line.tolist()) == [2, 3, 4]
    assert dict(zip(s.line.tolist(), s.mode.tolist(), strict=True)) == {
        2: "disaggregated", 3: "aggregated", 4: "aggregated",
    }  # fmt: skip
    assert dict(zip(s.line.tolist(), s.accelerator.tolist(), strict=True)) == {
        2: "gb200", 3: "b200", 4: "h200-sxm",
    }  # fmt: skip
    assert [kind for _, kind, _ in result.uncovered] == [
        "unknown system 'a30'",
        "unknown model 'nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4'",
        "unknown quantization 'w4a8_awq' (gemm_quant_mode)",
        "does not fit (deepseek-r1 on hgx-b200-8)",
        "disaggregated row without prefill_num_workers and decode_num_workers",
    ]
    # not read as one worker of each kind: the row names no deployment
    assert "is not recorded" in result.uncovered[-1][2]
    assert result.coverage == pytest.approx(3 / 8)
    assert np.all(np.isfinite(s.tpot) & (s.tpot > 0) & np.isfinite(s.tput) & (s.tput > 0))


def test_concurrency_without_a_source_is_the_per_rank_batch_times_the_ranks(
    tmp_path: Path, catalog: Catalog
) -> None:
    log = read_log(catalog, _log(tmp_path, "per-rank batch", "agg"))
    assert log.aggregated.configs.batch.tolist() == [16 * 8, 32]
    fp8 = PRECISIONS.index("fp8")
    assert log.aggregated.configs.weight_precision.tolist() == [fp8, fp8]
    assert log.aggregated.model_ids == ("deepseek-r1", "llama-3.1-70b")


def test_a_disaggregated_row_decodes_without_prefill_interference(
    tmp_path: Path, catalog: Catalog
) -> None:
    """Its TPOT is the decode replica's step alone: below the same layout's aggregated TPOT at
    the same batch, which carries the replacement prompts' prefill."""
    result = score(catalog, _log(tmp_path, "disagg"))
    decode = make_configs(
        catalog, model=["deepseek-r1"], system=["gb200-nvl72"], precision=["fp4"],
        tp=[1], pp=[1], dp=[16], ep=[16], batch=[64], isl=[8192], osl=[1024],
    )  # fmt: skip
    agg = estimate(engine_arrays(catalog, build_arrays(catalog), "trtllm"), decode)
    assert result.scored.tpot[0] < agg.tpot_burst_s[0]
    assert result.scored.tpot[0] == pytest.approx(agg.step_s[0] / agg.tokens_per_step[0])


def test_users_beyond_the_rate_wait_before_their_first_token() -> None:
    one = np.array([1.0])
    cycle = 0.2 + 100 * 0.01
    slots_rate = 8 / cycle
    tpot, ttft, tput = queued(0.01 * one, 0.2 * one, slots_rate * one, 8 * one, 100 * one, 2 * one)
    assert ttft[0] == pytest.approx(0.2)
    assert tput[0] == pytest.approx(8 * 100 / cycle / 2)
    tpot, ttft, tput = queued(0.01 * one, 0.2 * one, slots_rate * one, 24 * one, 100 * one, 2 * one)
    assert tpot[0] == pytest.approx(0.01)
    assert ttft[0] == pytest.approx(0.2 + 2 * cycle)  # two whole request cycles in the queue
    # Throughput is the slots' own: the queue adds waiting, not work.
    assert tput[0] == pytest.approx(8 * 100 / cycle / 2)
    # A prefill side completing 2 requests/s bounds 8 users too: TTFT = 8 / 2 - decode time.
    tpot, ttft, tput = queued(0.01 * one, 0.2 * one, 2 * one, 8 * one, 100 * one, 2 * one)
    assert ttft[0] == pytest.approx(8 / 2 - 1.0)
    assert tput[0] == pytest.approx(2 * 100 / 2)


def test_the_strict_loader_refuses_what_the_log_reader_skips(
    tmp_path: Path, catalog: Catalog
) -> None:
    with pytest.raises(InputError, match=r"row 2: unknown system 'a30'"):
        load_measured(catalog, _log(tmp_path, "unknown system"))
    with pytest.raises(InputError, match=r"row 2: a disaggregated run"):
        load_measured(catalog, _log(tmp_path, "disagg"))


def test_the_command_prints_coverage_and_writes_every_row(
    tmp_path: Path, catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.csv"
    assert main([str(_log(tmp_path, *ROWS)), "--rows", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("coverage: 3 of 8 rows scored (37.5%)")
    assert "not scored, 1 rows: unknown system 'a30'" in printed
    rows = list(csv.DictReader(out.open()))
    assert [int(r["line"]) for r in rows] == list(range(2, 10))
    assert rows[3]["not_scored"] == "unknown system 'a30'"
    assert rows[0]["mode"] == "disaggregated" and not rows[0]["not_scored"]
    assert main([str(tmp_path / "absent.csv")]) == 2
    capsys.readouterr()
    assert main([str(_log(tmp_path, *ROWS)), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["rows"], doc["scored"]) == (8, 3)
    assert doc["not_scored"]["unknown system 'a30'"] == 1
    assert doc["groups"][0]["group"] == "all" and doc["groups"][0]["rows"] == 3


def test_rows_another_log_holds_are_grouped_as_in_sample(
    tmp_path: Path, catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--seen FIT.csv``: the log's rows FIT holds (the same measurement, its figures written
    another way) are a group of their own, the rest another, and a ``seen`` column says which."""
    log = _log(tmp_path, "disagg", "agg", "per-rank batch")
    fit = tmp_path / "fit.csv"
    # the "agg" row with its TTFT written as 80.000 and its columns in another order
    header, row = HEADER.split(","), ROWS["agg"].split(",")
    fields = dict(zip(header, row, strict=True)) | {"silicon_ttft_ms": "80.000"}
    order = sorted(fields)
    fit.write_text(",".join(order) + "\n" + ",".join(fields[k] for k in order) + "\n")
    result = score(catalog, log, seen=fit)
    seen = dict(zip(result.scored.line.tolist(), result.scored.seen.tolist(), strict=True))
    assert seen == {2: False, 3: True, 4: False}
    out = tmp_path / "rows.csv"
    assert main([str(log), "--seen", str(fit), "--rows", str(out)]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"also in the --seen log \(in-sample\)\s+n=\s+1\b", printed)
    assert re.search(r"not in the --seen log\s+n=\s+2\b", printed)
    assert [r["seen"] for r in csv.DictReader(out.open())] == ["False", "True", "False"]
    # without --seen no row is in-sample and no such group is printed
    assert not score(catalog, log).scored.seen.any()
    assert main([str(log), "--seen", str(tmp_path / "absent.csv")]) == 2
    assert "--seen log" in capsys.readouterr().err


@needs_runs
def test_the_reference_runs_score_as_the_calibration_computes_them(catalog: Catalog) -> None:
    """At the pooled factors, every row within its KV capacity scores exactly as
    ``fleet.perf.calibrate.errors`` computes it; the rest are scored as engine queues, so the
    whole file is covered."""
    result = score(catalog, MEASURED_CSV, pooled=True)
    s = result.scored
    assert result.coverage == 1.0
    runs = load_measured(catalog, MEASURED_CSV)
    err = calibrate.errors(build_arrays(catalog), runs, catalog)
    assert int(s.queued.sum()) == len(runs) - len(err.rows)
    inside = ~s.queued
    by_line = np.argsort(s.line[inside])
    tpot = (s.tpot[inside] / s.measured_tpot[inside] - 1.0)[by_line]
    tput = (s.tput[inside] / s.measured_tput[inside] - 1.0)[by_line]
    np.testing.assert_allclose(tpot, err.tpot, rtol=1e-12)
    np.testing.assert_allclose(tput, err.tokens_per_s_per_gpu, rtol=1e-12)


SDK_COMMON = (
    Path(__file__).resolve().parents[2]
    / "build" / "aic" / "whl" / "aiconfigurator_core" / "sdk" / "common.py"
)  # fmt: skip


@pytest.mark.skipif(not SDK_COMMON.exists(), reason=f"aiconfigurator-core SDK not at {SDK_COMMON}")
def test_every_quant_mode_of_the_log_format_has_a_precision() -> None:
    """A serving log names its GEMM and MoE formats by the members of aiconfigurator-core's
    ``GEMMQuantMode`` and ``MoEQuantMode``; each maps to a catalog precision, so no row of a
    known model and system is left unscored for its format's name."""
    text = SDK_COMMON.read_text()
    modes: set[str] = set()
    for enum in ("GEMMQuantMode", "MoEQuantMode"):
        body = text.split(f"class {enum}(Enum):", 1)[1].split("\nclass ", 1)[0]
        modes |= set(re.findall(r"^    (\w+) = QuantMapping\(", body, flags=re.M))
    assert len(modes) >= 15
    assert sorted(modes - set(QUANT_PRECISIONS)) == []


@pytest.mark.parametrize(
    ("mode", "precision"),
    [("bfloat16", "bf16"), ("sq", "int8"), ("w4a16_mxfp4", "fp4"), ("w4afp8", "int4")],
)
def test_quant_modes_read_as_their_weight_format(
    tmp_path: Path, catalog: Catalog, mode: str, precision: str
) -> None:
    row = ROWS["agg"].replace(",fp8,fp8,", f",{mode},{mode},", 1)
    assert row != ROWS["agg"]
    path = tmp_path / "log.csv"
    path.write_text(f"{HEADER}\n{row}\n")
    log = read_log(catalog, path)
    assert not log.skipped
    assert [PRECISIONS[p] for p in log.aggregated.configs.weight_precision] == [precision]


def test_each_group_reports_its_bias_the_median_signed_error(
    tmp_path: Path, catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bias is the median of model / measured - 1 (its sign says which way the model errs),
    the median error the median of its absolute value; both in text, markdown and JSON."""
    log = _log(tmp_path, "disagg", "agg", "per-rank batch")
    s = score(catalog, log).scored
    top = summaries(s)[0]
    signed = s.ttft / s.measured_ttft - 1.0
    assert top.ttft_bias == pytest.approx(float(np.median(signed)))
    assert top.ttft_median == pytest.approx(float(np.median(np.abs(signed))))
    assert top.tput_bias == pytest.approx(float(np.median(s.tput / s.measured_tput - 1.0)))
    assert top.tpot_bias is not None and abs(top.tpot_bias) <= top.tpot_median + 1e-12
    assert main([str(log)]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("all") and f"TTFT {top.ttft_bias:+6.1%}" in line
    assert main([str(log), "--markdown"]) == 0
    table = capsys.readouterr().out
    assert "| TTFT bias |" in table and f"{top.ttft_bias:+.1%} |" in table
    assert main([str(log), "--json"]) == 0
    group = json.loads(capsys.readouterr().out)["groups"][0]
    assert group["ttft_bias"] == pytest.approx(top.ttft_bias)


def test_rows_are_grouped_by_concurrency_and_prompt_length(
    tmp_path: Path, catalog: Catalog
) -> None:
    """Each scored row carries the users it kept in flight and its logged prompt length, and
    the summaries group by both (a band without rows is left out), as the rows file writes."""
    log = _log(tmp_path, "disagg", "agg", "per-rank batch")
    result = score(catalog, log)
    s = result.scored
    pairs = zip(s.concurrency.tolist(), s.isl.tolist(), strict=True)
    by_line = dict(zip(s.line.tolist(), pairs, strict=True))
    # the SGLang row logs no concurrency: 16 per attention rank x 8 ranks
    assert by_line == {2: (64, 8192), 3: (32, 1024), 4: (128, 1024)}
    rows = {t.group: t.rows for t in summaries(s)}
    assert rows["concurrency 17-64"] == 2 and rows["concurrency 65+"] == 1
    assert rows["prompt tokens 1-1,024"] == 2 and rows["prompt tokens 4,097+"] == 1
    assert "concurrency 1-4" not in rows and "prompt tokens 1,025-4,096" not in rows
    out = tmp_path / "rows.csv"
    assert main([str(log), "--rows", str(out)]) == 0
    written = list(csv.DictReader(out.open()))
    assert [(r["concurrency"], r["isl"]) for r in written] == [
        ("64", "8192"),
        ("32", "1024"),
        ("128", "1024"),
    ]
