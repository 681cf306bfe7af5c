"""Tracking speed by frame size, before and after a change of the source tree, in one run.

The torch tracker (``ebmtrack.load_tracker("atom", threads=1, precision="float32",
runtime="torch")``: float32 forced, the int8 backbone that ``auto`` then picks on a CPU) tracks the
first ``--frames`` frames of Jumping (352x288) and the same frames resized to 1920x1080 and
3840x2160, the target box resized with them, so that the network sees the same crops at every size
and any difference in speed comes from the frame's size.

Each measurement runs in a fresh Python process whose ``PYTHONPATH`` is either this checkout's
``src`` ("after") or ``--before-src`` (another checkout's ``src``, e.g. made with ``git worktree
add /tmp/before COMMIT``), alternating which goes first, best of ``--repeats``:

- **API**: frames decoded and resized beforehand (decoding excluded); FPS counts
  ``initialize`` and every ``track`` call (wall and CPU time, ``process_time``), after a warm-up
  pass over a few frames; ``crop ms`` is the median of the tracker's own ``last_timings["crop"]``
  (the frame's three search regions, cut and copied into the backbone's input), and ``crop CPU
  ms`` the mean CPU time of the tracker's crop step (its search region's public ``crop``, timed
  with ``thread_time`` around it, the same way in both trees) per tracked frame.
- **pipeline** (``--parts``, default with ``api``): in one process of the "after" tree, the
  command's frame loop alone on the same frames as JPEG (quality 95), wall FPS with
  ``initialize``: decoded beforehand (the API), decoded in the loop (as ``ebmtrack track`` did
  before it prefetched) and decoded ahead by a thread (``ebmtrack.data.prefetch``), alternating,
  best of 2; start-up (several seconds on a busy machine) does not blur this comparison.
- **commands** (``--parts ...,commands``): the whole ``ebmtrack track`` on those JPEGs (start-up,
  decoding, tracking, writing the boxes), and on their first 2 frames, whose time is the
  start-up: ``(N - 2) / (T_N - T_2)`` is the rate at which the command tracks once started.

    git worktree add /tmp/before COMMIT
    nice -n 5 .venv/bin/python benchmarks/bench_frame_size.py --before-src /tmp/before/src \
        --parts api,pipeline,commands

Prints markdown tables and writes ``runs/bench_frame_size.json``. On a machine shared with other
jobs the wall-clock FPS move with the load (printed beside them); CPU-time FPS and the ratios
within one run move less.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEQUENCE = REPO.parent / "shared" / "data" / "sequences" / "Jumping"
SIZES = ((352, 288), (1920, 1080), (3840, 2160))


def load_average() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


def resized_frames(count: int, size: tuple[int, int]):
    """The first ``count`` frames of Jumping at ``size`` (w, h) and the first box scaled."""
    import cv2
    import numpy as np

    from ebmtrack.data.io import list_images, read_image

    frames = [read_image(p) for p in list_images(SEQUENCE / "img")[:count]]
    box = np.loadtxt(SEQUENCE / "groundtruth_rect.txt", delimiter=",", max_rows=1)
    height, width = frames[0].shape[:2]
    scale = np.array([size[0] / width, size[1] / height] * 2)
    if (width, height) != tuple(size):
        frames = [cv2.resize(f, size, interpolation=cv2.INTER_LINEAR) for f in frames]
    return frames, box * scale


def child(spec: dict) -> None:
    """One API measurement in this process; prints one JSON line."""
    import numpy as np

    import ebmtrack

    frames, box = resized_frames(spec["frames"], tuple(spec["size"]))
    tracker = ebmtrack.load_tracker("atom", threads=1, precision="float32", runtime="torch")
    # The crop step's CPU time (this thread's), frame by frame: the same method in both trees.
    crop_cpu, crop = [], tracker.search.crop

    def timed_crop(*args, **kwargs):
        start = time.thread_time()
        try:
            return crop(*args, **kwargs)
        finally:
            crop_cpu.append(time.thread_time() - start)

    tracker.search.crop = timed_crop
    tracker.initialize(frames[0], box)  # warm-up: sessions, allocator, caches
    for frame in frames[1 : 1 + spec["warmup"]]:
        tracker.track(frame)
    load = load_average()
    crops = []
    start, cpu_start = time.perf_counter(), time.process_time()
    tracker.initialize(frames[0], box)
    tracked = time.perf_counter()
    del crop_cpu[:]
    for frame in frames[1:]:
        tracker.track(frame)
        crops.append(tracker.last_timings["crop"])
    end, cpu = time.perf_counter(), time.process_time() - cpu_start
    result = {
        "fps": len(frames) / (end - start),
        "cpu_fps": len(frames) / cpu,
        "track_fps": (len(frames) - 1) / (end - tracked),
        "crop_ms": 1000 * float(np.median(crops)),
        "crop_cpu_ms": 1000 * float(np.mean(crop_cpu)),
        "runtime": tracker.backbone_runtime,
        "load": load,
    }
    print("RESULT " + json.dumps(result), flush=True)


def pipeline_child(spec: dict) -> None:
    """The command's frame loop in this process, on a folder of JPEGs: tracking frames decoded
    beforehand (the API), decoded in the loop (the command before prefetching) and decoded
    ahead by :func:`ebmtrack.data.prefetch.prefetch`, alternating, best of ``repeats``; wall
    FPS, ``initialize`` included. Prints one JSON line."""
    import ebmtrack
    from ebmtrack.data.io import list_images, read_image
    from ebmtrack.data.prefetch import prefetch

    paths = list_images(spec["folder"])
    box = [float(v) for v in spec["init"].split(",")]
    decoded = [read_image(p, keep_gray=True) for p in paths]
    tracker = ebmtrack.load_tracker("atom", threads=1, precision="float32", runtime="torch")
    loops = {
        "api": lambda: iter(decoded),
        "inline": lambda: (read_image(p, keep_gray=True) for p in paths),
        "prefetch": lambda: prefetch(read_image(p, keep_gray=True) for p in paths),
    }
    tracker.initialize(decoded[0], box)  # warm-up
    for frame in decoded[1 : 1 + spec["warmup"]]:
        tracker.track(frame)
    best = dict.fromkeys(loops, 0.0)
    load = load_average()
    for repeat in range(spec["repeats"]):
        for name in list(loops)[:: 1 if repeat % 2 == 0 else -1]:
            start = time.perf_counter()
            frames = loops[name]()
            tracker.initialize(next(frames), box)
            for frame in frames:
                tracker.track(frame)
            best[name] = max(best[name], len(paths) / (time.perf_counter() - start))
    print("RESULT " + json.dumps({**best, "load": load}), flush=True)


def run_child(src: Path, spec: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])


def write_folder(folder: Path, count: int, size: tuple[int, int]) -> str:
    """Jumping's frames at ``size`` as JPEG in ``folder``; returns the --init box."""
    import cv2

    frames, box = resized_frames(count, size)
    folder.mkdir(parents=True)
    for index, frame in enumerate(frames):
        bgr = cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)
        cv2.imwrite(str(folder / f"{index + 1:04d}.jpg"), bgr, [cv2.IMWRITE_JPEG_QUALITY, 95])
    return ",".join(f"{v:.2f}" for v in box)


