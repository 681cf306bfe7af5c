"""``ebmtrack track``: follow one object through a video or a folder of frames.

Outputs are atomic: the boxes file (and the ``--render`` video) is written under a temporary name
beside its destination and renamed into place when the last frame is done, so an existing file is
replaced only by a complete one. When tracking stops early (a frame that cannot be decoded,
Ctrl-C, SIGTERM), what was written is kept as ``PATH.partial`` and the error line says how many
boxes it holds.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

from ebmtrack.cli.main import (
    CLIError,
    add_device_argument,
    add_out_argument,
    add_progress_argument,
    add_threads_argument,
    check_output_file,
    threads,
)
from ebmtrack.cli.options import OPTION_HELP
from ebmtrack.cli.trackers import add_tracker_arguments, tracker_settings

logger = logging.getLogger("ebmtrack")

# Containers FFmpeg reads as video. Anything else that is not a folder is refused: FFmpeg also
# "plays" text files and single images, which is never what was meant.
VIDEO_SUFFIXES = (
    ".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".wmv", ".flv", ".ts",
    ".mts", ".m2ts", ".3gp", ".ogv", ".gif", ".y4m",
)  # fmt: skip


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
            "frame (the first is the initial box, clipped to the frame) to --out, or to stdout. "
            "--out and --render are replaced only when tracking finishes; an interrupted run "
            "leaves PATH.partial."
        ),
    )
    parser.add_argument("source", type=Path, help="video file, frame folder, or folder with img/")
    parser.add_argument(
        "--init",
        required=True,
        metavar="X,Y,W,H",
        help="the box in the first frame (clipped to the frame if it crosses an edge)",
    )
    add_tracker_arguments(parser)
    add_out_argument(parser, "boxes file (default: stdout)", file=True)
    parser.add_argument(
        "--render", type=Path, metavar="FILE", help="also write a video with the boxes drawn (mp4)"
    )
    # The tracker flags are tracker options, as --option KEY=VALUE is; a tracker that does not
    # take one refuses it.
    add_device_argument(parser, default=None, default_text="the tracker's, cpu")
    parser.add_argument(
        "--search-size",
        type=int,
        help="search-region side in pixels (option search_size; default 288)",
    )
    parser.add_argument(
        "--onnx",
        action="store_true",
        help="run the backbone with ONNX Runtime in float32 (option backbone_runtime=onnx; "
        "exported once into ~/.cache/ebmtrack/onnx; the default on a CPU in float32 is its int8 "
        "model, option backbone_runtime=onnx-int8)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"any option of the tracker, e.g. size_update_rate=0.5 ({OPTION_HELP})",
    )
    add_threads_argument(parser)
    add_progress_argument(parser)
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
    if source.suffix.lower() not in VIDEO_SUFFIXES:
        raise CLIError(
            f"source {source}: not a video file ({', '.join(VIDEO_SUFFIXES[:6])}, ...) nor a "
            "folder of images"
        )
    capture = cv2.VideoCapture(str(source))
    if not capture.isOpened():
        raise ValueError(f"cannot open video: {source}")
    count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or None
    fps = capture.get(cv2.CAP_PROP_FPS) or 30.0

    def read() -> Iterator:
        got = 0
        try:
            while True:
                ok, frame = capture.read()
                if not ok:
                    break
                got += 1
                yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        finally:
            capture.release()
        if count is not None and got < count:
            logger.warning(
                "read %d of the %d frames %s announces: the file is truncated or damaged",
                got,
                count,
                source,
            )

    return read(), count, fps


class _AtomicOutput:
    """A file written under a temporary name in its destination's folder and renamed into place
    by :meth:`commit`; :meth:`keep_partial` moves it to ``PATH.partial`` instead. A path that
    exists and is not a regular file (``/dev/stdout``, a pipe) is written in place."""

    def __init__(self, path: Path, what: str, suffix: str = "") -> None:
        self.path, self.what = path, what
        self.complete_size: int | None = None  # bytes of whole lines written, when known
        self.direct = path.exists() and not path.is_file()
        if self.direct:
            self.temp = path
            return
        folder = path.parent
        folder.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=suffix)
        os.close(handle)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(name, 0o666 & ~umask)  # the mode open() would give, not mkstemp's 0600
        self.temp = Path(name)

    @property
    def partial(self) -> Path:
        return self.path.with_name(self.path.name + ".partial")

    def commit(self) -> None:
        if not self.direct:
            os.replace(self.temp, self.path)

    def keep_partial(self) -> Path:
        """Where what was written stays: ``PATH.partial`` (``PATH`` itself when written in
        place)."""
        if self.direct:
            return self.path
        if self.temp.exists():
            if self.complete_size is not None:  # no torn last line after a failed write
                os.truncate(self.temp, self.complete_size)
            os.replace(self.temp, self.partial)
        return self.partial

    def discard(self) -> None:
        if not self.direct:
            self.temp.unlink(missing_ok=True)


def run(args: argparse.Namespace) -> int:
    from ebmtrack.api import load_tracker
    from ebmtrack.data.prefetch import prefetch
    from ebmtrack.tracking.init_box import clip_init_box

    init = _parse_box(args.init)
    # Every check that can fail comes before anything is written.
    for flag, path in (("--out", args.out), ("--render", args.render)):
        if path is not None:
            check_output_file(path, flag)
    if args.out and args.render and args.out.resolve() == args.render.resolve():
        raise CLIError("--out and --render name the same file")
    name, options = tracker_settings(args)
    frames, count, fps = _frames(args.source)
    frames = prefetch(frames)  # decoded ahead in a thread, beside the tracker
    first = next(frames, None)
    if first is None:
        raise CLIError(f"no frames could be read from {args.source}")
    box = clip_init_box(init, first.shape, "--init")

    try:
        with threads(args.threads):
            tracker = load_tracker(name, threads=args.threads, **options)
            _track(args, tracker, first, box, frames, count, fps)
    except OSError as err:
        if args.onnx and ".cache" in str(err.filename):
            err.add_note("--onnx exports the backbone into ~/.cache/ebmtrack/onnx")
        raise
    return 0


def _track(args, tracker, first, box, frames, count: int | None, fps: float) -> None:
    """Track ``frames`` after ``first`` and write the outputs, atomically."""
    from tqdm import tqdm

    from ebmtrack.evaluation.render import Mp4Writer, draw_track

    outputs: list[_AtomicOutput] = []
    written = 0
    with ExitStack() as stack:
        try:
            out, renderer = sys.stdout, None
            if args.out is not None:
                outputs.append(_AtomicOutput(args.out, "boxes"))
                out = stack.enter_context(open(outputs[-1].temp, "w", encoding="utf-8"))
            if args.render is not None:
                suffix = args.render.suffix or ".mp4"
                outputs.append(_AtomicOutput(args.render, "frames", suffix=suffix))
                size = (first.shape[1], first.shape[0])
                renderer = stack.enter_context(Mp4Writer(outputs[-1].temp, fps, size))
            progress = stack.enter_context(
                tqdm(total=count, unit="frame", disable=args.no_progress, desc="track")
            )
        except BaseException:
            stack.close()
            for output in outputs:
                output.discard()
            raise

        def emit(frame, result_box, score: float, status: str) -> None:
            nonlocal written
            # One line per frame, flushed: an interrupted run keeps every box so far.
            try:
                out.write(",".join(f"{v:.2f}" for v in result_box) + "\n")
                out.flush()
                if outputs and outputs[0].what == "boxes":
                    outputs[0].complete_size = out.tell()
            except OSError as err:  # a full disk: say which file
                if err.filename is None and args.out is not None:
                    err.filename = str(args.out)
                raise
            written += 1
            if renderer is not None:
                renderer.write(draw_track(frame, result_box, score, status))
            progress.update()

        try:
            tracker.initialize(first, box)
            emit(first, box, float("nan"), "normal")
            for frame in frames:
                result = tracker.track(frame)
                emit(frame, result.box, result.score, result.status.value)
            try:
                stack.close()  # closed (and flushed) before they are renamed
            except OSError as err:
                if err.filename is None and args.out is not None:
                    err.filename = str(args.out)
                raise
            for output in outputs:
                output.commit()
        except BaseException as err:
            try:
                stack.close()
            except OSError:
                pass  # the error being raised says it already
            _keep_partial(err, outputs, written, count)
            raise


def _keep_partial(
    err: BaseException, outputs: list[_AtomicOutput], written: int, count: int | None
) -> None:
    """Move the outputs to PATH.partial and say so in ``err``'s one line (nothing is kept when
    no box was written, or when stdout's reader went away)."""
    if written == 0 or isinstance(err, BrokenPipeError):
        for output in outputs:
            output.discard()
        return
    total = f" of {count}" if count else ""
    for output in outputs:
        err.add_note(f"{written}{total} {output.what} written to {output.keep_partial()}")
