"""``farebox plan``: a readable summary and JSON on success, one line and exit 2 on a bad file."""

from __future__ import annotations

import msgspec

from api.cli import main
from planner.plan.schema import Plan
from tests.planner.conftest import SCENARIOS


def test_plan_tiny_prints_a_summary_and_writes_json(tmp_path, capsys) -> None:
    out = tmp_path / "plan.json"
    assert main(["plan", str(SCENARIOS / "tiny.toml"), "--json", str(out)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert text.startswith("tiny -- ")
    assert "status: optimal" in text
    for section in (
        "prices",
        "peak: period",
        "trough: period",
        "service over the horizon",
        "pools",
    ):
        assert section in text
    assert "revenue $" in text and "margin $" in text
    assert "plan " in captured.err  # progress lines
    plan = msgspec.json.decode(out.read_bytes(), type=Plan)
    assert plan.scenario == "tiny" and plan.periods == 24
    assert f"revenue ${plan.revenue_usd:,.2f}" in text


def test_quiet_prints_no_progress(capsys) -> None:
    assert main(["plan", str(SCENARIOS / "tiny.toml"), "--quiet", "--time-limit", "5"]) == 0
    assert capsys.readouterr().err == ""


def test_bad_field_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text((SCENARIOS / "tiny.toml").read_text().replace("count = 6", "count = -6"))
    assert main(["plan", str(bad), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "farebox plan: error: bad.toml: $.fleet.pools[0].count: must be >= 0"


def test_missing_file_and_bad_time_limit_exit_2(tmp_path, capsys) -> None:
    assert main(["plan", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["plan", str(SCENARIOS / "tiny.toml"), "--time-limit", "0"]) == 2
    assert "--time-limit: must be > 0" in capsys.readouterr().err


def test_infeasible_scenario_prints_reasons_and_exits_1(tmp_path, capsys) -> None:
    text = (SCENARIOS / "tiny.toml").read_text()
    hard = tmp_path / "hard.toml"
    hard.write_text(
        text.replace("min_tokens_per_s_per_user = 120", "min_tokens_per_s_per_user = 90000")
    )
    assert main(["plan", str(hard), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "status: infeasible" in out
    assert (
        "  - no candidate of llama-3.1-8b on any pool reaches the fast tier's 90000 tokens/s" in out
    )


def test_unwritable_json_is_exit_2(tmp_path, capsys) -> None:
    target = tmp_path / "missing-dir" / "plan.json"
    assert main(["plan", str(SCENARIOS / "tiny.toml"), "--quiet", "--json", str(target)]) == 2
    assert "--json: cannot write" in capsys.readouterr().err
