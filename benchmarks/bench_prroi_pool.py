"""Benchmark of ebmtrack.ops.prroi_pool against a straightforward per-bin implementation.

Workloads (ATOM's IoU-Net, 288 x 288 crops):
- tracking: 10 boxes around the target on a 256-channel 36x36 map (1/8) at 5x5 bins plus a
  256-channel 18x18 map (1/16) at 3x3 bins; forward + backward to the box coordinates (the IoU
  refinement), and to coordinates and features.
- training: batch 64 with 16 proposals each (ATOM's proposal recipe), same maps; forward +
  backward to the features.
- training EBM: batch 32 with an EBM loss's 128 drawn boxes plus the target each (NCE+'s
  Gaussian mixture in relative box space, sigmas 0.05 and 0.5), same maps and backward.

Times are per call of both maps together: wall-clock min and median over the repetitions, and
the median process CPU time (all threads). The per-bin baseline's cost is linear in the number
of RoIs, so on the training workload it runs on the RoIs of the first ``--baseline-images``
images and its times are scaled up to the whole batch.

The differences to the baseline are of the pooled values and of their gradients with respect
to the box coordinates (of the sum of the outputs), on the baseline's RoIs: the baseline is
differentiated by autograd, ours by its written-out backward. ``--previous FILE`` also times
another version of ``ebmtrack/ops/prroi_pool.py`` (e.g. an older commit's, from ``git show``)
in the same run.

Run it as ``python benchmarks/bench_prroi_pool.py``; it prints a markdown table and writes it
with the raw numbers under runs/benchmarks/.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from ebmtrack.ops import box_convert, perturb_boxes, prroi_pool

CROP = 288
MAPS = ((36, 1 / 8, 5), (18, 1 / 16, 3))  # (size, spatial_scale, bins)


def load_module(path: Path):
    """Import a Python file under its own name, e.g. an older commit's version of a module."""
    name = f"previous_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def measure(fn, reps: int, warmup: int = 2) -> dict[str, float]:
    """Run ``fn`` and return wall min / median and median process CPU time, in milliseconds."""
    for _ in range(warmup):
        fn()
    walls, cpus = [], []
    for _ in range(reps):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return {
        "wall_min_ms": 1e3 * min(walls),
        "wall_median_ms": 1e3 * statistics.median(walls),
        "cpu_median_ms": 1e3 * statistics.median(cpus),
        "reps": reps,
    }


def _hat_integral(lo: float, hi: float, centre: torch.Tensor) -> torch.Tensor:
    """Integral over [lo, hi] of max(0, 1 - |x - centre|), piecewise, for each centre."""

    def cdf(x):
        t = (x - centre).clamp(-1, 1)
        return torch.where(t < 0, 0.5 * (t + 1) ** 2, 1 - 0.5 * (1 - t) ** 2)

    return cdf(hi) - cdf(lo)


def prroi_pool_per_bin(features, rois, output_size, spatial_scale):
    """Baseline: one bin at a time, exact integral of the bilinear field, plain autograd."""
    height, width = features.shape[-2:]
    rows = torch.arange(height, dtype=features.dtype)
    cols = torch.arange(width, dtype=features.dtype)
    pooled = []
    for roi in rois:
        image = features[int(roi[0])]
        x1, y1, x2, y2 = roi[1:] * spatial_scale
        bin_w = (x2 - x1).clamp(min=0) / output_size
        bin_h = (y2 - y1).clamp(min=0) / output_size
        bins = []
        for p in range(output_size):
            for q in range(output_size):
                if bin_w * bin_h == 0:
                    bins.append(image.new_zeros(image.shape[0]))
                    continue
                wy = _hat_integral(y1 + p * bin_h, y1 + (p + 1) * bin_h, rows)
                wx = _hat_integral(x1 + q * bin_w, x1 + (q + 1) * bin_w, cols)
                bins.append((image * wy[:, None] * wx).sum((1, 2)) / (bin_w * bin_h))
        pooled.append(torch.stack(bins, 1).view(-1, output_size, output_size))
    return torch.stack(pooled)


