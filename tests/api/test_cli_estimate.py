"""``farebox estimate``: the default precision follows the accelerator, --help shows defaults,
--prefix-cached-tokens reproduces a plan's assignment, --from-csv evaluates all rows in one call
with the same figures as one row at a time, and the command loads no solver, web or plotting
stack."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from api.cli import build_parser, main
from api.cli.estimate import RESULT_COLUMNS, result_row
from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.engines import engine_arrays
from fleet.perf.model import estimate
from planner.build.pipeline import token_profile
from planner.run import load_scenario, plan_scenario

REPO = Path(__file__).resolve().parents[2]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["estimate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_default_precision_rule(catalog: Catalog) -> None:
    got = {a.id: a.default_precision for a in catalog.accelerators.values()}
    assert got["h100-sxm"] == got["h200-sxm"] == got["mi300x"] == "fp8"
    assert got["b200"] == got["gb200"] == "fp4"
    assert got["tpu-v5e"] == got["wse3"] == got["groq-lpu"] == "bf16"
    assert got["gaudi3"] == "fp8"  # bf16 and fp8 peaks tie: the narrower
    for acc in catalog.accelerators.values():
        assert acc.default_precision in acc.native_precisions


@pytest.mark.parametrize(
    ("accelerator", "precision"), [("h100-sxm", "fp8"), ("b200", "fp4"), ("tpu-v6e", "bf16")]
)
def test_estimate_default_precision_follows_the_system(
    capsys: pytest.CaptureFixture[str], accelerator: str, precision: str
) -> None:
    base = ["--model", "llama-3.1-8b", "--accelerator", accelerator, "--batch", "8"]
    assert main(["estimate", *base]) == 0
    out = capsys.readouterr().out
    assert f" {precision} b8" in out.splitlines()[0], out
    assert run_json(capsys, *base) == run_json(capsys, *base, "--precision", precision)


def test_help_shows_defaults_and_the_precision_rule() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = " ".join(sub.choices["estimate"].format_help().split())
    assert "input tokens per request (default: 1024)" in text
    assert "(no prefill compute) (default: 0)" in text
    assert "fp4 on B200/GB200" in text and "fp8 on H100/H200" in text
    assert "(default: None)" not in text and "(default: False)" not in text


def test_prefix_cached_tokens_cut_the_prefill(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--model", "llama-3.1-70b", "--accelerator", "h100-sxm", "--tp", "4"]
    base += ["--batch", "16", "--isl", "4000"]
    cold = run_json(capsys, *base)
    warm = run_json(capsys, *base, "--prefix-cached-tokens", "3000")
    assert warm["prefill_ms"] < cold["prefill_ms"] * 0.5
    assert warm["memory"]["kv_gb_per_device"] == cold["memory"]["kv_gb_per_device"]
    assert main(["estimate", *base, "--prefix-cached-tokens", "3000"]) == 0
    assert "isl 4000 (3000 cached)" in capsys.readouterr().out


def test_estimate_reproduces_every_assignment_of_a_plan(
    capsys: pytest.CaptureFixture[str], catalog: Catalog
) -> None:
    scenario = load_scenario(REPO / "scenarios" / "tiny.toml")
    plan = plan_scenario(scenario, catalog, time_limit_s=10)
    demand = scenario.demand[0]
    isl, cached = token_profile(demand)
    assert cached > 0  # tiny has a prefix-cache hit rate: the flag matters here
    acceptance = {o.draft_tokens: o.acceptance for o in scenario.options.search.speculative}
    systems = {p.id: p.system for p in scenario.fleet.pools}
    seen = set()
    for a in plan.assignments:
        key = (a.pool, a.variant, a.tp, a.pp, a.dp, a.ep, a.precision, a.kv_precision)
        key += (a.batch_cap, a.spec_draft_tokens)
        if key in seen:
            continue
        seen.add(key)
        row = run_json(
            capsys,
            *("--model", a.variant, "--system", systems[a.pool]),
            *("--tp", str(a.tp), "--pp", str(a.pp), "--dp", str(a.dp), "--ep", str(a.ep)),
            *("--precision", a.precision, "--kv-precision", a.kv_precision),
            *("--batch", str(a.batch_cap), "--isl", str(isl)),
            *("--osl", str(round(demand.mean_output_tokens))),
            *("--prefix-cached-tokens", str(cached)),
            *("--spec-draft", str(a.spec_draft_tokens)),
            *("--spec-acceptance", str(acceptance[a.spec_draft_tokens])),
        )
        assert row["tokens_per_s_per_user"] == pytest.approx(a.tokens_per_s_per_user, abs=0.051)
    assert seen


def test_from_csv_matches_one_row_at_a_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, catalog: Catalog, arrays: CatalogArrays
) -> None:
    rows = [
        # name, model, accelerator, system, precision, kv, tp, ep, batch, isl, osl, cached, k, a
        ("a", "llama-3.1-8b", "h100-sxm", "", "", "", "1", "", "8", "1024", "256", "", "", ""),
        (
            "b",
            "llama-3.1-70b",
            "b200",
            "",
            "",
            "bf16",
            "2",
            "",
            "32",
            "2048",
            "512",
            "1000",
            "",
            "",
        ),
        ("c", "qwen3-30b-a3b", "", "hgx-h200-8", "fp8", "", "2", "2", "64", "", "", "", "3", "0.7"),
        ("d", "llama-3.1-70b", "h100-sxm", "", "bf16", "", "1", "", "8", "", "", "", "", ""),
        ("e", "llama-3.1-70b", "h100-sxm", "", "", "", "3", "", "8", "", "", "", "", ""),
        ("f", "nope", "h100-sxm", "", "", "", "", "", "8", "", "", "", "", ""),
        ("g", "llama-3.1-8b", "h100-sxm", "", "", "", "", "", "lots", "", "", "", "", ""),
        ("h", "llama-3.1-8b", "tpu-v5e", "", "", "", "", "", "99999999999", "", "", "", "", ""),
        ("i", "llama-3.1-8b", "tpu-v5e", "", "", "", "", "", "4", "512", "64", "600", "", ""),
    ]
    header = "name,model,accelerator,system,precision,kv_precision,tp,ep,batch,isl,osl,"
    header += "prefix_cached_tokens,spec_draft,spec_acceptance"
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text(header + "\n" + "\n".join(",".join(r) for r in rows) + "\n")
    assert main(["estimate", "--from-csv", str(src), "--out", str(out)]) == 0
    got = list(csv.DictReader(out.open()))
    assert [g["name"] for g in got] == [r[0] for r in rows]
    assert [g["problem"] for g in got] == [
        "ok",
        "ok",
        "ok",
        "does_not_fit",
        "bad_layout",
        "bad_input",
        "bad_input",
        "bad_input",
        "bad_layout",
    ]
    assert "unknown model 'nope'" in got[5]["error"]
    assert got[6]["error"] == "batch: 'lots' is not a whole number"
    assert "batch: 99999999999 is out of range" in got[7]["error"]
    assert "does not fit" in got[3]["error"] and "tp: 3" in got[4]["error"]
    # Every row the model evaluated has the figures of the same configuration run on its own.
    for g, r in zip(got, rows, strict=True):
        if g["problem"] == "bad_input":
            continue
        system = r[3] or catalog.default_system(r[2]).id
        one = make_configs(
            catalog,
            model=r[1],
            system=system,
            precision=r[4]
            or catalog.accelerators[catalog.system(system).accelerator].default_precision,
            kv_precision=r[5] or None,
            tp=int(r[6] or 1),
            ep=int(r[7] or 1),
            batch=int(r[8]),
            isl=int(r[9] or 1024),
            osl=int(r[10] or 256),
            prefix_cached_tokens=int(r[11] or 0),
            spec_draft_tokens=int(r[12] or 0),
            spec_acceptance=float(r[13] or 0),
        )
        want = result_row(one, estimate(arrays, one), 0, arrays=arrays)
        flat = {**want, **want.pop("memory")}
        # Every result column the CSV writes is the single estimate's (the error sentence is
        # checked apart): a column left out of the vectorized path shows up here.
        for column in (c for c in RESULT_COLUMNS if c != "error"):
            value = flat[column]
            cell = (
                ""
                if value is None
                else ("true" if value is True else "false" if value is False else str(value))
            )
            assert g[column] == cell, (g["name"], column, g[column], cell)


CHECK_IMPORTS = (
    "import sys\n"
    "from api.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "finally:\n"  # --help exits through SystemExit
    "    heavy = ('ortools', 'litestar', 'polars', 'matplotlib', 'scipy', 'numpy')\n"
    "    print('loaded:', *(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
)


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        (["estimate", "--help"], set()),
        (
            ["estimate", "--model", "llama-3.1-8b", "--accelerator", "h100-sxm", "--batch", "8"],
            {"numpy"},
        ),
        (["frontier", "--model", "llama-3.1-8b", "--accelerator", "h100-sxm"], {"numpy"}),
    ],
    ids=["help", "estimate", "frontier"],
)
def test_commands_load_only_what_they_need(argv: list[str], allowed: set[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK_IMPORTS, *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    last = done.stderr.splitlines()[-1].split()
    assert last[0] == "loaded:", done.stderr
    assert set(last[1:]) <= allowed, set(last[1:]) - allowed


def test_from_csv_engine_column_takes_each_rows_engine(
    tmp_path: Path, catalog: Catalog, arrays: CatalogArrays
) -> None:
    """A run log names the engine per row: each row is estimated at its own engine's factors and
    scheduling terms (an empty cell takes ``--engine``); an unknown engine is that row's error."""
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    lines = ["model,accelerator,batch,isl,osl,engine"]
    lines += [f"llama-3.1-8b,h100-sxm,16,1024,256,{e}" for e in ("", "sglang", "vllm", "tgi")]
    src.write_text("\n".join(lines) + "\n")
    assert main(["estimate", "--from-csv", str(src), "--out", str(out), "--engine", "trtllm"]) == 0
    got = list(csv.DictReader(out.open()))
    one = make_configs(
        catalog, model="llama-3.1-8b", system="hgx-h100-8", precision="fp8", batch=16
    )
    for row, engine in zip(got[:3], ("trtllm", "sglang", "vllm"), strict=True):
        want = result_row(one, estimate(engine_arrays(catalog, arrays, engine), one), 0)
        for column in ("tpot_ms", "tpot_burst_ms", "ttft_burst_ms", "tokens_per_s_per_user"):
            assert row[column] == str(want[column]), (engine, column)
    assert len({row["ttft_burst_ms"] for row in got[:3]}) == 3
    assert got[3]["problem"] == "bad_input"
    assert got[3]["error"] == "unknown engine 'tgi'; known: any, trtllm, vllm, sglang"


