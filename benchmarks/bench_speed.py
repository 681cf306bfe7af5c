"""Tracking speed of the default tracker on a quiet and on a busy CPU, in one run.

``--trackers`` (default ``atom,nanotrack``: the default beside OpenCV's NanoTrack) names the
trackers to time, e.g. ``atom,atom:classifier_features=backbone,nanotrack`` to set the default
beside the two-pass tracker and NanoTrack in one run; every row's ``track()`` FPS is also given
as a ratio to NanoTrack's from the same run and thread count (one number from one run); the
configurations below apply to trackers with a backbone of ours, OpenCV's run once per thread
count (``--peer-models``: their ONNX files). A tracker that ships an export
(:mod:`ebmtrack.exports`) runs first as a user gets it, in the torch-free runtime (marked
"(runtime)"; its export fixes what the configurations change), then as the torch tracker
(``runtime="torch"``) in each configuration.

Each configuration (``--configs``, pairs ``PRECISION:BACKBONE_RUNTIME``, default: ``auto:auto``,
the default tracker as a user gets it; ``float32:auto``, what a CPU without native bfloat16 runs;
``float32:onnx``, the float32 backbone in ONNX Runtime; ``bfloat16:torch``, eager bfloat16, on CPUs
with native bfloat16 only) x threads runs in a fresh Python process, built the way a user builds it
(``ebmtrack.load_tracker("atom", threads=..., **params)``, so the package's own thread and
wait-policy defaults apply), first "quiet" (no competitor of this script's: as quiet as the machine
is), then "busy": while two competing busy processes (one pure-Python loop each, started by this
script with its own priority and cores) run; they are stopped after each busy measurement. FPS
counts ``initialize`` and every ``track`` call over the frames, which are decoded beforehand
(decoding excluded); a first pass over a few frames warms up (ONNX export, allocator). The CPU-time
column counts frames per second of CPU time the process used (``process_time``, all its threads,
quiet phase): nearly blind to other jobs, and for one thread about the FPS it reaches with a core
to itself. The run ends with the speed goals of the default tracker with one thread: 30 FPS quiet
with ``precision="auto"`` and in float32, busy at least half of quiet, ``track()`` alone (the
steady state) at least 40 FPS quiet and the first box (``initialize`` after the tracker is loaded)
within 1 s. ``--cli`` also times the whole ``ebmtrack track`` command (start-up, decoding and
writing included) and ``--eval`` the whole ``ebmtrack eval`` (its worker process and scoring
included) in each configuration's precision (``--option precision=...``), quiet and busy, on the
sequence's first ``--cli-frames`` frames (default all: a user tracks whole videos);
``--only-commands`` skips the in-process rows.

    nice -n 5 .venv/bin/python benchmarks/bench_speed.py --frames 120

The header gives the CPU model, its SIMD flags (``avx512_bf16`` / ``amx_bf16``: native
bfloat16; without them ``precision="auto"`` runs float32), the cores this process may use and
the load average before the run; each row gives the 1-minute load average before it. On a
machine shared with other jobs the absolute FPS vary; the busy / quiet ratio of a row and the
ratios between rows, measured minutes apart, vary less. Results also go to
``runs/bench_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SEQUENCES = REPO.parent / "shared" / "data" / "sequences"
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
# A busy process that ends by itself when the script that started it is gone.
BUSY_LOOP = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass"


def cpu_header() -> dict:
    flags, model = set(), platform.processor()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": model,
        "flags": [f for f in FLAGS if f in flags],
        "native_bfloat16": bool({"avx512_bf16", "amx_bf16"} & flags),
        "cores": cores,
    }


def tracker_items(text: str) -> list[tuple[str, str, dict]]:
    """``NAME`` or ``NAME:KEY=VALUE;KEY=VALUE`` items, comma-separated -> ``(item, name,
    options)`` each, the values read as YAML."""
    items = []
    for item in text.split(","):
        name, _, extra = item.partition(":")
        options = {}
        for pair in filter(None, extra.split(";")):
            key, _, value = pair.partition("=")
            options[key] = yaml.safe_load(value)
        items.append((item, name, options))
    return items


def load_average() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


# ----------------------------------------------------------------------------- child process
def load_frames(sequence: str, count: int):
    import numpy as np

    from ebmtrack.data.io import list_images, read_image

    root = SEQUENCES / sequence
    if root.is_dir():
        paths = list_images(root / "img")[:count]
        box = np.loadtxt(root / "groundtruth_rect.txt", delimiter=",", max_rows=1)
        return [read_image(p) for p in paths], box
    from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequence

    generated = SyntheticSequence("bench", SyntheticConfig(num_frames=count), seed=0)
    return [generated.frame(i) for i in range(count)], generated.init_box


ROW_FIELDS = (
    "tracker", "precision", "threads", "quiet", "busy", "torch_threads", "runtime", "dtype",
)  # fmt: skip
"""A row's keys that are not tracker options."""


