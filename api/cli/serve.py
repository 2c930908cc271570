"""``farebox serve``: run the REST API under granian.

Flags become ``FAREBOX_*`` environment variables (see ``api.settings``), because granian imports
the app factory ``api.app:create_app`` afresh in each of its worker processes; the factory builds
its settings from them once. Before the workers start, plans the previous server left running
(it was killed) go back to the queue, so they run again at once: a database file is served by one
``farebox serve`` at a time, which ``api.server_lock`` enforces. A second server on the same file
or port, and a database file that is corrupt or cannot be written, are refused with one line
naming it and exit status 2, before anything is changed.

granian was chosen over uvicorn by measurement (docs/api.md: a trivial Litestar GET at 13-18k
req/s vs 4-8k on this 2-core machine); one HTTP worker process is the default because the solver
processes need the cores.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fleet.errors import InputError

_FLAG_ENV = {
    "db": "FAREBOX_DB",
    "data_dir": "FAREBOX_DATA_DIR",
    "workers": "FAREBOX_WORKERS",
    "queue_max": "FAREBOX_QUEUE_MAX",
    "catalog_dir": "FAREBOX_CATALOG_DIR",
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the REST API (plans, catalog, performance model) under granian",
        description=(
            "Serve the farebox REST API. Plans are stored in a SQLite file and solved in worker "
            "processes; OpenAPI docs at /schema. Other settings: FAREBOX_* variables "
            "(docs/api.md)."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port (default %(default)s)")
    parser.add_argument("--db", type=Path, help="SQLite file (default: DATA_DIR/farebox.sqlite)")
    parser.add_argument("--data-dir", type=Path, help="directory of the default SQLite file")
    parser.add_argument(
        "--workers", type=int, help="solver worker processes, i.e. solves at once (default 1)"
    )
    parser.add_argument(
        "--queue-max", type=int, help="plans that may wait for a worker before 503 (default 16)"
    )
    parser.add_argument("--catalog-dir", type=Path, help="catalog data files (default: packaged)")
    parser.add_argument(
        "--http-workers",
        type=int,
        default=1,
        help="granian worker processes answering HTTP (default %(default)s)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise InputError(f"--port: must be in 1..65535, got {args.port}")
    for flag, lo in (("http_workers", 1), ("workers", 1), ("queue_max", 0)):
        value = getattr(args, flag)
        if value is not None and value < lo:
            raise InputError(f"--{flag.replace('_', '-')}: must be >= {lo}, got {value}")
    for flag, variable in _FLAG_ENV.items():
        value = getattr(args, flag)
        if value is not None:
            os.environ[variable] = str(value)

    from api.server_lock import ServerLock, check_port_free, holder_line
    from api.settings import Settings
    from api.store import Store
    from api.store_errors import StoreError

    os.environ["FAREBOX_PARENT_PID"] = str(os.getpid())
    settings = Settings.from_env(os.environ)
    # Refuse before touching the file: another server's running plans are not ours to requeue.
    lock = ServerLock(settings.db_path)
    lock.acquire(holder_line(args.host, args.port))
    check_port_free(args.host, args.port)
    store = Store(settings.db_path)
    try:
        store.initialize()
        requeued = store.requeue_running(settings.max_attempts)
    except StoreError as err:
        raise InputError(str(err)) from None
    finally:
        store.close()
    print(
        f"farebox serve: http://{args.host}:{args.port} db={settings.db_path} "
        f"workers={settings.workers} queue_max={settings.queue_max}"
        + (f"; {requeued} interrupted plan(s) queued again" if requeued else ""),
        file=sys.stderr,
        flush=True,
    )

    from granian import Granian
    from granian.constants import Interfaces

    Granian(
        target="api.app:create_app",
        factory=True,
        address=args.host,
        port=args.port,
        interface=Interfaces.ASGI,
        workers=args.http_workers,
        log_access=False,
    ).serve()
    return 0
