"""``farebox check``: a broken expectation fails readably, in the table and in JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from api.cli import main

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

BROKEN = """
[[expect]]
metric = "margin_usd"
max = 1
note = "broken on purpose: tiny earns far more than one dollar"
"""


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-broken.toml"
    path.write_text((SCENARIOS / "tiny.toml").read_text() + BROKEN)
    return path


def test_broken_expectation_fails_with_measured_value_and_why(
    broken: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "out" / "junit.xml"
    code = main(["check", str(broken), "--junit", str(junit)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "[1/1]" in err  # progress per scenario
    fail = [line for line in out.splitlines() if line.lstrip().startswith("FAIL")]
    assert len(fail) == 1
    assert "margin_usd" in fail[0] and "<= 1" in fail[0] and "above the maximum" in fail[0]
    assert "why expected: broken on purpose" in out
    assert any(line.lstrip().startswith("PASS  status") for line in out.splitlines())
    assert "1 failed" in out.splitlines()[-1]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1" and suite.get("errors") == "0"
    failures = suite.findall("testcase/failure")
    assert len(failures) == 1 and "above the maximum" in (failures[0].get("message") or "")
    assert len(suite.findall("testcase")) == 3


def test_all_expectations_hold_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(SCENARIOS / "tiny.toml")]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "0 failed" in out


def test_malformed_scenario_exits_two_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text((SCENARIOS / "tiny.toml").read_text().replace("count = 6", "count = -1"))
    assert main(["check", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "ERROR" in out and "$.fleet.pools[0].count" in out


def test_missing_path_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "no/such/dir"]) == 2
    assert "no such file or folder" in capsys.readouterr().err
