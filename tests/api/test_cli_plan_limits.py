"""``farebox plan`` holds a scenario to the server's default work limits before building (the
audit's 227-million-configuration week reached 5.7 GB and died with a traceback), names the limit
and ``--no-work-limit`` in one line, and turns running out of memory into one line too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

import planner.run
from api.cli import main
from api.cli.plan import check_work
from api.settings import Settings
from fleet.catalog.load import Catalog
from planner.scenario.decode import load_scenario
from tests.planner.test_screen_work import big

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((REPO / "scenarios").glob("*.toml"))
DEFAULTS = Settings(db_path=REPO)


def _forbidden(*_: object, **__: object) -> None:
    raise AssertionError("planning started before the scenario was refused")


def _out_of_memory(*_: object, **__: object) -> None:
    raise MemoryError


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "scenario.json"
    path.write_bytes(msgspec.json.encode(doc))
    return path


def huge_week(tmp_path: Path) -> Path:
    """The frontier-lab week with 5 precisions x 64 batch caps x 16 speculative options x 4
    engines: 227 million configurations (the API answers 422 in 0.05 s)."""
    doc = msgspec.toml.decode((REPO / "scenarios" / "frontier-lab-week.toml").read_bytes())
    doc["options"]["search"] = {
        "precisions": ["bf16", "fp8", "fp4", "int8", "int4"],
        "batch_caps": list(range(1, 65)),
        "speculative": [{"draft_tokens": k, "acceptance": 0.5} for k in range(16)],
        "engines": ["any", "trtllm", "vllm", "sglang"],
    }
    return _write(tmp_path, doc)


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("farebox plan: error: "), captured.err
    assert "Traceback" not in captured.err
    return captured.err


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_checked_in_scenarios_are_within_the_default_limits(path: Path, catalog: Catalog) -> None:
    work = check_work(load_scenario(path), catalog)  # raises over a limit
    assert work.configurations <= DEFAULTS.max_configurations
    assert work.checks <= DEFAULTS.max_slo_checks
    assert work.screen_combinations * 100 <= DEFAULTS.max_screen_combinations


def test_plan_over_the_configuration_limit_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner.run, "plan_scenario", _forbidden)
    err = _one_line_exit_2(capsys, ["plan", str(huge_week(tmp_path)), "--quiet"])
    assert "$.options.search: this scenario would evaluate 227,435,520 configurations" in err
    assert "over the limit of 2,000,000" in err
    assert "--no-work-limit" in err


def test_plan_over_the_screening_limit_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner.run, "plan_scenario", _forbidden)
    doc = msgspec.json.decode(msgspec.json.encode(big(512)))
    err = _one_line_exit_2(capsys, ["plan", str(_write(tmp_path, doc)), "--quiet"])
    assert "would screen 4,194,304 combinations of offer x pool x engine" in err
    assert "over the limit of 100,000" in err
    assert "--no-work-limit" in err


def test_no_work_limit_plans_anyway_and_out_of_memory_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the limits the build runs; a MemoryError in it is one line and exit 2, no
    traceback (the audit's run died with ``_ArrayMemoryError`` after 15 s)."""
    monkeypatch.setattr(planner.run, "plan_scenario", _out_of_memory)
    err = _one_line_exit_2(capsys, ["plan", str(huge_week(tmp_path)), "--no-work-limit", "--quiet"])
    assert "out of memory while building or solving frontier-lab-week" in err
    assert "227,435,520 configurations" in err


def test_plan_help_documents_the_override(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert "--no-work-limit" in capsys.readouterr().out


def test_check_refuses_a_scenario_over_the_limits_unplanned(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``farebox check`` holds each file to the same limits: the file fails as a malformed one
    (exit 2) with the limit named, and nothing is planned."""
    monkeypatch.setattr(planner.run, "plan_scenario", _forbidden)
    code = main(["check", str(huge_week(tmp_path))])
    out = capsys.readouterr()
    assert code == 2, out.out + out.err
    assert "over the limit of 2,000,000" in out.out + out.err
    assert "--no-work-limit" in out.out + out.err
    assert "Traceback" not in out.out + out.err


def test_check_reports_running_out_of_memory_in_its_results(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner.run, "plan_scenario", _out_of_memory)
    code = main(["check", str(REPO / "scenarios" / "tiny.toml"), "--no-work-limit"])
    out = capsys.readouterr()
    assert code == 1, out.out + out.err
    assert "out of memory while building or solving" in out.out
    assert "Traceback" not in out.out + out.err
