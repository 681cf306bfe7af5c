"""The demo (``ebmtrack demo``): track the clip shipped in the package and show how it went.

The clip is OTB's ``Couple`` (``ebmtrack/demo_data/Couple``, provenance in its PROVENANCE.md).
It is a test clip: training must not use it, and :data:`DEMO_SEQUENCES` names it for
evaluation code that marks seen sequences. The demo tracks it in one pass from the first
frame's ground truth and writes, to one folder: ``demo.mp4`` and ``demo.gif`` (boxes drawn, see
:mod:`ebmtrack.evaluation.render`), ``success.png``, ``boxes.txt`` (one ``x,y,w,h`` line per
frame) and ``metrics.json``. The scores follow the OTB protocol of ``ebmtrack eval`` and are
computed from ``boxes.txt`` as written.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ebmtrack.data.datasets import Sequence, load_folder, read_boxes
from ebmtrack.evaluation.plots import plot_success
from ebmtrack.evaluation.provenance import environment, tracker_provenance
from ebmtrack.evaluation.render import GifBudget, GifWriter, Mp4Writer, draw_track
from ebmtrack.evaluation.scoring import OTB_PROTOCOL, score_run
from ebmtrack.files import write_atomic_set
from ebmtrack.process import torch_threads
from ebmtrack.tracking.base import Tracker
from ebmtrack.tracking.init_box import clip_init_box
from ebmtrack.tracking.runtime import resolve_runtime

DEMO_CLIP = "Couple"
DEMO_DATA = Path(__file__).resolve().parents[1] / "demo_data"
# Sequences shipped for the demo, by data set layout: results on them are not held-out results.
DEMO_SEQUENCES: dict[str, tuple[str, ...]] = {"otb": (DEMO_CLIP,)}


@dataclass(frozen=True)
class DemoConfig:
    """What ``ebmtrack demo`` runs.

    Attributes:
        out: output folder (created).
        tracker: a registered tracker name (:func:`ebmtrack.load_tracker`).
        weights: the tracker's ``weights`` option (None: its default); refused by trackers
            without one.
        backbone: the tracker's ``backbone`` option (None: its default).
        backbone_weights: the tracker's ``backbone_weights`` option, the backbone's weights file
            (None: the shipped ImageNet weights; required for resnet18, resnet50 and nanotrack).
        peer_models: the ``model_dir`` option of OpenCV's ``nanotrack`` / ``vit``, the folder
            holding their ONNX files.
        device: the tracker's ``device`` option (``cpu``, ``cuda``; None: its default).
        runtime: ``lite`` or ``torch`` (None: the tracker's default,
            :mod:`ebmtrack.tracking.runtime`).
        video: write ``demo.mp4`` and ``demo.gif``.
        max_frames: track only the first max_frames frames (None: the whole clip).
        progress: show a progress bar.
        threads: CPU threads while the demo runs, torch's or ONNX Runtime's (None: torch's
            default, one per core).
            1 by default: on a shared 2-core machine with other jobs running, torch's default
            (2 threads) ran the demo about 16 times slower than 1 thread (docs/demo.md).
        playback_fps: frame rate of the written video and GIF.
        gif: size budget of the GIF.
    """

    out: Path = Path("runs/demo")
    tracker: str = "atom"
    weights: Path | None = None
    backbone: str | None = None
    backbone_weights: Path | None = None
    peer_models: Path | None = None
    device: str | None = None
    runtime: str | None = None
    video: bool = True
    max_frames: int | None = None
    progress: bool = True
    threads: int | None = 1
    playback_fps: float = 25.0
    gif: GifBudget = field(default_factory=GifBudget)


@dataclass(frozen=True)
class DemoResult:
    """What the demo measured and wrote.

    Attributes:
        clip: sequence name; frames: frames tracked (the first one is the initialisation).
        auc: success AUC in [0, 1]; precision: fraction of frames with centre error <= 20 px.
        fps_tracking: frames / seconds spent in ``initialize`` and ``track`` (as ``ebmtrack
            eval``); fps_loop: frames / seconds of the whole loop (decoding, tracking and, with
            video, drawing and encoding); init_seconds: time of ``initialize``.
        files: output name (``mp4``, ``gif``, ``success``, ``boxes``, ``metrics``) -> path.
    """

    clip: str
    frames: int
    auc: float
    precision: float
    fps_tracking: float
    fps_loop: float
    init_seconds: float
    files: dict[str, Path]


def demo_sequence(max_frames: int | None = None) -> Sequence:
    """The shipped demo clip, or its first ``max_frames`` frames (>= 2)."""
    sequence = load_folder(DEMO_DATA / DEMO_CLIP, dataset="otb")[0]
    if max_frames is None:
        return sequence
    if max_frames < 2:
        raise ValueError(f"max_frames must be at least 2 (or None for all), got {max_frames}")
    n = min(max_frames, len(sequence))
    return Sequence(
        name=sequence.name,
        frames=sequence.frames[:n],
        ground_truth=sequence.ground_truth[:n],
        dataset=sequence.dataset,
    )


def prepare_output_folder(out: str | Path) -> Path:
    """Create ``out`` and check that files can be written there.

    Raises:
        NotADirectoryError: ``out`` (or a parent) is an existing file.
        ValueError: ``out`` cannot be created or written to.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"out: {out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except (FileExistsError, NotADirectoryError) as err:
        raise NotADirectoryError(f"out: a parent of {out} is a file, not a folder") from err
    except OSError as err:
        raise ValueError(f"out: cannot write to {out}: {err.strerror or err}") from err
    return out


