"""``ebmtrack track``: follow one or several objects through a video, a folder of frames, a camera
or a stream.

Outputs are atomic: the boxes file (and the ``--render`` video) is written under a temporary name
beside its destination and renamed into place when the last frame is done, so an existing file is
replaced only by a complete one (and a ``PATH.partial`` an earlier run left is removed). When
tracking stops early (a frame that cannot be decoded, Ctrl-C, SIGTERM), what was written is kept
as ``PATH.partial`` and the error line says how many boxes it holds. A live source (camera,
device, URL) has no last frame: its boxes are written to ``PATH.partial`` as they come, and
Ctrl-C (or SIGTERM, or the end of the stream) ends the run normally, renaming it to ``PATH``.
The formats of the boxes file: :mod:`ebmtrack.cli.track_outputs`.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
import time
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ebmtrack.cli.main import (
    CLIError,
    Terminated,
    add_device_argument,
    add_out_argument,
    add_progress_argument,
    add_threads_argument,
    positive_int,
    signals_held,
    threads,
)
from ebmtrack.cli.options import OPTION_HELP
from ebmtrack.cli.paths import check_not_an_input, check_output_file, sequence_folder
from ebmtrack.cli.track_outputs import (
    FORMATS,
    RENDER_SUFFIXES,
    SKIPPED,
    AtomicOutput,
    BoxWriter,
    check_out_suffix,
    open_renderer,
    resolve_format,
)
from ebmtrack.cli.tracker_options import add_tracker_arguments, tracker_settings

logger = logging.getLogger("ebmtrack")

SELECT = "select"


def _parse_box(text: str) -> tuple[float, float, float, float]:
    """``"x,y,w,h"`` or ``"x y w h"`` (commas, spaces or tabs, as the annotation readers accept)
    -> four floats; CLIError (one line, exit 2) otherwise."""
    try:
        values = tuple(float(p) for p in re.split(r"[,\s]+", text.strip()) if p)
    except ValueError:
        values = ()
    if len(values) != 4:
        raise CLIError(f"--init must be X,Y,W,H (four numbers) or {SELECT}, got {text!r}")
    return values


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "track",
        help="track objects through a video, a folder of frames, a camera or a stream",
        description=(
            "Track the objects given by --init through SOURCE: a video file, a folder of frames "
            "(sorted by name), a sequence folder holding img/, a camera index (0), a device "
            "(/dev/video0) or a URL OpenCV opens (rtsp://, http://). Writes the boxes of every "
            "frame (the first is the initial box, clipped to the frame) to --out, or to stdout, "
            "and one summary line to stderr. --out and --render are replaced only when "
            "tracking finishes; an interrupted run leaves PATH.partial. A live source runs "
            "until the stream ends or Ctrl-C, which completes the files."
        ),
    )
    _add_source_arguments(parser)
    add_tracker_arguments(parser)
    _add_output_arguments(parser)
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
        "exported once into the ONNX cache, ~/.cache/ebmtrack/onnx or "
        "$XDG_CACHE_HOME/ebmtrack/onnx; the default on a CPU in float32 is its int8 model, "
        "option backbone_runtime=onnx-int8)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"any option of the tracker, e.g. size_update_rate=0.5 ({OPTION_HELP})",
    )
    parser.add_argument(
        "--max-frames",
        type=positive_int,
        metavar="N",
        help="track only the first N frames of SOURCE (the first is the initial box), then "
        "finish as at its end (default: all)",
    )
    add_threads_argument(parser)
    add_progress_argument(parser)
    parser.set_defaults(func=run)


def _add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """``source``, ``--init``, ``--init-file``."""
    parser.add_argument(
        "source", help="video file, frame folder, folder with img/, camera index, device or URL"
    )
    parser.add_argument(
        "--init",
        action="append",
        default=[],
        metavar="X,Y,W,H",
        help="a target's box in the first frame (commas or spaces; clipped to the frame if it "
        f"crosses an edge); repeat it for several targets; '{SELECT}': draw them with the "
        "mouse (needs OpenCV's GUI build)",
    )
    parser.add_argument(
        "--init-file",
        type=Path,
        metavar="FILE",
        help="the first frame's boxes, one x,y,w,h line per target (besides --init)",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out``, ``--format``, ``--render``, ``--show``, ``--on-bad-frame``."""
    add_out_argument(parser, "boxes file (default: stdout)", file=True)
    parser.add_argument(
        "--format",
        choices=("auto", *FORMATS),
        default="auto",
        help="boxes file format: txt (x,y,w,h per frame, one target), csv or jsonl (frame, "
        "target, box, score, status); auto (default): by --out's suffix (.csv, .jsonl, .txt; "
        "otherwise txt, or csv for several targets)",
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="FILE",
        help=f"also write the frames with the boxes drawn ({', '.join(RENDER_SUFFIXES)}; "
        ".mp4 is H.264 where this OpenCV can encode it, else mp4v)",
    )
    parser.add_argument(
        "--show", action="store_true", help="show the boxes, score and status in a window (q quits)"
    )
    parser.add_argument(
        "--on-bad-frame",
        choices=("stop", "skip"),
        default="stop",
        help="a frame that cannot be decoded: stop (default, keeping PATH.partial) or skip it "
        "(its boxes carried over with status skipped, the frame named in a warning)",
    )