def speed_goals(rows: list[dict]) -> dict[str, bool]:
    """The default tracker's speed goals, one thread, from this run's in-process rows: the
    runtime's (the default as ``load_tracker("atom")`` builds it) and the torch tracker's."""
    goals = {}
    lite = next(
        (
            r
            for r in rows
            if r.get("tracker") == "atom"
            and r.get("precision") is None
            and r.get("threads") == 1
            and not options_of({k: r[k] for k in r if k not in ROW_FIELDS})
        ),
        None,
    )
    if lite is not None:
        steady, first = lite["quiet"]["track_fps"], lite["quiet"]["init_s"]
        goals[f"runtime: quiet track() {steady:.1f} FPS >= 40"] = steady >= 40
        goals[f"runtime: first box {first:.2f} s after load <= 1"] = first <= 1
        peer = next(
            (r for r in rows if r.get("tracker") == "nanotrack" and r.get("threads") == 1), None
        )
        if peer is not None:
            ratio = steady / peer["quiet"]["track_fps"]
            goals[f"runtime: quiet track() / NanoTrack's (OpenCV) {ratio:.2f} >= 1"] = ratio >= 1
    for precision, runtime in (("auto", "auto"), ("float32", "auto")):
        row = next(
            (
                r
                for r in rows
                if r.get("tracker", "atom") == "atom"
                and not options_of({k: r[k] for k in r if k not in ROW_FIELDS})
                and r.get("precision") == precision
                and r.get("backbone_runtime") == runtime
                and r.get("threads") == 1
            ),
            None,
        )
        if row is None:
            continue
        quiet, busy = row["quiet"]["fps"], row["busy"]["fps"]
        goals[f"precision={precision}: quiet {quiet:.1f} FPS >= 30"] = quiet >= 30
        steady = row["quiet"]["track_fps"]
        goals[f"precision={precision}: quiet track() {steady:.1f} FPS >= 40"] = steady >= 40
        first = row["quiet"]["init_s"]
        goals[f"precision={precision}: first box {first:.2f} s after load <= 1"] = first <= 1
        goals[f"precision={precision}: busy / quiet {busy / quiet:.2f} >= 0.5"] = busy >= quiet / 2
    return goals


def options_of(params: dict) -> dict:
    """A row's tracker options besides the configuration's runtime and the peers' files."""
    skip = ("backbone_runtime", "model_dir", "runtime")
    return {k: v for k, v in params.items() if k not in skip}


def child(spec: dict) -> None:
    """Measure one configuration; print one JSON line."""
    import ebmtrack

    frames, box = load_frames(spec["sequence"], spec["frames"])
    tracker = ebmtrack.load_tracker(spec["tracker"], threads=spec["threads"], **spec["params"])
    tracker.initialize(frames[0], box)  # warm-up: ONNX export, sessions, allocator
    for frame in frames[1 : 1 + spec["warmup"]]:
        tracker.track(frame)
    import torch

    results = {}
    for phase in spec["phases"]:
        if phase == "busy":
            print("READY", flush=True)  # the parent starts the competitors...
            sys.stdin.readline()  # ...and says when they run
        load = load_average()
        start, cpu_start = time.perf_counter(), time.process_time()
        tracker.initialize(frames[0], box)
        first = time.perf_counter()
        for frame in frames[1:]:
            tracker.track(frame)
        end = time.perf_counter()
        wall, cpu = end - start, time.process_time() - cpu_start
        results[phase] = {
            "fps": len(frames) / wall,
            "cpu_fps": len(frames) / cpu,
            "load": load,
            "init_s": first - start,
            "track_fps": (len(frames) - 1) / (end - first),
        }
    results["torch_threads"] = torch.get_num_threads()
    results["runtime"] = getattr(tracker, "backbone_runtime", "opencv")
    results["dtype"] = str(getattr(tracker, "dtype", "-")).replace("torch.", "")
    print("RESULT " + json.dumps(results), flush=True)


# ---------------------------------------------------------------------------- parent process
class Competitors:
    """Two busy processes on this process's cores, for the length of a ``with`` block."""

    def __init__(self, count: int = 2) -> None:
        self.count = count
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> Competitors:
        self.processes = [
            subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(self.count)
        ]
        time.sleep(1.0)  # let the scheduler see them as busy
        return self

    def __exit__(self, *exc) -> None:
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait()


