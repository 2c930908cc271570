"""bench/support_coverage.py: the share of aiconfigurator-core's supported model x system rows
whose model and system the catalog names, and the rest by reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.support_coverage import DEFAULT_DATA, coverage, main

MATRIX = DEFAULT_DATA / "aiconfigurator_core" / "systems" / "support_matrix"


@pytest.mark.skipif(not MATRIX.exists(), reason=f"aiconfigurator-core not under {DEFAULT_DATA}")
def test_the_catalog_names_most_supported_rows_and_says_why_not_the_rest() -> None:
    known, total, missing = coverage(DEFAULT_DATA)
    assert total > 4000
    assert known + sum(missing.values()) == total
    assert known / total >= 0.95
    assert all(reason.startswith(("unknown model", "unknown system")) for reason in missing)


def test_a_missing_matrix_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data", str(tmp_path)]) == 2
    assert "no support matrix under" in capsys.readouterr().err
