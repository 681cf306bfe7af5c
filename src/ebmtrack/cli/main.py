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


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (argparse prints the one-line error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--threads N`` for commands that track: one torch thread by default, because on a busy
    2-core machine two threads ran 8-40x slower than one (docs/demo.md)."""
    parser.add_argument(
        "--threads",
        type=non_negative_int,
        default=1,
        help="torch CPU threads (default 1, the fastest on a busy machine; 0 = torch's default)",
    )


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
