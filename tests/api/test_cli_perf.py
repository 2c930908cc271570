"""``farebox estimate`` and ``farebox frontier``, called through ``api.cli.main``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from api.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_estimate_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-70b",
        "--accelerator",
        "h100-sxm",
        "--tp",
        "4",
        "--batch",
        "32",
        "--isl",
        "2048",
        "--osl",
        "512",
    )
    assert code == 0
    assert "llama-3.1-70b on hgx-h100-8: tp4 pp1 dp1 ep1 fp8 b32" in out
    assert "tokens/s per user" in out and "memory-bound" in out


def test_estimate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "deepseek-r1",
        "--accelerator",
        "h200-sxm",
        "--tp",
        "8",
        "--ep",
        "8",
        "--batch",
        "16",
        "--spec-draft",
        "2",
        "--spec-acceptance",
        "0.8",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    for key in (
        "fits",
        "tpot_ms",
        "ttft_ms",
        "tokens_per_s_per_user",
        "tokens_per_s_per_device",
        "bound",
        "memory",
    ):
        assert key in data
    assert data["fits"] is True
    assert data["tokens_per_step"] == pytest.approx(1 + 0.8 + 0.64)
    assert data["memory"]["memory_gb_per_device"] <= data["memory"]["usable_gb_per_device"]
    assert data["tokens_per_s_per_user"] == pytest.approx(1000 / data["tpot_ms"], rel=1e-2)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--model", "nope", "--accelerator", "h100-sxm", "--batch", "1"], "unknown model 'nope'"),
        (
            ["--model", "llama-3.1-8b", "--accelerator", "x1", "--batch", "1"],
            "unknown accelerator 'x1'",
        ),
        (
            ["--model", "llama-3.1-70b", "--accelerator", "h100-sxm", "--tp", "3", "--batch", "1"],
            "tp: 3 does not divide the 64 attention heads",
        ),
        (
            # 12 GPUs per stage on 8-GPU nodes: more than one domain, not a whole number of them
            [
                *("--model", "llama-3.1-70b", "--accelerator", "h100-sxm"),
                *("--tp", "4", "--dp", "3", "--batch", "1"),
            ],
            "exceeds the scale-up domain",
        ),
        (
            ["--model", "llama-3.1-405b", "--accelerator", "h100-sxm", "--batch", "1"],
            "does not fit",
        ),
        (
            # wse3 defaults to bf16 (its only native format); fp8 must be asked for.
            [
                "--model",
                "llama-3.1-8b",
                "--accelerator",
                "wse3",
                "--precision",
                "fp8",
                "--batch",
                "1",
            ],
            "runs fp8 weights neither natively nor weight-only",
        ),
        (["--model", "llama-3.1-8b", "--accelerator", "h100-sxm"], "--batch is required"),
    ],
)
def test_estimate_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    code, _, err = run(capsys, "estimate", *argv)
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1 and err.startswith("farebox estimate: error: ")


def test_estimate_from_csv_keeps_going_on_bad_rows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "in.csv"
    src.write_text(
        "name,model,accelerator,precision,tp,pp,dp,ep,batch,isl,osl\n"
        "a,llama-3.1-8b,h100-sxm,fp8,1,1,1,1,8,1024,256\n"
        "b,nope,h100-sxm,fp8,1,1,1,1,8,1024,256\n"
        "c,llama-3.1-70b,h100-sxm,fp8,3,1,1,1,8,1024,256\n"
        "d,llama-3.1-70b,h100-sxm,fp8,1,1,1,1,8,1024,256\n"
        "e,qwen3-32b,h200-sxm,bf16,2,1,1,1,64,2048,512\n"
    )
    out_path = tmp_path / "out.csv"
    code, _, _ = run(capsys, "estimate", "--from-csv", str(src), "--out", str(out_path))
    assert code == 0
    rows = list(csv.DictReader(out_path.open()))
    assert [r["name"] for r in rows] == ["a", "b", "c", "d", "e"]
    assert [r["fits"] for r in rows] == ["true", "false", "false", "false", "true"]
    assert "unknown model" in rows[1]["error"]
    assert "tp: 3" in rows[2]["error"]
    assert "does not fit" in rows[3]["error"]
    assert rows[0]["error"] == "" and float(rows[0]["tpot_ms"]) > 0


def test_estimate_from_csv_takes_the_names_benchmark_logs_use(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A checkpoint's repo names its model and aiconfigurator's id names the system: the row
    estimates as the catalog ids do."""
    src = tmp_path / "in.csv"
    src.write_text(
        "model,system,precision,tp,dp,ep,batch,isl,osl\n"
        "nvidia/DeepSeek-R1-NVFP4,b200_sxm,fp4,1,8,8,64,1024,1024\n"
        "deepseek-r1,hgx-b200-8,fp4,1,8,8,64,1024,1024\n"
    )
    out_path = tmp_path / "out.csv"
    assert run(capsys, "estimate", "--from-csv", str(src), "--out", str(out_path))[0] == 0
    named, ids = list(csv.DictReader(out_path.open()))
    assert named["fits"] == "true" and named["error"] == ""
    assert named["tpot_ms"] == ids["tpot_ms"] and named["model"] == "nvidia/DeepSeek-R1-NVFP4"


