"""Where the CLI writes: output paths are checked before any work, so a typo in ``--csv``,
``--png``, ``--json`` or ``--out`` is one line naming the flag (exit 2) and not a traceback after a
long solve. Files go into an existing folder; report folders are created (with their parents)."""

from __future__ import annotations

from pathlib import Path

from fleet.errors import InputError


def output_file(path: Path | None, flag: str) -> None:
    """``path`` can be written as a file: its folder exists and it is not itself a folder."""
    if path is None:
        return
    folder = path.parent
    if not folder.exists():
        raise InputError(f"{flag}: cannot write {path}: folder {folder} does not exist")
    if not folder.is_dir():
        raise InputError(f"{flag}: cannot write {path}: {folder} is not a folder")
    if path.is_dir():
        raise InputError(f"{flag}: cannot write {path}: it is a folder; give a file name")


def output_folder(path: Path, flag: str) -> None:
    """``path`` is, or can be created as, a folder (a file in the way is an error)."""
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                what = "it is a file" if part == path else f"{part} is a file"
                raise InputError(f"{flag}: cannot write into {path}: {what}; give a folder")
            return


def write_error(flag: str, path: Path, err: OSError) -> InputError:
    """An OSError while writing ``path`` as the one-line error of ``flag``."""
    return InputError(f"{flag}: cannot write {path}: {err.strerror or err}")
