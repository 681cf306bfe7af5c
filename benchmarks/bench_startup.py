"""Where the first box's time goes in the default install: process start, the imports, loading
the shipped export (reading and checking its files, creating each ONNX Runtime session, of which
graph optimisation is a part), the first frame's fit (``initialize``) and the first ``track``;
and the memory of tracking a 720p video.

Each run is a fresh Python process (``--python``, default this one: point it at a venv made by
``pip install .`` to measure the default install) that times its own phases; the process start
is the parent's wall time less the phases the child saw. ``--runs`` repeats it (the median is
printed, the first run apart: cold file caches). ``--sessions`` also times creating the backbone
session at ONNX Runtime's three graph-optimisation levels. ``--video-720p N`` tracks N frames of
the demo clip scaled to 1280x720 and prints the process's peak RSS. ``--option KEY=VALUE``
(repeatable) passes a tracker option to ``load_tracker``.

    python benchmarks/bench_startup.py --runs 5 --sessions --video-720p 100
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    t = [("start", time.perf_counter())]
    def mark(name):
        t.append((name, time.perf_counter()))
    import numpy
    mark("import numpy")
    import cv2
    mark("import cv2")
    import onnxruntime
    mark("import onnxruntime")
    import ebmtrack
    from ebmtrack.tracking.runtime import build_tracker
    import ebmtrack.lite.tracker
    mark("import ebmtrack")
    from ebmtrack.lite import onnx_session
    created = []
    plain_init = onnx_session.Session.__init__
    def timed_init(self, path, threads=1):
        tic = time.perf_counter()
        plain_init(self, path, threads)
        created.append(time.perf_counter() - tic)
    onnx_session.Session.__init__ = timed_init
    from ebmtrack.exports import shipped_export
    from ebmtrack.lite.files import read_export
    read_export(shipped_export(TRACKER))
    mark("read and check the export")
    from ebmtrack.evaluation.demo import demo_sequence
    clip = demo_sequence(3)
    frames = [clip.frame(i) for i in range(3)]
    mark("decode 3 frames")
    tic = time.perf_counter()
    tracker = ebmtrack.load_tracker(TRACKER, **OPTIONS)
    mark("load_tracker")
    tracker.initialize(frames[0], clip.init_box)
    mark("initialize (first-frame fit)")
    tracker.track(frames[1])
    mark("first track")
    out = {"phases": {}, "sessions": created}
    for (_, a), (name, b) in zip(t, t[1:]):
        out["phases"][name] = b - a
    out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["torch"] = "torch" in sys.modules
    print(json.dumps(out))
    """
)

SESSIONS = textwrap.dedent(
    """
    import json, time, onnxruntime as ort
    from ebmtrack.exports import shipped_export
    from ebmtrack.lite.files import read_export
    export = read_export(shipped_export(TRACKER))
    backbone = export.manifest["backbone"]
    source = export.source(backbone["files"][backbone["runtime"]])
    out = {}
    for level in ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_ALL"):
        times = []
        for _ in range(3):
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
            options.log_severity_level = 3
            tic = time.perf_counter()
            ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
            times.append(time.perf_counter() - tic)
        out[level] = min(times)
    print(json.dumps(out))
    """
)

VIDEO = textwrap.dedent(
    """
    import json, resource, time, cv2, numpy as np, ebmtrack
    from ebmtrack.evaluation.demo import demo_sequence
    clip = demo_sequence()
    scale = np.array([1280 / 320, 720 / 240, 1280 / 320, 720 / 240])
    tracker = ebmtrack.load_tracker(TRACKER, **OPTIONS)
    frame = lambda i: cv2.resize(clip.frame(i % len(clip)), (1280, 720))
    tracker.initialize(frame(0), np.asarray(clip.init_box) * scale)
    tic = time.perf_counter()
    for i in range(1, COUNT):
        tracker.track(frame(i))
    seconds = time.perf_counter() - tic
    print(json.dumps({"frames": COUNT, "fps": (COUNT - 1) / seconds,
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    """
)


def child(python: str, code: str) -> tuple[dict, float]:
    tic = time.perf_counter()
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - tic
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter to measure")
    parser.add_argument("--tracker", default="atom")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sessions", action="store_true")
    parser.add_argument("--video-720p", type=int, default=0, metavar="N")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="a tracker option"
    )
    args = parser.parse_args()
    from ebmtrack.values import parse_value

    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--option: KEY=VALUE, got {item!r}")
        options[key] = parse_value(value)
    code = CHILD.replace("TRACKER", repr(args.tracker)).replace("OPTIONS", repr(options))
    runs = []
    for index in range(args.runs):
        result, wall = child(args.python, code)
        inside = sum(result["phases"].values())
        result["phases"] = {"process start": wall - inside, **result["phases"]}
        result["wall"] = wall
        runs.append(result)
        print(f"run {index + 1}: {wall:.3f} s to the first box", file=sys.stderr)
    warm = runs[1:] or runs
    print(
        f"{args.tracker} {options or ''}, {args.python}, {len(warm)} warm run(s) (median), "
        "first run apart"
    )
    print("| phase | seconds | first run |\n|---|---|---|")
    for name in runs[0]["phases"]:
        median = statistics.median(r["phases"][name] for r in warm)
        print(f"| {name} | {median:.3f} | {runs[0]['phases'][name]:.3f} |")
    first_box = [r["wall"] - r["phases"]["first track"] - r["phases"]["decode 3 frames"]
                 - r["phases"]["read and check the export"] for r in warm]
    print(f"| first box (start to initialize, less the timing's own read and decode) | "
          f"{statistics.median(first_box):.3f} | |")
    sessions = [statistics.median(r["sessions"][i] for r in warm)
                for i in range(len(warm[0]["sessions"]))]
    print(f"sessions created by load_tracker: {', '.join(f'{s:.3f}' for s in sessions)} s")
    print(f"peak RSS {statistics.median(r['rss_mib'] for r in warm):.0f} MiB; torch imported: "
          f"{any(r['torch'] for r in runs)}")
    if args.sessions:
        result, _ = child(args.python, SESSIONS.replace("TRACKER", repr(args.tracker)))
        print("backbone session by graph optimisation level (best of 3): "
              + ", ".join(f"{k} {v:.3f} s" for k, v in result.items()))
    if args.video_720p:
        code = VIDEO.replace("TRACKER", repr(args.tracker)).replace("COUNT", str(args.video_720p))
        code = code.replace("OPTIONS", repr(options))
        result, _ = child(args.python, code)
        print(f"720p: {result['frames']} frames, {result['fps']:.1f} FPS, peak RSS "
              f"{result['rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