def test_frontier_table_csv_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    csv_path, png_path = tmp_path / "f.csv", tmp_path / "f.png"
    code, out, _ = run(
        capsys,
        "frontier",
        "--model",
        "llama-3.1-8b",
        "--accelerator",
        "h100-sxm",
        "--isl",
        "512",
        "--osl",
        "128",
        "--csv",
        str(csv_path),
        "--png",
        str(png_path),
    )
    assert code == 0
    assert "frontier points" in out
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) >= 3
    users = [float(r["tokens_per_s_per_user"]) for r in rows]
    devices = [float(r["tokens_per_s_per_device"]) for r in rows]
    assert users == sorted(users, reverse=True)
    assert devices == sorted(devices)  # a Pareto frontier: slower per user, more per device
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_frontier_unknown_model_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "frontier", "--model", "nope", "--accelerator", "h100-sxm")
    assert code == 2 and "unknown model" in err


def test_frontier_disaggregated(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    csv_path = tmp_path / "d.csv"
    argv = ["frontier", "--model", "deepseek-r1", "--system", "gb200-nvl72", "--isl", "1024"]
    argv += ["--osl", "1024", "--precision", "fp4", "--csv", str(csv_path)]
    code, out, _ = run(capsys, *argv, "--disaggregated")
    assert code == 0 and "disaggregated:" in out
    rows = list(csv.DictReader(csv_path.open()))
    assert rows and all(r["disaggregated"].startswith("disaggregated: ") for r in rows)
    devices = [float(r["tokens_per_s_per_device"]) for r in rows]
    assert devices == sorted(devices)
    code, out, _ = run(capsys, *argv)  # aggregated: no unit column filled
    assert code == 0 and ", aggregated:" in out
    assert all(r["disaggregated"] == "" for r in csv.DictReader(csv_path.open()))


def test_score_prints_coverage_and_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``farebox score``: a known row scored, an unknown system counted; a missing file is one
    line and exit 2."""
    log = tmp_path / "log.csv"
    log.write_text(
        "silicon_data_source,backend,model_path,system,mode,isl,osl,gemm_quant_mode,"
        "moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_ep_size,"
        "silicon_ttft_ms,silicon_tpot_ms\n"
        "silicon_concurrency=32,vllm,meta-llama/Llama-3.1-70B,b200_sxm,agg,1024,1024,fp8,fp8,"
        "32,4,1,,1,80,12\n"
        "silicon_concurrency=32,vllm,meta-llama/Llama-3.1-70B,a30,agg,1024,1024,fp8,fp8,"
        "32,4,1,,1,80,12\n"
    )
    code, out, _ = run(capsys, "score", str(log), "--json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["rows"], doc["scored"]) == (2, 1)
    assert doc["not_scored"] == {"unknown system 'a30'": 1}
    assert [g["group"] for g in doc["groups"]][:2] == ["all", "accelerator b200"]
    code, out, err = run(capsys, "score", str(tmp_path / "absent.csv"))
    assert code == 2 and out == ""
    assert err.startswith("farebox score: error: serving log:") and err.count("\n") == 1
    code, out, err = run(capsys, "score", str(log), "--seen", str(tmp_path / "absent.csv"))
    assert code == 2 and out == ""
    assert err.startswith("farebox score: error: --seen log:") and err.count("\n") == 1
    code, out, _ = run(capsys, "score", str(log), "--seen", str(log))  # every row in-sample
    assert code == 0 and "also in the --seen log (in-sample)" in out
