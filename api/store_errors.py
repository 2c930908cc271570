"""Why the SQLite file cannot serve, in words an operator acts on: corrupt, unwritable or busy,
with the file's path. ``farebox serve`` prints it as one line; ``/health`` and the API's 503s
report it."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class StoreError(Exception):
    """The SQLite file cannot serve: ``kind`` is "corrupt", "unwritable" or "busy"."""

    def __init__(self, path: Path, kind: str, problem: str) -> None:
        super().__init__(f"{path}: store {kind}: {problem}")
        self.path = path
        self.kind = kind
        self.problem = problem

    @property
    def status(self) -> str:
        """``store unwritable: /data/farebox.sqlite: attempt to write a readonly database``"""
        return f"store {self.kind}: {self.path}: {self.problem}"


class StoreFull(Exception):
    """The plan store is at its size limit: a new plan would grow it further. Nothing stored is
    evicted to make room; deleting plans does."""

    def __init__(self, used_bytes: int, max_bytes: int) -> None:
        super().__init__(
            f"the plan store holds {used_bytes / 2**20:,.0f} MiB, at this server's limit of "
            f"{max_bytes / 2**20:,.0f} MiB (FAREBOX_MAX_STORE_BYTES); delete plans no longer "
            "needed (DELETE /v1/plans/{id}) to make room"
        )
        self.used_bytes = used_bytes
        self.max_bytes = max_bytes


_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")


def store_error(path: Path, err: sqlite3.Error | OSError) -> StoreError:
    """Classify a SQLite or file-system error by SQLite's result code."""
    if isinstance(err, OSError):
        return StoreError(path, "unwritable", err.strerror or str(err))
    name = getattr(err, "sqlite_errorname", "") or ""
    if name.startswith(_CORRUPT):
        kind = "corrupt"
    elif name.startswith(_BUSY):
        kind = "busy"
    else:  # READONLY, CANTOPEN, IOERR, FULL, PERM, ...
        kind = "unwritable"
    return StoreError(path, kind, f"{err} ({name})" if name else str(err))