def _build_tracker(config: DemoConfig) -> Tracker:
    from ebmtrack.api import load_tracker

    given = {
        "weights": config.weights,
        "backbone": config.backbone,
        "backbone_weights": config.backbone_weights,
        "model_dir": config.peer_models,
        "device": config.device,
    }
    return load_tracker(
        config.tracker,
        threads=config.threads,
        runtime=config.runtime,
        **{k: v for k, v in given.items() if v is not None},
    )


def _write_boxes(path: Path, boxes: np.ndarray) -> None:
    path.write_text("".join(",".join(f"{v:.2f}" for v in box) + "\n" for box in boxes))


def _track_clip(
    tracker: Tracker, sequence: Sequence, config: DemoConfig, files: dict[str, Path]
) -> tuple[np.ndarray, np.ndarray, float]:
    """One pass over ``sequence``, drawing into ``files["mp4"]`` / ``files["gif"]`` if asked.

    Returns boxes (N, 4) (row 0 = the initial box), per-frame seconds of ``initialize`` /
    ``track`` (N,), and the seconds of the whole loop.
    """
    n = len(sequence)
    boxes = np.empty((n, 4))
    times = np.empty(n)
    mp4 = gif = None
    progress = tqdm(
        total=n, unit="frame", desc=f"demo {sequence.name}", disable=not config.progress
    )
    loop_start = time.perf_counter()
    try:
        for index in range(n):
            frame = sequence.frame(index)
            start = time.perf_counter()
            if index == 0:
                box = clip_init_box(sequence.init_box, frame.shape, f"{sequence.name} init box")
                tracker.initialize(frame, box)
                score, status = math.nan, "normal"
            else:
                result = tracker.track(frame)
                box, score, status = result.box, float(result.score), result.status.value
            times[index] = time.perf_counter() - start
            boxes[index] = np.asarray(box, dtype=np.float64).reshape(4)
            if config.video:
                if mp4 is None:
                    size = (frame.shape[1], frame.shape[0])
                    mp4 = Mp4Writer(files["mp4"], config.playback_fps, size)
                    gif = GifWriter(files["gif"], config.playback_fps, n, config.gif)
                image = draw_track(
                    frame,
                    boxes[index],
                    score,
                    status,
                    ground_truth=sequence.ground_truth[index],
                    caption=f"{sequence.name} {index + 1}/{n}  white: ground truth",
                    label=config.tracker,
                )
                mp4.write(image)
                gif.write(image)
            progress.update()
        loop_seconds = time.perf_counter() - loop_start
    finally:
        progress.close()
        if mp4 is not None:
            mp4.close()
    if gif is not None:
        gif.close()
    return boxes, times, loop_seconds


def output_names(video: bool = True) -> dict[str, str]:
    """The files the demo writes, by key (``mp4``, ``gif`` with ``video``; ``boxes``,
    ``success``, ``metrics``)."""
    names = {"mp4": "demo.mp4", "gif": "demo.gif"} if video else {}
    return {**names, "boxes": "boxes.txt", "success": "success.png", "metrics": "metrics.json"}


def _setting(tracker: Tracker, name: str):
    """A parameter of one of our trackers (the torch tracker's params attribute, the
    runtime's params entry); None for others."""
    params = getattr(tracker, "params", None)
    return params.get(name) if isinstance(params, dict) else getattr(params, name, None)