def _init_boxes(args: argparse.Namespace) -> list | None:
    """The boxes of ``--init`` and ``--init-file`` in that order; None for ``--init select``."""
    from ebmtrack.data.datasets import read_boxes

    if SELECT in args.init:
        if len(args.init) > 1 or args.init_file is not None:
            raise CLIError(f"--init {SELECT} draws every box: give no other --init or --init-file")
        return None
    boxes = [_parse_box(text) for text in args.init]
    if args.init_file is not None:
        if not args.init_file.is_file():
            raise CLIError(f"--init-file {args.init_file}: file not found")
        try:
            boxes += [tuple(box) for box in read_boxes(args.init_file)]
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise CLIError(f"--init-file {args.init_file}: {err}") from None
    if not boxes:
        raise CLIError(
            f"give the first box: --init X,Y,W,H (repeatable), --init-file or --init {SELECT}"
        )
    return boxes


def _inputs(args: argparse.Namespace) -> dict[str, Path | None]:
    """What the run reads from files, by what it is (a path an output must not replace). A
    source folder of frames in ``img/`` is a sequence's: its parent, with the ground truth, is
    an input too."""
    source = Path(args.source)
    return {
        "source": source,
        "sequence folder": sequence_folder(source) if source.is_dir() else None,
        "--init-file": args.init_file,
        "--weights file": args.weights,
        "--backbone-weights file": args.backbone_weights,
        "--peer-models folder": args.peer_models,
    }


def _check_outputs(args: argparse.Namespace) -> None:
    """Outputs never replace an input, each other, or land in a file of another kind."""
    for flag, path in (("--out", args.out), ("--render", args.render)):
        if path is not None:
            check_output_file(path, flag)
            check_not_an_input(path, flag, _inputs(args))
    if args.out and args.render and args.out.resolve() == args.render.resolve():
        raise CLIError(
            f"--out {args.out} and --render {args.render} name the same file: give two paths"
        )
    if args.render is not None and args.render.suffix.lower() not in RENDER_SUFFIXES:
        suffixes = ", ".join(RENDER_SUFFIXES)
        raise CLIError(f"--render {args.render}: give a file ending in {suffixes}")
    try:
        check_out_suffix(args.format, args.out)
    except ValueError as err:
        raise CLIError(str(err)) from None