def tracking_rois(generator: torch.Generator) -> torch.Tensor:
    """10 boxes as in ATOM's IoU refinement: the target (1/5 of the crop) and 9 jittered ones."""
    side = CROP / 5
    centre = (
        torch.full((10, 2), CROP / 2) + (torch.rand(10, 2, generator=generator) - 0.5) * 0.1 * side
    )
    size = side + (torch.rand(10, 2, generator=generator) - 0.5) * 0.5 * side
    xyxy = torch.cat([centre - size / 2, centre + size / 2], dim=1)
    return torch.cat([torch.zeros(10, 1), xyxy], dim=1)


def training_rois(batch: int, generator: torch.Generator) -> torch.Tensor:
    """16 proposals (IoU > 0.1) per image around a jittered target box, as in ATOM training."""
    rows = []
    for image in range(batch):
        size = CROP / 5 * torch.exp(0.5 * torch.randn(2, generator=generator)).clamp(0.3, 3)
        centre = CROP / 2 + (torch.rand(2, generator=generator) - 0.5) * 4.5 * size.prod().sqrt()
        target = torch.cat([centre - size / 2, size])
        proposals, _ = perturb_boxes(target, 16, 0.1, generator=generator)
        rows.append(
            torch.cat(
                [torch.full((16, 1), float(image)), box_convert(proposals, "xywh", "xyxy")], 1
            )
        )
    return torch.cat(rows)


