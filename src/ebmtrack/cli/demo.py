"""``ebmtrack demo``: track the clip shipped in the package and write video, plot and scores."""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path

from ebmtrack.cli.main import (
    CLIError,
    add_device_argument,
    add_out_argument,
    add_progress_argument,
    add_threads_argument,
    signals_held,
)
from ebmtrack.cli.paths import check_output_folder
from ebmtrack.cli.tracker_options import add_tracker_arguments, tracker_settings


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="track the bundled clip; write an annotated video, a success plot and scores",
        description=(
            "Run a tracker on the real clip shipped with ebmtrack (OTB 'Couple', 140 frames) "
            "from its first ground-truth box. Writes demo.mp4, demo.gif, success.png (the "
            "success plot), boxes.txt and metrics.json to --out and prints AUC, precision at "
            "20 px and FPS. The files are written under temporary names and renamed into place "
            "together at the end: an interrupted demo leaves --out's earlier files as they "
            "were. Needs no arguments and no network."
        ),
    )
    add_out_argument(parser, "output folder", default=Path("runs/demo"))
    add_tracker_arguments(parser)
    add_device_argument(parser, default=None, default_text="the tracker's, cpu")
    parser.add_argument(
        "--no-video", action="store_true", help="skip demo.mp4 and demo.gif (faster)"
    )
    parser.add_argument(
        "--max-frames", type=int, help="track only the first N frames (default: all)"
    )
    add_threads_argument(parser)
    add_progress_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ebmtrack.evaluation.demo import DemoConfig, output_names, run_demo

    if args.max_frames is not None and args.max_frames < 2:
        raise CLIError(f"--max-frames must be at least 2, got {args.max_frames}")
    check_output_folder(args.out)
    name, options = tracker_settings(args)
    config = DemoConfig(
        out=args.out,
        tracker=name,
        weights=options.get("weights"),
        backbone=options.get("backbone"),
        backbone_weights=options.get("backbone_weights"),
        peer_models=options.get("model_dir"),
        device=options.get("device"),
        runtime=options.get("runtime"),
        video=not args.no_video,
        max_frames=args.max_frames,
        progress=not args.no_progress,
        threads=args.threads or None,
    )
    earlier = [n for n in output_names(config.video).values() if (args.out / n).is_file()]
    renamed: list[bool] = []

    @contextmanager
    def hold():
        with signals_held():  # the renames whole: a stop takes effect after the last one
            yield
            renamed.append(True)

    try:
        result = run_demo(config, hold)
    except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM: what --out holds, in its one line
        if renamed:
            err.add_note(f"this run's files are complete in {args.out}")
        elif earlier:
            err.add_note(f"{args.out} keeps the earlier {', '.join(earlier)} as they were")
        else:
            err.add_note(f"nothing written to {args.out}")
        raise
    rows = [
        ("clip", result.clip),
        ("frames", str(result.frames)),
        ("AUC", f"{100 * result.auc:.1f}"),
        ("precision @ 20 px", f"{100 * result.precision:.1f}"),
        ("FPS (tracking only)", f"{result.fps_tracking:.1f}"),
        ("FPS (whole loop)", f"{result.fps_loop:.1f}"),
    ]
    rows += [(name, str(path)) for name, path in result.files.items()]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0