def run_demo(
    config: DemoConfig | None = None,
    hold: Callable[[], AbstractContextManager] = contextlib.nullcontext,
) -> DemoResult:
    """Track the demo clip with ``config.tracker`` and write the outputs to ``config.out``.

    The outputs are one set (:func:`~ebmtrack.files.write_atomic_set`): written to temporary
    files, then renamed into place together inside ``hold()`` (the command line holds Ctrl-C
    and SIGTERM there), so that a stop leaves the folder's earlier files as they were or this
    run's files, all of them.

    Raises:
        ValueError: bad configuration (unknown tracker, backbone, weights) or unwritable ``out``.
        NotADirectoryError: ``out`` is a file.
    """
    config = config or DemoConfig()
    if not config.playback_fps > 0:
        raise ValueError(f"playback_fps must be positive, got {config.playback_fps}")
    if config.threads is not None and config.threads < 1:
        raise ValueError(
            f"threads must be a positive number (None: torch's default), got {config.threads}"
        )
    out = prepare_output_folder(config.out)
    sequence = demo_sequence(config.max_frames)
    files = {key: out / name for key, name in output_names(config.video).items()}
    lite = resolve_runtime(config.tracker, config.runtime) == "lite"
    with contextlib.nullcontext() if lite else torch_threads(config.threads):
        tracker = _build_tracker(config)
        done: list[DemoResult] = []

        def write(temporary: list[Path]) -> None:
            done.append(_write_outputs(tracker, sequence, config, dict(zip(files, temporary))))

        write_atomic_set(list(files.values()), write, hold)
    return replace(done[0], files=files)


def _write_outputs(
    tracker: Tracker, sequence: Sequence, config: DemoConfig, files: dict[str, Path]
) -> DemoResult:
    """Track ``sequence`` and write every output to ``files`` (temporary paths)."""
    n = len(sequence)
    boxes, times, loop_seconds = _track_clip(tracker, sequence, config, files)
    _write_boxes(files["boxes"], boxes)
    # Scored from the file as written, so that anyone can recompute the numbers from it.
    scored = score_run(read_boxes(files["boxes"]), sequence, OTB_PROTOCOL, times)
    summary = scored.summary()
    # What the tracker computes with, as its runtime says (the runtime: its export's manifest).
    made_by = tracker_provenance(tracker)
    backbone = made_by.get("backbone")  # None: not one of ours (OpenCV's trackers)
    head = getattr(tracker, "box_head", getattr(tracker, "head", None))
    box_refinement = head is not None if backbone else None
    # Without a box head or the siamese box the classifier alone sizes the box: say so.
    notes = [backbone] if backbone else []
    if box_refinement is False and "siamese" not in str(_setting(tracker, "box_mode")):
        notes.append("classifier only")
    label = config.tracker + (f" ({', '.join(notes)})" if notes else "")
    plot_success({label: scored.success}, files["success"], title=f"on {sequence.name}")
    result = DemoResult(
        clip=sequence.name,
        frames=n,
        auc=summary["auc"],
        precision=summary["precision"],
        fps_tracking=summary["fps"],
        fps_loop=n / loop_seconds,
        init_seconds=float(times[0]),
        files=files,
    )
    if made_by.get("runtime") == "lite":  # the shipped export's networks, ONNX Runtime's threads
        weights = {"weights": f"shipped export {made_by['tracker']}"}
        threads = made_by["threads"]
    else:
        weights = {
            "weights": None if config.weights is None else str(config.weights),
            "backbone_weights": None
            if config.backbone_weights is None
            else str(config.backbone_weights),
        }
        threads = config.threads
    metrics = {
        "clip": sequence.name,
        "frames": n,
        "tracker": config.tracker,
        "backbone": backbone,
        **weights,
        "box_refinement": box_refinement,
        **{
            key: made_by[key]
            for key in ("precision", "backbone_precision", "device")
            if key in made_by
        },
        "threads": threads,
        "protocol": OTB_PROTOCOL.name,
        "auc": result.auc,
        "precision_20px": result.precision,
        "op50": summary["op50"],
        "op75": summary["op75"],
        "success_curve": scored.success.tolist(),
        "fps_tracking": result.fps_tracking,
        "fps_loop": result.fps_loop,
        "fps_loop_includes_video": config.video,
        "init_seconds": result.init_seconds,
        "cpu_count": os.cpu_count(),
        # weights (sha256), precision, backbone runtime, versions: what made these numbers
        "produced_by": {"tracker": made_by, "environment": environment()},
    }
    files["metrics"].write_text(json.dumps(metrics, indent=2) + "\n")
    return result
