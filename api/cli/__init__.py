"""The ``farebox`` command line. Each subcommand is a module of this package with
``register(subparsers)``; it is found here by name, so adding a command touches no other file.

Subcommand modules import only the standard library and ``fleet.errors`` at the top; the solver,
the web stack, polars and matplotlib load inside the command that needs them, so ``farebox
--help`` and ``farebox estimate`` start fast (docs/cli.md has the measurements).

Errors: an ``InputError`` is one line on stderr and exit 2; a closed stdout (``farebox ... |
head``) ends the command quietly with exit 141, the shell's code for SIGPIPE.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any

from fleet.errors import InputError

EXIT_INPUT = 2
EXIT_BROKEN_PIPE = 128 + 13
"""What a shell reports for a process killed by SIGPIPE, as ``yes | head`` gives."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option with a default shows it (``None``, ``False`` and
    empty defaults mean "not given", whose meaning the help text states)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or default is None
            or default is False
            or (isinstance(default, list | tuple) and not default)
            or default is argparse.SUPPRESS
            or not action.option_strings
        ):
            return action.help
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="farebox",
        description="Plan an LLM inference fleet and price its service tiers.",
        formatter_class=HelpFormatter,
    )
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except InputError as err:
        print(f"farebox {args.command}: error: {err}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        # The reader went away (``| head``): nothing left to say. Point stdout at /dev/null so
        # the interpreter's final flush does not raise again (no-op when stdout is no file).
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print(f"farebox {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
