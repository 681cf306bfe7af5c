"""The ``ebmtrack`` command.

Each subcommand lives in its own module of this package and exposes ``add_parser(subparsers)``,
which registers an ``argparse`` sub-parser whose ``func`` default takes the parsed arguments and
returns an exit code. Modules are imported lazily so that ``ebmtrack --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Module names under ebmtrack.cli, in the order --help lists them.
SUBCOMMANDS: tuple[str, ...] = ("demo", "eval", "regress1d", "train", "track")


class CLIError(Exception):
    """A user error: printed as one line on stderr, exit status 2, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    from ebmtrack import __version__

    parser = argparse.ArgumentParser(
        prog="ebmtrack",
        description="Visual object tracking with energy-based regression.",
    )
    parser.add_argument("--version", action="version", version=f"ebmtrack {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"ebmtrack.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except (CLIError, ValueError, FileNotFoundError, NotADirectoryError) as err:
        print(f"ebmtrack {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ebmtrack {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
