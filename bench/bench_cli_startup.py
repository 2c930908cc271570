"""Benchmark: how fast ``farebox --help`` and ``farebox estimate ...`` start, and what they import.

    python bench/bench_cli_startup.py [--before GIT_REF] [--runs 7]

Each command runs in a fresh interpreter, ``--runs`` times; prints the min and median wall time
and which heavy packages (numpy, scipy, polars, ortools, litestar, matplotlib, msgspec) it
imported (``python -X importtime``). With ``--before REF`` the same runs use the code of that
commit too (``git archive`` into a temporary folder), interleaved with this tree's runs, so load
on the machine hits both alike. Target: ``--help`` imports none of them; ``estimate`` only numpy
and msgspec.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "scipy", "polars", "ortools", "litestar", "matplotlib", "msgspec")
# Run the CLI of the code at {path}, not the editable install of this tree.
SHIM = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; "
    "sys.path.insert(0, {path!r}); from api.cli import main; "
    "assert main.__code__.co_filename.startswith({path!r}); sys.exit(main())"
)
COMMANDS = {
    "--help": ["--help"],
    "estimate": [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--accelerator",
        "h100-sxm",
        "--batch",
        "8",
    ],
}


def run(path: Path, argv: list[str], importtime: bool = False) -> tuple[float, str]:
    flags = ["-X", "importtime"] if importtime else []
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *flags, "-c", SHIM.format(path=str(path)), *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"farebox {' '.join(argv)} failed at {path}:\n{done.stderr[-800:]}")
    return elapsed, done.stderr


def heavy_imports(path: Path, argv: list[str]) -> list[str]:
    _, err = run(path, argv, importtime=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if "|" in line}
    return [h for h in HEAVY if h in names]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="GIT_REF", help="also time the code of this commit")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"after": REPO}
        if args.before:
            blob = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.before], capture_output=True, check=True
            ).stdout
            with tarfile.open(fileobj=BytesIO(blob)) as tar:
                tar.extractall(tmp, filter="data")
            trees = {"before": Path(tmp), "after": REPO}
        for name, argv in COMMANDS.items():
            times: dict[str, list[float]] = {label: [] for label in trees}
            for _ in range(args.runs):
                for label, path in trees.items():
                    times[label].append(run(path, argv)[0])
            print(f"farebox {name}")
            for label, path in trees.items():
                t = sorted(times[label])
                imported = ", ".join(heavy_imports(path, argv)) or "none of " + ", ".join(HEAVY)
                print(
                    f"  {label:6s} min {t[0]:.3f} s  median {t[len(t) // 2]:.3f} s  "
                    f"imports: {imported}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
