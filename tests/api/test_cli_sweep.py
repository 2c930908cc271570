"""``farebox sweep``: the table, the files it writes, and one-line errors (exit 2)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import polars as pl
import pytest

from api.cli import main
from tests.planner.test_sweep_run import small

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "small.json"
    path.write_bytes(msgspec.json.encode(small()))
    return path


def test_sweep_prints_a_table_and_writes_tables_and_charts(
    scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(
        [
            "sweep",
            str(scenario),
            "--set",
            "pools.h100-us-east.count=1..2",
            "--set",
            "tiers.fast.max_ttft_ms=300,500",
            "--samples",
            "40",
            "--workers",
            "2",
            "--out",
            str(out),
        ]
    )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].startswith("tiny: 4 points, 40 demand samples each")
    assert "margin p5" in lines[1] and "miss h p50" in lines[1]
    assert sum(" optimal " in line for line in lines) == 4
    assert "4 points on local (2 workers)" in stdout
    assert stderr == ""  # no progress bars when stderr is no terminal
    for name in ("points", "prices", "pools", "samples"):
        parquet = pl.read_parquet(out / f"{name}.parquet")
        csv = pl.read_csv(out / f"{name}.csv", schema=parquet.schema)
        assert parquet.height > 0
        assert parquet.equals(csv)
    points = pl.read_parquet(out / "points.parquet")
    assert points.columns[:3] == ["point", "pools.h100-us-east.count", "tiers.fast.max_ttft_ms"]
    assert points["margin_usd_p50"].null_count() == 0
    assert pl.read_parquet(out / "samples.parquet").height == 4 * 40
    for chart in ("margin", "prices", "pools", "samples"):
        assert (out / f"{chart}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "pools.nope.count=1"], "--set pools.nope.count: $.fleet.pools has no element"),
        (["--set", "pools.h100-us-east.count=x"], "expected `int`, got `str`"),
        (["--set", "pools.h100-us-east.count=0..300"], "more than 256 values"),
        (
            [
                "--set",
                "pools.h100-us-east.count=0..4",
                "--set",
                "meta.name=a,b",
                "--max-points",
                "5",
            ],
            "5 x 2 = 10 grid points, over the limit of 5",
        ),
        (
            ["--set", "pools.h100-us-east.count=0..9", "--samples", "200"],
            "10 grid points x 200 samples = 2,000 evaluations, over the limit of 1,000",
        ),
        (["--samples", "-1"], "--samples: must be >= 0"),
        (["--demand-cv", "0"], "--demand-cv: must be > 0"),
        (["--time-limit", "0"], "--time-limit: must be > 0"),
        (["--workers", "0"], "--workers: must be >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    scenario: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sweep", str(scenario), "--max-evaluations", "1000", *args])
    stdout, stderr = capsys.readouterr()
    assert code == 2
    assert stdout == ""
    assert stderr.count("\n") == 1
    assert stderr.startswith("farebox sweep: error: ")
    assert message in stderr


def test_ray_without_ray_installed_is_one_line(
    scenario: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    code = main(["sweep", str(scenario), "--ray"])
    _, stderr = capsys.readouterr()
    assert code == 2
    assert "--ray: ray is not installed; install the extra" in stderr
