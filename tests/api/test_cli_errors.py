"""Issue-8 CLI repros: each bad input or unwritable output is one line on stderr and exit 2 (no
traceback), a closed pipe ends quietly, and a valid scenario that serves nothing is a plan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from api.cli import EXIT_BROKEN_PIPE, main

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "scenarios" / "tiny.toml"
FRONTIER = ["frontier", "--model", "llama-3.1-8b", "--accelerator", "h100-sxm"]


def one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"farebox {argv[0]}: error: "), err
    assert needle in err, err
    return err


@pytest.mark.parametrize("flag", ["--csv", "--png"])
def test_frontier_output_into_missing_folder(capsys, tmp_path: Path, flag: str) -> None:
    target = tmp_path / "nope" / "f.out"
    one_line_exit_2(
        capsys, [*FRONTIER, flag, str(target)], f"{flag}: cannot write {target}: folder"
    )


def test_frontier_output_onto_a_folder(capsys, tmp_path: Path) -> None:
    one_line_exit_2(capsys, [*FRONTIER, "--csv", str(tmp_path)], "it is a folder")


def test_estimate_csv_out_into_missing_folder(capsys, tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("model,accelerator,batch\nllama-3.1-8b,h100-sxm,8\n")
    target = tmp_path / "nope" / "out.csv"
    one_line_exit_2(
        capsys,
        ["estimate", "--from-csv", str(src), "--out", str(target)],
        "--out: cannot write",
    )


def test_estimate_csv_binary_input(capsys, tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_bytes(b"model,batch\n\xff\xfe\x00\x01")
    one_line_exit_2(capsys, ["estimate", "--from-csv", str(src)], "invalid UTF-8")


def test_report_out_onto_a_file(capsys, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    one_line_exit_2(capsys, ["report", str(TINY), "--out", str(afile)], "--out: cannot write into")
    one_line_exit_2(
        capsys, ["report", str(TINY), "--out", str(afile / "deeper")], f"{afile} is a file"
    )


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (bytes(range(256)) * 8, "$: not valid TOML: invalid UTF-8"),
        (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "$: not valid TOML: nested too deeply"),
        (
            b"x = " + b"{a = " * 5000 + b"1" + b"}" * 5000 + b"\n",
            "$: not valid TOML: nested too deeply",
        ),
    ],
    ids=["binary", "5000-deep arrays", "5000-deep tables"],
)
def test_plan_and_check_on_unreadable_toml(
    capsys, tmp_path: Path, content: bytes, needle: str
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(content)
    one_line_exit_2(capsys, ["plan", str(bad), "--quiet"], f"bad.toml: {needle}")
    assert main(["check", str(bad)]) == 2
    out = capsys.readouterr().out
    assert needle in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("  140, 120,", "  1e308, 120,", "$.demand[0].requests_per_s[0]: must be <= 10000000"),
        ("  140, 120,", "  inf, 120,", "$.demand[0].requests_per_s[0]: must be <= 10000000"),
        ("count = 6 }", "count = 9223372036854775808 }", "$.fleet.pools[0].count: must be <="),
    ],
    ids=["requests_per_s=1e308", "requests_per_s=inf", "count=2^63"],
)
def test_plan_out_of_range_numbers(capsys, tmp_path: Path, old: str, new: str, needle: str) -> None:
    bad = tmp_path / "bad.toml"
    text = TINY.read_text()
    assert old in text
    bad.write_text(text.replace(old, new, 1))
    one_line_exit_2(capsys, ["plan", str(bad), "--quiet"], needle)


@pytest.mark.parametrize("command", ["plan", "check", "report"])
def test_infinite_time_limit(capsys, tmp_path: Path, command: str) -> None:
    argv = [command, str(TINY), "--time-limit", "inf"]
    if command == "report":
        argv += ["--out", str(tmp_path / "r")]
    one_line_exit_2(capsys, argv, "--time-limit: must be > 0 and <=")


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (
            "  140, 120, 110, 110, 120, 160, 240, 320, 400, 460, 500, 520,\n"
            "  520, 520, 510, 500, 480, 440, 400, 360, 320, 280, 220, 180,",
            "  " + "0, " * 23 + "0,",
            "nothing served: no demand in any period",
        ),
        (
            "count = 6 }",
            "count = 6, usd_per_hour = 400 }",
            "llama-8b/fast: nothing served: the cheapest configuration costs $",
        ),
    ],
    ids=["zero demand", "usd_per_hour=400"],
)
def test_plan_that_serves_nothing_prints_why(
    capsys, tmp_path: Path, old: str, new: str, why: str
) -> None:
    text = TINY.read_text()
    assert old in text
    path = tmp_path / "idle.toml"
    path.write_text(text.replace(old, new))
    assert main(["plan", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "status: optimal" in out and "revenue $0.00" in out
    assert why in out


def test_broken_pipe_exits_quietly(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text(
        "model,accelerator,batch\n" + "llama-3.1-8b,h100-sxm,8\n" * 3000
    )  # ~1 MB of results: far more than a pipe holds
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from api.cli import main; sys.exit(main())",
            "estimate",
            "--from-csv",
            str(src),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"model,accelerator,batch,fits")
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert err == ""


@pytest.mark.parametrize("command", ["estimate", "frontier"])
def test_unknown_engine(capsys, command: str) -> None:
    argv = FRONTIER if command == "frontier" else [
        "estimate", "--model", "llama-3.1-8b", "--accelerator", "h100-sxm", "--batch", "8"
    ]  # fmt: skip
    one_line_exit_2(capsys, [*argv, "--engine", "tgi"], "--engine: unknown engine 'tgi'")
