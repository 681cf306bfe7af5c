"""``--ray [ADDRESS]``: run a command's tasks on a Ray cluster (``eval``, ``track-many``)."""

from __future__ import annotations

import argparse
import importlib.util

from ebmtrack.cli.main import CLIError

RAY_MISSING = "--ray needs Ray: pip install 'ebmtrack[ray]'"


def add_ray_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help=f"run {what} as Ray tasks, one CPU and one thread each, on the cluster at ADDRESS "
        "(host:port, or auto: the one `ray start` began on this machine); without ADDRESS on "
        "a Ray started in this process (needs pip install 'ebmtrack[ray]')",
    )


def ray_target(args: argparse.Namespace) -> bool | str:
    """What ``run_evaluation(ray=...)`` and ``track-many`` take: False without ``--ray``, True
    for a local Ray, else the address; CLIError when Ray is not installed, or ``--workers``
    was given too."""
    if args.ray is None:
        return False
    if getattr(args, "workers", None) is not None:
        raise CLIError("--workers: not used with --ray (Ray runs a task per CPU of the cluster)")
    if importlib.util.find_spec("ray") is None:
        raise CLIError(RAY_MISSING)
    return args.ray or True
