"""One ``farebox serve`` per database file, and none on a port that is taken.

At start ``farebox serve`` puts plans that were left running back in the queue (their server was
killed). That is only right when no other server is serving the file, so the main process first
takes an exclusive ``flock`` on ``<db>.lock`` beside the file and holds it for its whole life;
granian's worker processes, forked from it on Linux, inherit it, so a worker that outlives a
killed main process (for the second its watchdog needs) still holds it. The kernel drops the
lock when the last holder dies (kill -9 included), so a stale lock file never blocks a restart.
A second server on the same file is refused before it touches anything, naming the holder's pid
and address from the lock file.

granian binds its port with ``SO_REUSEPORT``, so a second granian on the same port would start
and share the first's connections. ``check_port_free`` binds the address without that option
first: a port anyone listens on is refused with one line. (Between this check and granian's own
bind there is a window of milliseconds in which another process could take the port.)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from pathlib import Path
from typing import TextIO

from fleet.errors import InputError


def lock_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".lock")


class ServerLock:
    """The exclusive lock on one database file, held until ``release`` or process exit."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.path = lock_path(db_path)
        self._file: TextIO | None = None

    def acquire(self, holder: str) -> None:
        """Take the lock and write ``holder`` (pid, address) into the file; InputError naming
        the file and the current holder when another server has it."""
        folder = self.db_path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            problem = "a file is in the way" if isinstance(err, FileExistsError) else err.strerror
            raise InputError(
                f"{self.db_path}: cannot create its directory {folder}: {problem}"
            ) from None
        try:
            file = self.path.open("a+", encoding="utf-8")
        except OSError as err:
            raise InputError(f"{self.path}: cannot create the lock file: {err.strerror}") from None
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            file.seek(0)
            other = file.read().strip() or "unknown"
            file.close()
            if err.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise InputError(
                    f"{self.db_path}: already served by another farebox serve ({other}); "
                    "stop it first or pass another --db"
                ) from None
            raise InputError(f"{self.path}: cannot lock: {err.strerror}") from None
        file.seek(0)
        file.truncate()
        file.write(holder + "\n")
        file.flush()
        self._file = file

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def check_port_free(host: str, port: int) -> None:
    """InputError when ``host:port`` cannot be bound (someone listens on it, or the address is
    not local)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise InputError(f"--host: cannot resolve {host!r}: {err.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise InputError(
                    f"--port: {host}:{port} is already in use (another farebox serve?)"
                ) from None
            raise InputError(f"--host/--port: cannot bind {host}:{port}: {err.strerror}") from None


def holder_line(host: str, port: int) -> str:
    return f"pid {os.getpid()}, http://{host}:{port}"
