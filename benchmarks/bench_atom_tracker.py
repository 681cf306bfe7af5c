"""Per-frame cost of the ATOM tracker, stage by stage, against its own backbone pass.

For each backbone (resnet18 with random weights: the speed is the same as with ImageNet weights,
which do not ship; mobilenetv2 with its ImageNet weights), each backbone runtime (eager PyTorch,
ONNX Runtime, and with ``--runtimes onnx-int8`` its int8 model, mobilenetv2 in float32 only)
and each search size, the tracker runs a sequence with IoU refinement on (a
random IoU-Net of the right width: the same cost as a trained one; ``--modes default`` runs the
shipped default instead, the classifier alone with its three-region scale search) and reports
the time per
frame of: crop, backbone, classifier, IoU refinement (medians over the frames) and update (memory
writes and the filter updates of the run, a mean), then ``update@250``: one filter update on a
full 250-sample memory (a short run never fills it; median of 3) divided by the 10 frames
between updates; the total counts the larger of the two update figures; then total / backbone
(goal < 1.5), the same ratio without the IoU refinement (what the other stages alone
take of the budget) and FPS (goal >= 30 with the mobile backbone). The first frames after
initialisation are warm-up and not counted. The same figures in CPU time (``process_time``:
what the process used, nearly blind to other jobs on the cores) follow: backbone (median of 10
passes), the median frame (no filter update in it), update@250, their total, its ratio to the
backbone and the FPS it implies.

    .venv/bin/python benchmarks/bench_atom_tracker.py --threads 1 --frames 45

Frames come from ``../shared/data/sequences/<sequence>`` next to the repository if present,
else from a generated sequence. Results go to stdout (a markdown table) and to
``runs/bench_atom_tracker.json``. On a shared machine the absolute times vary from run to run;
the ratios, measured in the same run, vary less.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from ebmtrack.data.io import list_images, read_image
from ebmtrack.models.atom_classifier import update_filter
from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.tracking.atom import AtomParams, AtomTracker
from ebmtrack.tracking.atom.variants import CLASSIFIER_ONLY

REPO = Path(__file__).resolve().parents[1]
STAGES = ("crop", "backbone", "classifier", "box", "update")  # box: the IoU refinement
COLUMNS = (*STAGES, "update@250")
CPU_COLUMNS = ("cpu_backbone", "cpu_frame", "cpu_update250", "cpu_total", "cpu_ratio")


def load_frames(sequence: str, count: int) -> tuple[list[np.ndarray], np.ndarray]:
    root = REPO.parent / "shared" / "data" / "sequences" / sequence
    if root.is_dir():
        paths = list_images(root / "img")[:count]
        first_box = np.loadtxt(root / "groundtruth_rect.txt", delimiter=",", max_rows=1)
        return [read_image(p) for p in paths], first_box
    rng = np.random.default_rng(0)
    background = rng.integers(0, 256, (360, 480, 3), dtype=np.uint8)
    frames = []
    for t in range(count):
        frame = background.copy()
        frame[100 + t : 160 + t, 150 + 2 * t : 230 + 2 * t] = 255
        frames.append(frame)
    return frames, np.array([150.0, 100.0, 80.0, 60.0])


def bench(backbone_name, runtime, search_size, frames, box, warmup, mode, precision):
    pretrained = backbone_name != "resnet18"
    backbone = create_backbone(backbone_name, pretrained=pretrained)
    torch.manual_seed(0)
    iou_net = AtomIoUNet(IoUNetConfig.for_backbone(backbone)).eval().requires_grad_(False)
    extra = {}
    if mode == "default":
        iou_net, extra = None, CLASSIFIER_ONLY
    params = AtomParams(
        backbone=backbone_name,
        backbone_runtime=runtime,
        search_size=search_size,
        precision=precision,
        **extra,
    )
    tracker = AtomTracker(backbone, iou_net, params)
    start = time.perf_counter()
    tracker.initialize(frames[0], box)
    init_time = time.perf_counter() - start
    rows, cpu_frames = [], []
    for index, frame in enumerate(frames[1:]):
        cpu_start = time.process_time()
        tracker.track(frame)
        if index >= warmup:
            cpu_frames.append(time.process_time() - cpu_start)
            rows.append([tracker.last_timings[s] for s in STAGES])
    # Medians resist the load of a shared machine; the update is a mean, because it is amortised
    # (a full update every train_skipping frames, memory writes in between).
    rows = np.array(rows)
    times = np.append(np.median(rows[:, :-1], axis=0), rows[:, -1].mean()) * 1e3
    # A short run never fills the 250-sample memory: time one update on a full memory too, and
    # count it once every train_skipping frames in the steady-state total.
    state = tracker.state
    samples, labels, weights = state.memory.training_set()
    count = params.memory_size
    full = [
        t.repeat(count // t.shape[0] + 1, *([1] * (t.dim() - 1)))[:count] for t in (samples, labels)
    ]
    update_times, update_cpu = [], []
    for _ in range(3):
        start, cpu_start = time.perf_counter(), time.process_time()
        update_filter(
            state.model,
            *full,
            torch.full((count,), 1.0 / count),
            params.update_cg_iters,
            product_dtype=tracker.dtype,
        )
        update_times.append(time.perf_counter() - start)
        update_cpu.append(time.process_time() - cpu_start)
    full_update = float(np.median(update_times)) * 1e3
    # CPU time (process_time) is what the process itself used: unlike wall time it hardly
    # changes when other jobs take the cores, so its ratios compare across runs.
    backbone_cpu = []
    with torch.inference_mode():
        for _ in range(10):
            cpu_start = time.process_time()
            tracker.search.extract(tracker.search.image)
            backbone_cpu.append(time.process_time() - cpu_start)
    cpu_backbone = float(np.median(backbone_cpu)) * 1e3
    # The median frame runs no filter update; the full-memory update comes every 10 frames.
    cpu_update = float(np.median(update_cpu)) * 1e3 / params.train_skipping
    cpu_total = float(np.median(cpu_frames)) * 1e3 + cpu_update
    steady_update = full_update / params.train_skipping
    result = dict(zip(STAGES, times.round(2).tolist()))
    result["update@250"] = round(steady_update, 2)
    total = float(times.sum()) + max(steady_update - result["update"], 0.0)
    result.update(
        backbone_name=backbone_name,
        runtime=runtime,
        mode=mode,
        precision=precision,
        search_size=search_size,
        total=round(total, 2),
        ratio=round(total / result["backbone"], 3),
        # What the other stages alone leave of the ratio's budget: the floor under any IoU head.
        ratio_without_iou=round((total - result["box"]) / result["backbone"], 3),
        fps=round(1000.0 / total, 1),
        init_s=round(init_time, 2),
        full_update_ms=round(full_update, 1),
        frames=len(rows),
        cpu_backbone=round(cpu_backbone, 2),
        cpu_frame=round(float(np.median(cpu_frames)) * 1e3, 2),
        cpu_update250=round(cpu_update, 2),
        cpu_total=round(cpu_total, 2),
        cpu_ratio=round(cpu_total / cpu_backbone, 3),
        cpu_fps=round(1000.0 / cpu_total, 1),
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--frames", type=int, default=60, help="frames per run, init included")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--sequence", default="Jumping")
    parser.add_argument("--sizes", default="288,192")
    parser.add_argument("--backbones", default="mobilenetv2,resnet18")
    parser.add_argument("--runtimes", default="torch,onnx")
    parser.add_argument("--modes", default="atom", help="atom (IoU refinement) and/or default")
    parser.add_argument("--precisions", default="auto", help="AtomParams.precision values")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench_atom_tracker.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    frames, box = load_frames(args.sequence, args.frames)
    results = []
    header = (
        "| mode | precision | backbone | runtime | size | "
        + " | ".join(COLUMNS)
        + " | total ms | ratio | ratio without IoU | FPS"
        + " | CPU: backbone | frame | update@250 | total | ratio | FPS |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    configs = [
        (mode, precision, name, runtime, int(size))
        for mode in args.modes.split(",")
        for precision in args.precisions.split(",")
        for name in args.backbones.split(",")
        for runtime in args.runtimes.split(",")
        for size in args.sizes.split(",")
    ]
    for mode, precision, name, runtime, size in configs:
        r = bench(name, runtime, size, frames, box, args.warmup, mode, precision)
        results.append(r)
        cells = " | ".join(f"{r[c]:.1f}" for c in COLUMNS)
        cpu = " | ".join(f"{r[c]:.1f}" for c in CPU_COLUMNS)
        print(
            f"| {mode} | {precision} | {name} | {runtime} | {size} | {cells} | "
            f"{r['total']:.1f} | {r['ratio']:.2f} | {r['ratio_without_iou']:.2f} | "
            f"{r['fps']:.1f} | {cpu} | {r['cpu_fps']:.1f} |",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"threads": args.threads, "sequence": args.sequence, "frames": args.frames}
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