def run_command(src: Path, folder: Path, init: str, frames: int) -> float:
    """Seconds of the whole ``ebmtrack track`` on the first ``frames`` frames of ``folder``."""
    source = folder
    if frames < len(list(folder.iterdir())):
        source = folder.parent / f"{folder.name}-first{frames}"
        if not source.exists():
            source.mkdir()
            for path in sorted(folder.iterdir())[:frames]:
                os.link(path, source / path.name)
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "ebmtrack.cli.main", "track", str(source), "--init", init]
    argv += ["--out", str(folder.parent / "boxes.txt"), "--option", "precision=float32"]
    start = time.perf_counter()
    subprocess.run([*argv, "--no-progress"], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def label(row: dict) -> str:
    return f"| {row['size'][0]}x{row['size'][1]} | {row['tree']} "


def print_api(rows: list[dict]) -> None:
    print(
        "\n| frame size | tree | API FPS (wall) | load | CPU-time FPS | crop ms / frame "
        "| crop CPU ms / frame | CPU-time FPS / at 352x288 |\n|---|---|---|---|---|---|---|---|"
    )
    for row in rows:
        best = max(row["api"], key=lambda r: r["cpu_fps"])
        small = next(r for r in rows if r["tree"] == row["tree"] and r["size"] == SIZES[0])
        base = max(r["cpu_fps"] for r in small["api"])
        wall = max(r["fps"] for r in row["api"])
        crop = min(r["crop_ms"] for r in row["api"])
        crop_cpu = min(r["crop_cpu_ms"] for r in row["api"])
        print(
            f"{label(row)}| {wall:.1f} | {best['load']:.1f} | {best['cpu_fps']:.1f} "
            f"| {crop:.2f} | {crop_cpu:.2f} | {best['cpu_fps'] / base:.2f} |",
            flush=True,
        )


def print_pipeline(rows: list[dict]) -> None:
    print(
        "\n| frame size | frames decoded before (API) FPS | decoded in the loop | / API "
        "| decoded ahead (prefetch) | / API | load |\n|---|---|---|---|---|---|---|"
    )
    for row in rows:
        if "pipeline" in row:
            r = row["pipeline"]
            print(
                f"| {row['size'][0]}x{row['size'][1]} | {r['api']:.1f} | {r['inline']:.1f} "
                f"| {r['inline'] / r['api']:.2f} | {r['prefetch']:.1f} "
                f"| {r['prefetch'] / r['api']:.2f} | {r['load']:.1f} |",
                flush=True,
            )


def print_commands(rows: list[dict], frames: int) -> None:
    print(
        "\n| frame size | tree | `ebmtrack track` FPS | / API FPS | tracking rate once "
        "started | / API rate per `track` | start-up s |\n|---|---|---|---|---|---|---|"
    )
    for row in rows:
        whole, startup = min(row["command"]), min(row["startup"])
        api = max(r["fps"] for r in row["api"])
        rate = (frames - 2) / (whole - startup)
        api_rate = max(r["track_fps"] for r in row["api"])
        print(
            f"{label(row)}| {frames / whole:.1f} | {frames / whole / api:.2f} | {rate:.1f} "
            f"| {rate / api_rate:.2f} | {startup:.1f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--before-src", type=Path, help="the src folder of the 'before' tree")
    parser.add_argument("--frames", type=int, default=60, help="frames per run, init included")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2, help="runs per row; the best counts")
    parser.add_argument(
        "--parts",
        default="api,pipeline",
        help="comma-separated: api, pipeline (the command's loop in one process), commands "
        "(the whole `ebmtrack track`)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench_frame_size.json")
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        (pipeline_child if "folder" in spec else child)(spec)
        return
    trees = {"after": REPO / "src"}
    if args.before_src is not None:
        trees = {"before": args.before_src.resolve(), **trees}
    print(
        f"load before: {load_average():.2f}; {args.frames} frames of Jumping, best of "
        f"{args.repeats}; trees: {', '.join(f'{k} {v}' for k, v in trees.items())}"
    )
    rows = []
    for size in SIZES:
        for name in trees:
            rows.append({"tree": name, "size": size, "api": [], "command": [], "startup": []})
    parts = set(args.parts.split(","))
    for repeat in range(args.repeats if "api" in parts else 0):
        for row in rows[:: 1 if repeat % 2 == 0 else -1]:
            spec = {"frames": args.frames, "warmup": args.warmup, "size": row["size"]}
            row["api"].append(run_child(trees[row["tree"]], spec))
    if "api" in parts:
        print_api(rows)
    if parts & {"pipeline", "commands"}:
        with tempfile.TemporaryDirectory() as tmp:
            folders = {}
            for size in SIZES:
                folder = Path(tmp) / f"{size[0]}x{size[1]}" / "img"
                folders[tuple(size)] = (folder, write_folder(folder, args.frames, size))
            for row in rows if "pipeline" in parts else ():
                if row["tree"] == "after":
                    folder, init = folders[tuple(row["size"])]
                    spec = {"folder": str(folder), "init": init, "warmup": args.warmup}
                    row["pipeline"] = run_child(trees["after"], {**spec, "repeats": 2})
            print_pipeline(rows)
            for src in trees.values() if "commands" in parts else ():  # warm-up: imports
                run_command(src, *folders[SIZES[0]], 2)
            for repeat in range(args.repeats if "commands" in parts else 0):
                for row in rows[:: 1 if repeat % 2 == 0 else -1]:
                    folder, init = folders[tuple(row["size"])]
                    row["command"].append(
                        run_command(trees[row["tree"]], folder, init, args.frames)
                    )
                    row["startup"].append(run_command(trees[row["tree"]], folder, init, 2))
        if "commands" in parts:
            print_commands(rows, args.frames)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