def run(args: argparse.Namespace) -> int:
    from ebmtrack.cli.window import require_gui, select_boxes
    from ebmtrack.data.prefetch import prefetch
    from ebmtrack.data.streams import BadFrame, open_source
    from ebmtrack.tracking.init_box import clip_init_box

    # Every check that can fail comes before anything is written.
    inits = _init_boxes(args)
    _check_outputs(args)
    if args.show:
        require_gui("--show")
    if inits is None:
        require_gui(f"--init {SELECT}")
    elif args.format != "auto" or args.out is not None:
        resolve_format(args.format, args.out, len(inits))
    name, options = tracker_settings(args)
    source = open_source(args.source, skip_bad=args.on_bad_frame == "skip")
    if args.max_frames is not None:
        source.frames = _first(source.frames, args.max_frames)
        if source.count is not None:  # a live source's end stays unknown: it may end first
            source.count = min(source.count, args.max_frames)
    source.frames = prefetch(source.frames)  # decoded ahead in a thread, beside the tracker
    first = next(source.frames, None)
    if first is None:
        raise CLIError(f"no frames could be read from {args.source}")
    if isinstance(first, BadFrame):
        raise CLIError(f"the first frame of {args.source} cannot be read: {first.reason}")
    if inits is None:
        inits = select_boxes(first)
    fmt = resolve_format(args.format, args.out, len(inits))
    boxes = [clip_init_box(box, first.shape, "--init") for box in inits]
    try:
        with threads(args.threads), _multi_tracker(args, name, options) as tracker:
            done = _track(args, tracker, first, boxes, source, fmt)
    except OSError as err:
        if args.onnx and ".cache" in str(err.filename):
            err.add_note(
                "--onnx exports the backbone into the ONNX cache (~/.cache/ebmtrack/onnx, or "
                "$XDG_CACHE_HOME/ebmtrack/onnx)"
            )
        raise
    print(done.summary(args, fmt, len(boxes)), file=sys.stderr)
    return 0


def _multi_tracker(args: argparse.Namespace, name: str, options: dict):
    """The tracker of ``run``: built, or in ``track-many``'s workers (``args.reuse_trackers``)
    lent by the process's cache (:mod:`ebmtrack.evaluation.tracker_cache`)."""
    from ebmtrack.api import load_multi_tracker
    from ebmtrack.evaluation.tracker_cache import lent_multi_tracker

    if getattr(args, "reuse_trackers", False):
        return lent_multi_tracker(name, threads=args.threads, **options)
    return nullcontext(load_multi_tracker(name, threads=args.threads, **options))


def _first(frames, count: int):
    """The first ``count`` items of ``frames``; ``frames`` is closed after them (a video's
    capture released) rather than read to its end."""
    try:
        for index, frame in enumerate(frames):
            yield frame
            if index + 1 >= count:
                return
    finally:
        close = getattr(frames, "close", None)
        if close is not None:
            close()


@dataclass
class _Run:
    """What one ``track`` run did, for its summary line."""

    frames: int = 0
    tracking_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0
    stopped: str = ""
    codec: str | None = None
    skipped: list[int] = field(default_factory=list)

    def summary(self, args: argparse.Namespace, fmt: str, targets: int) -> str:
        fps = self.frames / self.seconds if self.seconds > 0 else math.nan
        tracking = self.frames / self.tracking_seconds if self.tracking_seconds > 0 else math.nan
        parts = [
            f"{self.frames} frames",
            f"{targets} target{'s' if targets > 1 else ''}",
            f"{fps:.1f} FPS ({tracking:.1f} tracking only)",
            f"boxes in {args.out if args.out is not None else 'stdout'} ({fmt})",
        ]
        if args.render is not None:
            parts.append(f"video in {args.render}" + (f" ({self.codec})" if self.codec else ""))
        if self.skipped:
            parts.append(f"{len(self.skipped)} unreadable frame(s) skipped")
        if self.stopped:
            parts.append(f"stopped by {self.stopped}")
        return "ebmtrack track: " + ", ".join(parts)


class _Outputs:
    """The boxes file (or stdout), the rendered video and the window of one run."""

    def __init__(self, args) -> None:
        self.args, self.files = args, []
        self.renderer = self.window = self.image = None

    def open(self, stack: ExitStack, first, fmt: str, fps: float, count, live: bool) -> None:
        args = self.args
        out = sys.stdout
        if args.out is not None:
            self.files.append(AtomicOutput(args.out, "boxes", visible=live))
            out = stack.enter_context(open(self.files[-1].temp, "w", encoding="utf-8"))
        self.out, self.boxes = out, BoxWriter(out, fmt)
        if args.render is not None:
            self.files.append(AtomicOutput(args.render, "frames", suffix=args.render.suffix))
            size = (first.shape[1], first.shape[0])
            self.renderer = open_renderer(args.render, self.files[-1].temp, fps, size, count)
            stack.callback(self.renderer.close)
        if args.show:
            from ebmtrack.cli.window import Window

            self.window = Window()
            stack.callback(self.window.close)

    def emit(self, index: int, frame, results: list[tuple]) -> bool:
        """Write frame ``index`` (1-based); False when the window asked to stop."""
        from ebmtrack.evaluation.render import draw_track

        try:
            self.boxes.write(index, results)
            self.out.flush()  # an interrupted run keeps every box so far
            if self.files and self.files[0].what == "boxes":
                self.files[0].complete_size = self.out.tell()
        except OSError as err:  # a full disk: say which file
            if err.filename is None and self.args.out is not None:
                err.filename = str(self.args.out)
            raise
        if frame is not None and (self.renderer is not None or self.window is not None):
            image = frame
            for target, (box, score, status, _) in enumerate(results):
                label = f"#{target + 1}" if len(results) > 1 else ""
                caption = f"frame {index}" if target == len(results) - 1 else ""
                image = draw_track(image, box, score, status, caption=caption, label=label)
            self.image = image
        if self.renderer is not None and self.image is not None:
            self.renderer.write(self.image)
        if self.window is not None and frame is not None:
            return self.window.show(self.image)
        return True