def test_the_table_says_when_attention_is_sparse(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["estimate", "--accelerator", "b200", "--tp", "8", "--batch", "8", "--isl", "8192"]
    assert main([*base, "--model", "glm-5"]) == 0
    assert "the top 2,048 of its context tokens" in capsys.readouterr().out
    assert main([*base, "--model", "deepseek-r1"]) == 0
    assert "sparse attention" not in capsys.readouterr().out
    assert main([*base, "--ep", "8", "--model", "deepseek-v4-flash"]) == 0
    out = capsys.readouterr().out
    assert "compressed attention (DeepSeek-V4): every layer reads a 128-token window" in out
    assert "21 layers add one entry per 4 tokens, of which an indexer selects 512" in out
    assert "20 layers read one entry per 128 tokens" in out
    assert "DeepSeek Sparse Attention" not in out


def test_the_table_says_what_the_block_fp8_moe_kernel_adds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Under TensorRT-LLM a block-scaled FP8 MoE model's step overhead holds its MoE kernel's
    cost per expert held; the table says how much, and says nothing at the pooled default."""
    argv = ["estimate", "--model", "deepseek-r1", "--system", "hgx-h200-8", "--precision", "fp8"]
    argv += ["--tp", "8", "--batch", "4"]
    assert main([*argv, "--engine", "trtllm"]) == 0
    out = capsys.readouterr().out
    assert "block-scaled FP8 MoE kernel: 3.99 ms of the overhead" in out
    assert "256 experts held per rank x 58 MoE layers" in out
    assert main([*argv, "--ep", "8", "--engine", "trtllm"]) == 0
    assert "32 experts held per rank" in capsys.readouterr().out
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MoE kernel" not in out
    # every engine: the MoE layers' call time (58 layers x H200's 28 us)
    assert "routed-expert calls: 1.62 ms of the overhead per forward pass (58 MoE layers" in out
    # not on 4-bit weight-only experts (gpt-oss on Hopper): their fitted figure holds it
    oss = ["estimate", "--model", "gpt-oss-120b", "--system", "hgx-h200-8", "--precision", "fp4"]
    assert main([*oss, "--batch", "4"]) == 0
    assert "routed-expert calls" not in capsys.readouterr().out
    # native FP4 experts (B200) at their MXFP4 kernel's call time, 21 us, not the 8/16-bit 29.4
    oss[oss.index("hgx-h200-8")] = "hgx-b200-8"
    assert main([*oss, "--batch", "4"]) == 0
    assert "0.76 ms of the overhead per forward pass (36 MoE layers x 21 us" in (
        capsys.readouterr().out
    )


def test_a_sparse_attention_model_names_its_modules_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GLM-5's 78 DeepSeek Sparse Attention layers each take B200's measured module time
    (69.2 us) per forward pass; a model without DSA has no such note."""
    argv = ["estimate", "--system", "hgx-b200-8", "--precision", "fp8", "--tp", "8"]
    assert main([*argv, "--model", "glm-5", "--batch", "4"]) == 0
    out = capsys.readouterr().out
    assert "the sparse-attention (DSA) modules: 5.40 ms of the overhead per forward pass" in out
    assert "(78 layers x 69.2 us" in out
    assert main([*argv, "--model", "deepseek-v3", "--batch", "4"]) == 0
    assert "DSA) modules" not in capsys.readouterr().out
