"""Settings of the HTTP service: one frozen object, built once from the environment.

``create_app`` calls ``Settings.from_env(os.environ)`` when it is not handed settings; nothing
else in farebox reads the environment. ``farebox serve`` turns its flags into these variables so
that granian's worker processes, which import the app factory themselves, see the same values.

Variables (all optional):

================================ =========================================  =======================
variable                         meaning                                    default
================================ =========================================  =======================
FAREBOX_DATA_DIR                 directory for the SQLite file              ``./farebox-data``
FAREBOX_DB                       SQLite file of requests and plans          DATA_DIR/farebox.sqlite
FAREBOX_CATALOG_DIR              catalog data files (accelerators.toml...)  the packaged ones
FAREBOX_WORKERS                  solver worker processes (solves at once)   1
FAREBOX_QUEUE_MAX                plans waiting for a worker before 503      16
FAREBOX_MAX_TIME_LIMIT_S         largest time limit a request may ask for   900
FAREBOX_KILL_GRACE_S             extra wall time before a solve is killed   60
FAREBOX_MAX_WAIT_S               largest ``?wait=`` a request may ask for   120
FAREBOX_MAX_BODY_BYTES           largest request body                       4 MiB
FAREBOX_MAX_HORIZON_HOURS        longest horizon a request may plan, hours  1344 (8 weeks)
FAREBOX_MAX_ATTEMPTS             restarts after which a plan is failed      3
FAREBOX_RETRY_AFTER_S            Retry-After (s) of a 503, queue full       10
FAREBOX_MAX_CONFIGURATIONS       configurations a plan may evaluate         2,000,000
FAREBOX_MAX_SLO_CHECKS           configuration x (tier, pool) SLO checks    12,000,000
FAREBOX_MAX_PLAN_ROWS            a plan's pool and demand rows              300,000
FAREBOX_MAX_STORE_BYTES          SQLite bytes in use; above it POST is 507  2 GiB
FAREBOX_MAX_SCREEN_COMBINATIONS  offer x pool x engine turns of screening   100,000
FAREBOX_SOLVER_MEMORY_MB         address space of one solver process, MiB   8192
FAREBOX_API_TOKEN                bearer token every /v1 route requires      none (open)
FAREBOX_SWEEP_WORKERS            sweeps run at once (a process each)        1
FAREBOX_SWEEP_QUEUE_MAX          sweeps waiting before 503                  4
FAREBOX_SWEEP_MAX_POINTS         grid points of one sweep                   64
FAREBOX_SWEEP_MAX_EVALUATIONS    grid points x Monte Carlo samples          200,000
FAREBOX_SWEEP_MAX_S              a sweep's worst case: points x time limit  3600
FAREBOX_SWEEP_MAX_EXPANDED_BYTES grid points x request bytes of one sweep   128 MiB
FAREBOX_SWEEPS_KEPT              finished sweeps kept in memory             32
================================ =========================================  =======================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fleet.errors import InputError

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Settings:
    db_path: Path
    catalog_dir: Path | None = None
    """``None`` = the catalog packaged with farebox."""
    workers: int = 1
    compute_threads: int = 2
    """Threads for CPU work inside requests (SLO screening, estimates, frontiers)."""
    """Solver worker processes; each runs one solve at a time."""
    queue_max: int = 16
    """Plans that may wait for a worker; one more is refused with 503."""
    max_time_limit_s: float = 900.0
    kill_grace_s: float = 60.0
    """Wall time allowed beyond the plan's time limit before the worker process is killed and
    the plan failed. The limit itself covers building the tables and the solve (the worker stops
    itself when it runs out); the grace is for naming the plan and writing its report, and is
    the backstop for a solver that overruns its limit."""
    max_wait_s: float = 120.0
    max_body_bytes: int = 4 * MIB
    max_horizon_hours: int = 1344
    """A server-side cap on the demand horizon (the scenario schema allows up to 8 weeks)."""
    max_attempts: int = 3
    """A plan whose solve was interrupted by a server crash this many times is failed."""
    retry_after_s: int = 10
    max_configurations: int = 2_000_000
    """A plan's search grids (``planner.build.workload``), refused at POST when larger: 3.4x the
    frontier-lab week's 588,438, ~0.7 GB while screening."""
    max_slo_checks: int = 12_000_000
    """A plan's configuration x (family, tier, variant, pool) SLO checks: 2.4x the frontier-lab
    week's 5.0 million."""
    max_screen_combinations: int = 100_000
    """A plan's (family, tier, model) offers x pools x engines, the turns of the SLO screen's loop
    (``planner.build.workload``), each ~12 us even when the grid is empty: ~1.2 s at the limit.
    174x the frontier-lab week's 576, the most of the checked-in scenarios."""
    max_plan_rows: int = 300_000
    """A plan's pool-usage and demand rows (pools x periods + families x tiers x periods,
    ``planner.build.plan_rows``), refused at POST when more: ~37 MB of plan JSON, returned whole on
    every GET; the frontier-lab week has 7,056."""
    max_store_bytes: int = 2048 * MIB
    """Bytes of the SQLite file in use (free pages not counted); a new plan is refused with 507
    while the store holds more, until plans are deleted. Nothing stored is ever evicted."""
    solver_memory_mb: int = 8192
    """RLIMIT_AS of each solver process: 5x the 1.5 GB address space the frontier-lab week's
    solve peaks at. A solve over it fails instead of taking the machine's memory."""
    api_token: str | None = field(default=None, repr=False)
    """When set, every /v1 route needs ``Authorization: Bearer <token>`` (``/health`` and the
    OpenAPI schema stay open)."""
    lease_s: float = 15.0
    """A running plan whose server stopped renewing its lease this long ago runs again."""
    poll_s: float = 0.25
    """How often the job runner looks for work, cancellations and expired leases."""
    page_max: int = 200
    sweep_workers: int = 1
    """Sweeps run at once, each in one worker process (its points one after another)."""
    sweep_queue_max: int = 4
    sweep_max_points: int = 64
    sweep_max_evaluations: int = 200_000
    sweep_max_s: float = 3600.0
    """Largest worst-case duration of a sweep: the sum of its points' time limits + grace."""
    sweep_max_expanded_bytes: int = 128 * MIB
    """Largest grid points x request body bytes of a sweep, refused before any point is built.
    The worker holds every point decoded, ~20x its JSON (a 1.6 MB scenario: ~31 MB a point), so
    128 MiB is ~2.5 GiB of the worker's ``solver_memory_mb``; the API checks one at a time."""
    sweeps_kept: int = 32
    parent_pid: int | None = None
    """Set by ``farebox serve`` (FAREBOX_PARENT_PID): the granian main process. A worker whose
    parent disappears (kill -9 of the main process) shuts itself down instead of serving on."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Settings from ``FAREBOX_*`` variables; a bad value raises InputError naming it."""
        data_dir = Path(environ.get("FAREBOX_DATA_DIR", "farebox-data"))
        db = environ.get("FAREBOX_DB")
        catalog = environ.get("FAREBOX_CATALOG_DIR")
        return cls(
            db_path=Path(db) if db else data_dir / "farebox.sqlite",
            catalog_dir=Path(catalog) if catalog else None,
            workers=_int(environ, "FAREBOX_WORKERS", 1, lo=1),
            compute_threads=_int(environ, "FAREBOX_COMPUTE_THREADS", 2, lo=1),
            queue_max=_int(environ, "FAREBOX_QUEUE_MAX", 16, lo=0),
            max_time_limit_s=_float(environ, "FAREBOX_MAX_TIME_LIMIT_S", 900.0),
            kill_grace_s=_float(environ, "FAREBOX_KILL_GRACE_S", 60.0),
            max_wait_s=_float(environ, "FAREBOX_MAX_WAIT_S", 120.0),
            max_body_bytes=_int(environ, "FAREBOX_MAX_BODY_BYTES", 4 * MIB, lo=1024),
            max_horizon_hours=_int(environ, "FAREBOX_MAX_HORIZON_HOURS", 1344, lo=1),
            max_attempts=_int(environ, "FAREBOX_MAX_ATTEMPTS", 3, lo=1),
            retry_after_s=_int(environ, "FAREBOX_RETRY_AFTER_S", 10, lo=1),
            max_configurations=_int(environ, "FAREBOX_MAX_CONFIGURATIONS", 2_000_000, lo=1),
            max_slo_checks=_int(environ, "FAREBOX_MAX_SLO_CHECKS", 12_000_000, lo=1),
            max_screen_combinations=_int(environ, "FAREBOX_MAX_SCREEN_COMBINATIONS", 100_000, lo=1),
            max_plan_rows=_int(environ, "FAREBOX_MAX_PLAN_ROWS", 300_000, lo=1),
            max_store_bytes=_int(environ, "FAREBOX_MAX_STORE_BYTES", 2048 * MIB, lo=MIB),
            solver_memory_mb=_int(environ, "FAREBOX_SOLVER_MEMORY_MB", 8192, lo=256),
            api_token=environ.get("FAREBOX_API_TOKEN") or None,
            sweep_workers=_int(environ, "FAREBOX_SWEEP_WORKERS", 1, lo=1),
            sweep_queue_max=_int(environ, "FAREBOX_SWEEP_QUEUE_MAX", 4, lo=1),
            sweep_max_points=_int(environ, "FAREBOX_SWEEP_MAX_POINTS", 64, lo=1),
            sweep_max_evaluations=_int(environ, "FAREBOX_SWEEP_MAX_EVALUATIONS", 200_000, lo=0),
            sweep_max_s=_float(environ, "FAREBOX_SWEEP_MAX_S", 3600.0),
            sweep_max_expanded_bytes=_int(
                environ, "FAREBOX_SWEEP_MAX_EXPANDED_BYTES", 128 * MIB, lo=1024
            ),
            sweeps_kept=_int(environ, "FAREBOX_SWEEPS_KEPT", 32, lo=1),
            parent_pid=_int(environ, "FAREBOX_PARENT_PID", 0, lo=0) or None,
        )


def _int(environ: Mapping[str, str], name: str, default: int, *, lo: int) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"{name}: expected an integer, got {raw!r}") from None
    if value < lo:
        raise InputError(f"{name}: must be >= {lo}, got {value}")
    return value


def _float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{name}: expected a number, got {raw!r}") from None
    if not value > 0:
        raise InputError(f"{name}: must be > 0, got {value}")
    return value
