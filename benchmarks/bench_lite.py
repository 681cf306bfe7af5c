"""Start-up, memory and speed of one tracking process: the torch-free runtime (an export, run
by ``ebmtrack.lite``) or the torch tracker (``--torch NAME``), on one sequence.

Run it as a fresh process per measurement: the start-up it reports begins at the interpreter's
first line (the imports of this script and the decoding of the first two frames count), so it
needs nothing but NumPy, ONNX Runtime and
OpenCV in lite mode, and imports nothing of ebmtrack before its clock starts::

    python benchmarks/bench_lite.py --export runs/atom --sequence ../shared/data/sequences/Car1
    python benchmarks/bench_lite.py --torch atom --sequence ../shared/data/sequences/Car1

Prints one JSON line: seconds to import, load, read the first frame, initialise and track the
first frame (``first_box``: from the process's start to the first box), the mean ``track``
milliseconds over ``--frames`` frames (frames decoded beforehand), and the peak resident memory
(``ru_maxrss``) in MiB. ``*_cpu_*``: the same in the process's CPU time (all its threads), which
a busy machine changes less than wall time.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--export", type=Path, help="an export folder: the lite runtime")
    group.add_argument("--torch", metavar="NAME", help="a registered tracker: the torch path")
    parser.add_argument("--sequence", type=Path, required=True, help="an OTB-layout sequence")
    parser.add_argument("--frames", type=int, default=100, help="frames timed after the first")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import cv2
    import numpy as np

    tic = time.perf_counter()
    if args.export:
        import ebmtrack.lite

        imported = time.perf_counter()
        tracker = ebmtrack.lite.load(args.export, threads=args.threads)
    else:
        import ebmtrack

        imported = time.perf_counter()
        tracker = ebmtrack.load_tracker(args.torch, threads=args.threads, runtime="torch")
    loaded = time.perf_counter()
    paths = sorted((args.sequence / "img").glob("*.jpg"))[: args.frames + 2]
    box = np.loadtxt(args.sequence / "groundtruth_rect.txt", delimiter=",", max_rows=1)
    first = cv2.cvtColor(cv2.imread(str(paths[0])), cv2.COLOR_BGR2RGB)
    read = time.perf_counter()
    tracker.initialize(first, box)
    initialized = time.perf_counter()
    second = cv2.cvtColor(cv2.imread(str(paths[1])), cv2.COLOR_BGR2RGB)
    tracker.track(second)
    first_box = time.perf_counter()
    first_box_cpu = time.process_time()
    frames = [cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB) for p in paths[2:]]
    times, cpu = [], []
    for frame in frames:
        t0, c0 = time.perf_counter(), time.process_time()
        tracker.track(frame)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    report = {
        "runtime": "lite" if args.export else "torch",
        "tracker": getattr(tracker, "name", args.torch),
        "backbone_runtime": getattr(tracker, "backbone_runtime", None),
        "import_s": imported - tic,
        "script_start_s": tic - START,
        "load_s": loaded - imported,
        "initialize_s": initialized - read,
        "first_box_s": first_box - START,
        "first_box_cpu_s": first_box_cpu,
        "track_ms": 1000 * float(np.mean(times)) if times else float("nan"),
        "track_cpu_ms": 1000 * float(np.mean(cpu)) if cpu else float("nan"),
        "frames": len(times),
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "torch_loaded": "torch" in sys.modules,
        "numpy": np.__version__,
        "opencv": cv2.__version__,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