def measure(spec: dict) -> dict:
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    competitors = Competitors()
    try:
        for line in process.stdout:
            if line.startswith("READY"):
                competitors.__enter__()
                process.stdin.write("go\n")
                process.stdin.flush()
            elif line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])
    finally:
        competitors.__exit__()
        process.wait()
    raise RuntimeError(f"measurement failed: {spec}")


def measure_command(
    command: str, sequence: str, frames: int, busy: bool, precision: str | None
) -> dict:
    """The whole ``ebmtrack track`` or ``ebmtrack eval`` command (one thread, the defaults
    otherwise: the runtime; with a ``precision``, the torch tracker in it) on the first
    ``frames`` frames of ``sequence`` (all of them when 0)."""
    import shutil
    import tempfile

    root = SEQUENCES / sequence
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data" / sequence
        (folder / "img").mkdir(parents=True)
        images = sorted((root / "img").iterdir())[: frames or None]
        for image in images:
            shutil.copy(image, folder / "img" / image.name)
        truth = (root / "groundtruth_rect.txt").read_text().splitlines()[: len(images)]
        (folder / "groundtruth_rect.txt").write_text("\n".join(truth) + "\n")
        program = str(Path(sys.executable).with_name("ebmtrack"))
        if command == "track":
            box = ",".join(truth[0].replace("\t", ",").split(",")[:4])
            argv = [program, "track", str(folder), "--init", box]
            argv += ["--out", str(Path(tmp) / "boxes.txt")]
            if precision is not None:
                argv += ["--runtime", "torch", "--option", f"precision={precision}"]
        else:
            argv = [program, "eval", str(folder.parent), "--trackers", "atom"]
            argv += ["--out", str(Path(tmp) / "eval")]
            if precision is not None:
                argv += ["--runtime", "torch", "--option", f"atom.precision={precision}"]
        competitors = Competitors(2 if busy else 0)
        load = load_average()
        with competitors:
            start = time.perf_counter()
            subprocess.run([*argv, "--no-progress"], check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - start
    return {"fps": len(images) / wall, "frames": len(images), "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--frames", type=int, default=120, help="frames per run, init included")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--sequence", default="Car1", help="a folder of ../shared/data/sequences")
    parser.add_argument("--threads", default="1,2", help="thread counts to measure")
    parser.add_argument(
        "--configs",
        default="auto:auto,float32:auto,float32:onnx,bfloat16:torch",
        help="PRECISION:BACKBONE_RUNTIME pairs (bfloat16 only where native)",
    )
    parser.add_argument(
        "--trackers",
        default="atom,nanotrack",
        help="comma-separated trackers, NAME or NAME:KEY=VALUE;KEY=VALUE (e.g. "
        "'atom:box_mode=scale;size_update_rate=0.6', "
        "nanotrack); OpenCV's trackers run once per thread count, without --configs",
    )
    parser.add_argument(
        "--peer-models",
        type=Path,
        default=REPO.parent / "shared" / "peers",
        help="OpenCV's ONNX files (nanotrack, vit)",
    )
    parser.add_argument("--cli", action="store_true", help="also time `ebmtrack track`")
    parser.add_argument(
        "--eval", action="store_true", help="also time `ebmtrack eval` on the sequence"
    )
    parser.add_argument(
        "--cli-frames", type=int, default=0, help="frames of --cli / --eval (default 0: all)"
    )
    parser.add_argument(
        "--only-commands", action="store_true", help="skip the in-process rows (with --cli/--eval)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench_speed.json")
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return

    import ebmtrack

    header = cpu_header()
    header.update(load_before=load_average(), python=platform.python_version())
    header["versions"] = {"ebmtrack": ebmtrack.__version__}
    for module in ("torch", "onnxruntime"):
        try:
            header["versions"][module] = __import__(module).__version__
        except ImportError:
            header["versions"][module] = None
    print(
        f"CPU: {header['cpu']}, {header['cores']} cores; flags: {' '.join(header['flags'])}; "
        f"native bfloat16: {'yes' if header['native_bfloat16'] else 'no'}; load before: "
        f"{header['load_before']:.2f}; versions: {header['versions']}"
    )
    print(f"sequence {args.sequence}, {args.frames} frames (initialize + track), decoded before")
    pairs = [tuple(item.split(":", 1)) for item in args.configs.split(",") if item]
    if not all(len(pair) == 2 for pair in pairs):
        parser.error(f"--configs: PRECISION:RUNTIME pairs, got {args.configs!r}")
    pairs = [p for p in pairs if p[0] != "bfloat16" or header["native_bfloat16"]]
    precisions = list(dict.fromkeys(precision for precision, _ in pairs))
    from ebmtrack.exports import shipped_export
    from ebmtrack.tracking.registry import tracker_kind

    threads_list = [int(t) for t in args.threads.split(",")]
    configs = []
    for _, name, options in tracker_items(args.trackers):
        if shipped_export(name) is not None:  # the runtime: the tracker as a user gets it
            configs += [(name, None, threads, {**options}) for threads in threads_list]
        if tracker_kind(name).backbone:  # the torch tracker in each configuration
            configs += [
                (
                    name,
                    precision,
                    threads,
                    {"runtime": "torch", "backbone_runtime": runtime, **options},
                )
                for precision, runtime in pairs
                for threads in threads_list
            ]
        else:
            files = {"model_dir": str(args.peer_models)} if tracker_kind(name).model_files else {}
            configs += [(name, None, threads, {**files, **options}) for threads in threads_list]
    if args.only_commands:
        configs = []
    else:
        print(
            "| tracker | precision | runtime | threads | quiet FPS | load | busy FPS | load "
            "| busy / quiet | CPU-time FPS | quiet track() FPS | quiet initialize s |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for tracker, precision, threads, params in configs:
        spec = {
            "tracker": tracker,
            "sequence": args.sequence,
            "frames": args.frames,
            "warmup": args.warmup,
            "threads": threads,
            "params": params if precision is None else {"precision": precision, **params},
            "phases": ["quiet", "busy"],
        }
        result = measure(spec)
        quiet, busy = result["quiet"], result["busy"]
        # the row's "runtime" is the backbone's (the result's), not the option
        row = {**params, **result, "tracker": tracker, "precision": precision, "threads": threads}
        rows.append(row)
        extra = ";".join(f"{k}={v}" for k, v in options_of(params).items())
        label = f"{tracker}:{extra}" if extra else tracker
        if params.get("runtime") != "torch" and shipped_export(tracker) is not None:
            label += " (runtime)"
        print(
            f"| {label} | {precision} ({result['dtype']}) | {result['runtime']} | {threads} "
            f"| {quiet['fps']:.1f} | {quiet['load']:.1f} | {busy['fps']:.1f} | {busy['load']:.1f} "
            f"| {busy['fps'] / quiet['fps']:.2f} | {quiet['cpu_fps']:.1f} "
            f"| {quiet['track_fps']:.1f} | {quiet['init_s']:.2f} |",
            flush=True,
        )
    commands = ["track"] * args.cli + ["eval"] * args.eval
    if commands:
        print(
            "\n| command (defaults, one thread) | frames | quiet FPS | load | busy FPS | load "
            "| busy / quiet |\n|---|---|---|---|---|---|---|"
        )
    for command in commands:
        for precision in [None, *precisions]:  # the runtime, then the torch tracker
            quiet, busy = (
                measure_command(command, args.sequence, args.cli_frames, competing, precision)
                for competing in (False, True)
            )
            rows.append({"label": command, "precision": precision, "quiet": quiet, "busy": busy})
            print(
                f"| `ebmtrack {command}`, "
                f"{'the runtime' if precision is None else f'--runtime torch, {precision}'} "
                f"| {quiet['frames']} "
                f"| {quiet['fps']:.1f} | {quiet['load']:.1f} | {busy['fps']:.1f} "
                f"| {busy['load']:.1f} | {busy['fps'] / quiet['fps']:.2f} |",
                flush=True,
            )
    peers = {r["threads"]: r for r in rows if r.get("tracker") == "nanotrack"}
    if peers and len(rows) > len(peers):
        print("\nquiet track() FPS / OpenCV NanoTrack's, same run and threads:")
        for row in rows:
            peer = peers.get(row.get("threads"))
            if peer is not None and row.get("tracker") not in (None, "nanotrack"):
                torch_row = row["precision"] is not None
                label = row["tracker"] + (f" (torch, {row['precision']})" if torch_row else "")
                extra = ";".join(
                    f"{k}={v}"
                    for k, v in options_of({k: row[k] for k in row if k not in ROW_FIELDS}).items()
                )
                ratio = row["quiet"]["track_fps"] / peer["quiet"]["track_fps"]
                print(
                    f"- {label}{':' + extra if extra else ''}, {row['threads']} thread(s): "
                    f"{ratio:.2f}"
                )
    goals = speed_goals(rows)
    for goal, met in goals.items():
        print(f"goal: {goal}: {'met' if met else 'NOT met'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record = {"header": header, "args": vars(args), "rows": rows, "goals": goals}
    args.out.write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
