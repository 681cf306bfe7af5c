"""``ebmtrack track``: follow one object through a video or a folder of frames."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from ebmtrack.cli.main import CLIError, add_threads_argument


def _parse_box(text: str) -> tuple[float, float, float, float]:
    """``"x,y,w,h"`` -> four floats; CLIError (one line, exit 2) otherwise."""
    try:
        values = tuple(float(p) for p in text.replace(" ", "").split(","))
    except ValueError:
        values = ()
    if len(values) != 4:
        raise CLIError(f"--init must be X,Y,W,H (four numbers), got {text!r}")
    return values


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "track",
        help="track one object through a video or a folder of frames",
        description=(
            "Track the object given by --init through SOURCE: a video file, a folder of frames "
            "(sorted by name) or a sequence folder holding img/. Writes one x,y,w,h line per "
            "frame (the first is the initial box) to --out, or to stdout."
        ),
    )
    parser.add_argument("source", type=Path, help="video file, frame folder, or folder with img/")
    parser.add_argument(
        "--init", required=True, metavar="X,Y,W,H", help="the box in the first frame"
    )
    parser.add_argument("--tracker", default="atom", help="tracker name (default atom)")
    parser.add_argument(
        "--backbone", default="mobilenetv2", help="backbone of atom (default mobilenetv2)"
    )
    parser.add_argument("--weights", type=Path, help="IoU-Net weights of atom (.safetensors)")
    parser.add_argument("--out", type=Path, help="boxes file (default: stdout)")
    parser.add_argument("--render", type=Path, help="write a video with the boxes drawn (mp4)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--search-size", type=int, help="atom search-region size in pixels (default 288)"
    )
    parser.add_argument(
        "--onnx", action="store_true", help="atom: run the backbone with ONNX Runtime"
    )
    add_threads_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _frames(source: Path) -> tuple[Iterator, int | None, float]:
    """(iterator of RGB frames, number of frames or None, frames per second) of ``source``."""
    import cv2

    from ebmtrack.data.io import list_images, read_image

    if not source.exists():
        raise FileNotFoundError(f"source not found: {source}")
    if source.is_dir():
        folder = source / "img" if (source / "img").is_dir() else source
        paths = list_images(folder)
        return (read_image(p, keep_gray=True) for p in paths), len(paths), 30.0
    capture = cv2.VideoCapture(str(source))
    if not capture.isOpened():
        raise ValueError(f"cannot open video (or unknown image folder layout): {source}")
    count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or None
    fps = capture.get(cv2.CAP_PROP_FPS) or 30.0

    def read() -> Iterator:
        try:
            while True:
                ok, frame = capture.read()
                if not ok:
                    return
                yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        finally:
            capture.release()

    return read(), count, fps


def _build_tracker(args: argparse.Namespace):
    from ebmtrack.api import load_tracker

    if args.tracker != "atom":
        if args.weights is not None or args.search_size is not None or args.onnx:
            raise CLIError("--weights, --search-size and --onnx apply to --tracker atom only")
        return load_tracker(args.tracker, threads=args.threads)
    params = {"device": args.device}
    if args.search_size is not None:
        params["search_size"] = args.search_size
    if args.onnx:
        params["backbone_runtime"] = "onnx"
    return load_tracker(
        "atom", weights=args.weights, backbone=args.backbone, threads=args.threads, **params
    )


def run(args: argparse.Namespace) -> int:
    import sys
    from contextlib import ExitStack

    from tqdm import tqdm

    from ebmtrack.evaluation.render import Mp4Writer, draw_track
    from ebmtrack.tracking.base import validate_box

    init = _parse_box(args.init)
    frames, count, fps = _frames(args.source)
    first = next(frames, None)
    if first is None:
        raise CLIError(f"no frames could be read from {args.source}")
    box = validate_box(init, first.shape, "--init")
    tracker = _build_tracker(args)

    with ExitStack() as stack:
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            out = stack.enter_context(open(args.out, "w", encoding="utf-8"))
        else:
            out = sys.stdout
        renderer = None
        if args.render is not None:
            args.render.parent.mkdir(parents=True, exist_ok=True)
            renderer = stack.enter_context(
                Mp4Writer(args.render, fps, (first.shape[1], first.shape[0]))
            )
        progress = stack.enter_context(
            tqdm(total=count, unit="frame", disable=args.no_progress, desc="track")
        )

        def emit(frame, result_box, score: float, status: str) -> None:
            # One line per frame, flushed: an interrupted run keeps every box so far.
            out.write(",".join(f"{v:.2f}" for v in result_box) + "\n")
            out.flush()
            if renderer is not None:
                renderer.write(draw_track(frame, result_box, score, status))
            progress.update()

        tracker.initialize(first, box)
        emit(first, box, float("nan"), "normal")
        for frame in frames:
            result = tracker.track(frame)
            emit(frame, result.box, result.score, result.status.value)
    return 0