def ebm_rois(batch: int, generator: torch.Generator, samples: int = 128) -> torch.Tensor:
    """The target and ``samples`` boxes per image drawn as an EBM loss draws them: centre and
    log size offsets relative to the target, half with sigma 0.05 and half with 0.5."""
    rows = []
    for image in range(batch):
        size = CROP / 5 * torch.exp(0.5 * torch.randn(2, generator=generator)).clamp(0.3, 3)
        centre = CROP / 2 + (torch.rand(2, generator=generator) - 0.5) * 0.5 * size
        sigma = torch.tensor([0.05, 0.5]).repeat_interleave(samples // 2)[:, None]
        noise = torch.randn(samples, 4, generator=generator) * sigma
        centres = torch.cat([centre[None], centre + noise[:, :2] * size])
        sizes = torch.cat([size[None], size * noise[:, 2:].exp()])
        xyxy = torch.cat([centres - sizes / 2, centres + sizes / 2], dim=1)
        rows.append(torch.cat([torch.full((samples + 1, 1), float(image)), xyxy], dim=1))
    return torch.cat(rows)


def pool_both(pool, maps, rois):
    return [pool(feat, rois, bins, scale) for feat, (_, scale, bins) in zip(maps, MAPS)]


def workload(pool, maps, rois, box_grad: bool, feature_grad: bool):
    """Forward both maps, then backward to the box coordinates and/or the features."""
    maps = [m.detach().requires_grad_(feature_grad) for m in maps]

    def run():
        coords = rois[:, 1:].detach().requires_grad_(box_grad)
        outs = pool_both(pool, maps, torch.cat([rois[:, :1], coords], dim=1))
        inputs = ([coords] if box_grad else []) + (maps if feature_grad else [])
        if inputs:
            torch.autograd.grad(sum(o.sum() for o in outs), inputs)

    return run


def differences(maps, rois) -> tuple[float, float]:
    """Max abs differences to the per-bin baseline: pooled values, box-coordinate gradients."""
    values, grads = [], []
    for pool in (prroi_pool, prroi_pool_per_bin):
        coords = rois[:, 1:].detach().requires_grad_(True)
        outs = pool_both(pool, maps, torch.cat([rois[:, :1], coords], dim=1))
        (grad,) = torch.autograd.grad(sum(o.sum() for o in outs), coords)
        values.append([o.detach() for o in outs])
        grads.append(grad)
    value_diff = max((a - b).abs().max().item() for a, b in zip(*values))
    return value_diff, (grads[0] - grads[1]).abs().max().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--reps", type=int, default=200, help="repetitions, tracking workload")
    parser.add_argument("--train-reps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--baseline-images", type=int, default=4, help="training images the baseline runs on"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks"))
    parser.add_argument(
        "--previous", type=Path, default=None, help="another prroi_pool.py to time as well"
    )
    args = parser.parse_args()
    previous = None if args.previous is None else load_module(args.previous).prroi_pool
    generator = torch.Generator().manual_seed(0)

    workloads = [
        (
            name,
            rois,
            [torch.randn(batch, 256, size, size, generator=generator) for size, *_ in MAPS],
        )
        for name, batch, rois in (
            ("tracking", 1, tracking_rois(generator)),
            ("training", args.batch, training_rois(args.batch, generator)),
            ("training EBM", 32, ebm_rois(32, generator)),
        )
    ]
    results = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name, rois, maps in workloads:
            if name == "tracking":
                cases = {
                    "forward": (False, False),
                    "fwd+bwd (boxes)": (True, False),
                    "fwd+bwd (boxes, features)": (True, True),
                }
                reps, base_reps = args.reps, max(3, args.reps // 20)
            else:
                cases = {"fwd+bwd (features)": (False, True)}
                reps, base_reps = args.train_reps, 1
            # The per-bin baseline's cost is linear in the number of RoIs: on the training
            # workload it runs on the RoIs of the first images only and is scaled up.
            images = 1 if name == "training EBM" else args.baseline_images
            subset = rois[rois[:, 0] < images]
            diff, grad_diff = differences(maps, subset)
            for case, grads in cases.items():
                ours = measure(workload(prroi_pool, maps, rois, *grads), reps)
                base = measure(
                    workload(prroi_pool_per_bin, maps, subset, *grads), base_reps, warmup=0
                )
                scale = len(rois) / len(subset)
                base = {k: v * scale if k.endswith("_ms") else v for k, v in base.items()}
                base["scaled_from_rois"] = len(subset)
                row = {
                    "threads": threads,
                    "workload": name,
                    "case": case,
                    "ours": ours,
                    "per_bin": base,
                    "speedup_wall_min": base["wall_min_ms"] / ours["wall_min_ms"],
                    "max_abs_diff": diff,
                    "max_abs_box_grad_diff": grad_diff,
                }
                text = ""
                if previous is not None:
                    row["previous"] = measure(workload(previous, maps, rois, *grads), reps)
                    row["vs_previous_wall_min"] = (
                        row["previous"]["wall_min_ms"] / ours["wall_min_ms"]
                    )
                    text = (
                        f"  previous {row['previous']['wall_min_ms']:.3f} ms "
                        f"x{row['vs_previous_wall_min']:.2f}"
                    )
                results.append(row)
                print(
                    f"{threads} thr {name:8s} {case:26s} ours {ours['wall_min_ms']:9.3f} ms "
                    f"(median {ours['wall_median_ms']:.3f}, cpu {ours['cpu_median_ms']:.3f})  "
                    f"per-bin {base['wall_min_ms']:10.1f} ms  x{row['speedup_wall_min']:.0f}  "
                    f"|diff| {diff:.1e} |grad diff| {grad_diff:.1e}{text}",
                    flush=True,
                )

    extra = previous is not None
    lines = [
        "| threads | workload | case | ours: wall min / median (ms) | ours: CPU median (ms) "
        "| per-bin baseline: wall min (ms) | speed-up | max abs diff: values / box grads |"
        + (" previous: wall min (ms) | vs previous |" if extra else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|---|" if extra else ""),
    ]
    for r in results:
        o, b = r["ours"], r["per_bin"]
        lines.append(
            f"| {r['threads']} | {r['workload']} | {r['case']} | "
            f"{o['wall_min_ms']:.3f} / {o['wall_median_ms']:.3f} | {o['cpu_median_ms']:.3f} | "
            f"{b['wall_min_ms']:.1f} | {r['speedup_wall_min']:.0f}x | "
            f"{r['max_abs_diff']:.1e} / {r['max_abs_box_grad_diff']:.1e} |"
            + (
                f" {r['previous']['wall_min_ms']:.3f} | {r['vs_previous_wall_min']:.2f}x |"
                if extra
                else ""
            )
        )
    table = "\n".join(lines)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"torch": torch.__version__, "machine": platform.processor() or platform.machine()}
    (args.out / "prroi_pool.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=1)
    )
    (args.out / "prroi_pool.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
