"""Where the aiconfigurator-core kernel tables are for the tests that re-fit on them: ``.ci/run``
unpacks the wheel to build/aic/whl; outside CI the tests skip without it, in CI they must run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.perf import kernel_tables as kt

WHEEL = Path(__file__).resolve().parents[2] / "build" / "aic" / "whl"


def kernel_data() -> Path | None:
    """The tables' directory, or None when the wheel is not unpacked."""
    try:
        return kt.find_data(WHEEL)
    except FileNotFoundError:
        return None


needs_data = pytest.mark.skipif(
    kernel_data() is None and not os.environ.get("CI"),
    reason=f"aiconfigurator-core kernel tables not under {WHEEL} (see .ci/run)",
)
