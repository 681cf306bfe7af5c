"""``ebmtrack export``: write a tracker's files for the torch-free runtime (``ebmtrack.lite``)."""

from __future__ import annotations

import argparse

from ebmtrack.cli.main import CLIError, add_out_argument, add_progress_argument
from ebmtrack.cli.options import OPTION_HELP
from ebmtrack.cli.tracker_options import add_tracker_arguments, tracker_settings


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a tracker's ONNX graphs and parameters for the runtime without PyTorch",
        description=(
            "Build a tracker as 'track' would and write what ebmtrack.lite needs to run it with "
            "ONNX Runtime and NumPy alone (OpenCV where installed): the backbone in float32 and "
            "int8, the box "
            "head's graphs, the parameters as JSON and a manifest with every file's sha256 "
            "(docs/lite.md). --out must be new, empty, or an earlier export."
        ),
    )
    add_out_argument(parser, "the export folder (new, empty, or an earlier export to replace)")
    add_tracker_arguments(parser)
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"any option of the tracker, e.g. search_size=256 ({OPTION_HELP})",
    )
    add_progress_argument(parser)  # as every command takes it: an export draws no bar
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ebmtrack.export import EXPORTABLE, check_destination, export_tracker
    from ebmtrack.lite.files import read_manifest
    from ebmtrack.tracking.registry import tracker_kind

    check_destination(args.out)  # before the tracker is built
    if args.runtime == "lite":
        raise CLIError("--runtime lite: an export is made from the torch tracker (--runtime torch)")
    args.runtime = "torch"  # so its options are the torch tracker's (search_size, backbone, ...)
    name, options = tracker_settings(args)
    options.pop("runtime")
    if not tracker_kind(name).backbone:
        raise CLIError(f"--tracker {name}: cannot be exported; the lite runtime runs {EXPORTABLE}")
    out = export_tracker(name, args.out, **options)
    manifest = read_manifest(out)
    total = sum(entry["bytes"] for entry in manifest["files"].values())
    backbone = manifest["backbone"]
    print(
        f"exported {name} to {out}: {len(manifest['files']) + 1} files, {total / 2**20:.1f} MiB "
        f"(backbone {', '.join(sorted(backbone['files']))}; default {backbone['runtime']}"
        f"{'; box head' if manifest['head'] else ''})"
    )
    return 0