def _track(args, tracker, first, boxes, source, fmt: str) -> _Run:
    """Track ``source``'s frames after ``first`` and write the outputs, atomically."""
    from tqdm import tqdm

    done, outputs = _Run(), _Outputs(args)
    with ExitStack() as stack:
        try:
            outputs.open(stack, first, fmt, source.fps, source.count, source.live)
            renderer = outputs.renderer
            done.codec = getattr(renderer, "note", None) or getattr(renderer, "codec", None)
            progress = stack.enter_context(
                tqdm(total=source.count, unit="frame", disable=args.no_progress, desc="track")
            )
        except BaseException:
            stack.close()
            for output in outputs.files:
                output.discard()
            raise
        try:
            try:
                _loop(tracker, first, boxes, source, outputs, progress, done)
            except KeyboardInterrupt as interrupt:
                if not source.live:
                    raise
                done.stopped = "SIGTERM" if isinstance(interrupt, Terminated) else "Ctrl-C"
            _close(stack, args)
            for output in outputs.files:
                output.commit()
        except BaseException as err:
            try:
                stack.close()
            except Exception:
                pass  # the error being raised says it already
            _keep_partial(err, outputs.files, done.frames, source.count)
            raise
    done.seconds = time.perf_counter() - done.started
    return done


def _loop(tracker, first, boxes, source, outputs: _Outputs, progress, done: _Run) -> None:
    from ebmtrack.data.streams import BadFrame

    tic = time.perf_counter()
    tracker.initialize(first, np.asarray(boxes))
    done.tracking_seconds += time.perf_counter() - tic
    last = [(np.asarray(box), math.nan, "normal", math.nan) for box in boxes]
    frame = first
    while True:
        with signals_held():  # Ctrl-C after the frame's lines and their count, never between
            keep_going = outputs.emit(done.frames + 1, frame, last)
            done.frames += 1
        if not keep_going:
            if source.live:
                done.stopped = "the window"
                return
            raise KeyboardInterrupt()
        progress.update()
        frame = next(source.frames, None)
        if frame is None:
            return
        if isinstance(frame, BadFrame):
            logger.warning("%s; skipped (--on-bad-frame skip)", frame.reason)
            done.skipped.append(frame.index + 1)
            last = [(box, math.nan, SKIPPED, math.nan) for box, *_ in last]
            frame = None
            continue
        tic = time.perf_counter()
        results = tracker.track(frame)
        done.tracking_seconds += time.perf_counter() - tic
        last = [
            (r.box, float(r.score), r.status.value, float(getattr(r, "confidence", math.nan)))
            for r in results
        ]


def _close(stack: ExitStack, args) -> None:
    try:
        stack.close()  # closed (and flushed) before they are renamed
    except OSError as err:
        if err.filename is None and args.out is not None:
            err.filename = str(args.out)
        raise


def _keep_partial(err: BaseException, outputs: list[AtomicOutput], written: int, count) -> None:
    """Move the outputs to PATH.partial and say so in ``err``'s one line (nothing is kept when
    no box was written, or when stdout's reader went away)."""
    if written == 0 or isinstance(err, BrokenPipeError):
        for output in outputs:
            output.discard()
        return
    total = f" of {count}" if count else ""
    for output in outputs:
        err.add_note(f"{written}{total} {output.what} written to {output.keep_partial()}")
