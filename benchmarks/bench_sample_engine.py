"""Distinct training pairs per second of the box head: the feature cache against the stream.

Times, on the ``pack-stream`` preset's data, model and crops (MobileNetV2, half-width head,
288-pixel crops), round-robin (one call of each per round, so that load from other processes on
a shared machine hits all alike):

- ``cache build``: what the feature cache does per pair (:func:`build_feature_cache`'s encoder:
  the processed pair, then eager float32 PyTorch on both crops);
- ``stream item``: what a stream worker does per pair (:class:`StreamedPairs`: the processed pair,
  then the backbone runtime of the preset, ONNX Runtime int8 by default);
- ``stream item, K per reference``: the same per pair when K pairs share one reference crop
  (``feature_stream.tests_per_reference``, ``--tests-per-reference``; pairs no longer
  independent);
- ``head step``: one optimizer step of the head on a batch of streamed pairs, MSE with 16
  proposals and NCE+ with M = 128 samples; on a CPU with native bfloat16 (AMX / avx512_bf16)
  also both in bfloat16 autocast (``bf16``).

From these: the distinct pairs per second of the cached loop when each cached pair is visited
``--visits`` times (1 / (1 / build + visits / step)), and of the stream when the workers keep up
(min(workers x item, step) with the workers on their own cores); then ``trainer``: the rate one
short epoch of the real :class:`~ebmtrack.training.Trainer` with the stream and
``--workers`` DataLoader workers reports (on a CPU with native bfloat16 also with the step in
bfloat16 autocast, ``trainer.cpu_bf16``). Medians are reported with the load average.

Usage::

    python benchmarks/bench_sample_engine.py --pack ../shared/data/train --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.data import default_collate

from ebmtrack.models.precision import fast_dtype
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.distributed import init_distributed
from ebmtrack.training.feature_cache import _encode_chunk
from ebmtrack.training.feature_stream import StreamedPairs
from ebmtrack.training.presets import preset_config
from ebmtrack.training.trainer import Trainer


def _config(pack: str, loss: str, workers: int, batch: int):
    """The preset's config for ``loss``; ``"mse windows"``: MSE with ``head_windows``."""
    config = preset_config("pack-stream")
    config.data.pack = pack
    config.loss = BoxLossConfig(loss.split()[0])
    config.head_windows = loss.endswith("windows")
    trainer = config.trainer
    trainer.batch_size, trainer.num_workers, trainer.progress = batch, workers, False
    trainer.epochs, trainer.val_every = 1, 0
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", default="../shared/data/train", help="the training pack")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--batch", type=int, default=32, help="pairs per head step (32)")
    parser.add_argument("--visits", type=int, default=4, help="visits of a cached pair (4)")
    parser.add_argument("--workers", type=int, default=1, help="stream workers (default 1)")
    parser.add_argument("--trainer-pairs", type=int, default=256, help="pairs of the trainer run")
    parser.add_argument(
        "--tests-per-reference", type=int, default=4, help="K of the grouped stream (default 4)"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench_sample_engine"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]

    config = _config(args.pack, "mse", args.workers, args.batch)
    module = config.build_module()
    train, _ = config.datasets(module, args.out, init_distributed("cpu"))
    samples = train.samples  # the processed pairs the stream wraps
    modules = {"mse": module.train()}
    for loss in ("mse windows", "nce+"):
        modules[loss] = _config(args.pack, loss, args.workers, args.batch).build_module().train()
    optimizers = {k: torch.optim.Adam(m.iou_net.parameters(), 1e-3) for k, m in modules.items()}
    batch = default_collate([train[i] for i in range(args.batch)])
    train[0], module.features(torch.zeros(1, 3, 288, 288))  # warm both backbone paths up

    def build(index: int) -> None:
        _encode_chunk(samples, range(index, index + 1), module, batch_size=1)

    def item(index: int) -> None:
        train[index]

    per_reference = args.tests_per_reference
    grouped = StreamedPairs(
        samples, module.backbone, train.layers, train.runtime, train.threads, per_reference
    )

    def group_item(index: int) -> None:  # a whole group per call: the round times K pairs
        for member in range(per_reference):
            grouped[index * per_reference + member]

    def step(loss: str) -> None:
        # "LOSS bf16": the same module's forward in bfloat16 autocast (AMX / avx512_bf16)
        name, bf16 = loss.removesuffix(" bf16"), loss.endswith(" bf16")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            value, _ = modules[name](batch)
        optimizers[name].zero_grad()
        value.float().backward()
        optimizers[name].step()

    native_bf16 = fast_dtype("cpu") == torch.bfloat16
    steps = list(modules) + (["mse bf16", "nce+ bf16"] if native_bf16 else [])
    grouped_name = f"stream item, {per_reference} per reference"
    times: dict[str, list[float]] = {"cache build": [], "stream item": [], grouped_name: []}
    times.update({f"head step {loss}": [] for loss in steps})
    index = 1
    for _ in range(args.rounds):
        calls = (("cache build", build, 1), ("stream item", item, 1))
        for name, call, pairs in (*calls, (grouped_name, group_item, per_reference)):
            start = time.perf_counter()
            for _ in range(4):
                call(index)
                index += 1
            times[name].append((time.perf_counter() - start) / (4 * pairs))
        for loss in steps:
            start = time.perf_counter()
            step(loss)
            times[f"head step {loss}"].append((time.perf_counter() - start) / args.batch)
    per_pair = {name: statistics.median(values) for name, values in times.items()}
    rates = {name: 1 / seconds for name, seconds in per_pair.items()}

    derived = {}
    for loss in steps:
        head = per_pair[f"head step {loss}"]
        derived[f"cached loop {loss}, {args.visits} visits"] = 1 / (
            per_pair["cache build"] + args.visits * head
        )
        derived[f"cached loop {loss}, 1 visit"] = 1 / (per_pair["cache build"] + head)
        derived[f"stream {loss}, workers keep up"] = min(
            args.workers * rates["stream item"], 1 / head
        )

    measured = {}
    runs = list(modules) + (["mse bf16", "nce+ bf16"] if native_bf16 else [])
    grouped_runs = [
        f"{loss} {per_reference} per reference" for loss in runs if "windows" not in loss
    ]
    for loss in runs + grouped_runs:
        name = loss.removesuffix(f" {per_reference} per reference")
        config = _config(args.pack, name.removesuffix(" bf16"), args.workers, args.batch)
        config.trainer.samples_per_epoch = args.trainer_pairs
        config.trainer.cpu_bf16 = name.endswith(" bf16")
        config.feature_stream.tests_per_reference = per_reference if loss != name else 1
        run_module = config.build_module()
        with tempfile.TemporaryDirectory() as folder:
            data, _ = config.datasets(run_module, Path(folder), init_distributed("cpu"))
            trainer = Trainer(run_module, data, config.trainer, folder)
            result = trainer.fit()[-1].train
        measured[f"trainer {loss}, {args.workers} worker(s)"] = result["samples_per_s"]

    report = {
        "pairs_per_s": {k: round(v, 2) for k, v in {**rates, **derived, **measured}.items()},
        "stream_vs_cached": {
            loss: round(
                measured[f"trainer {loss}, {args.workers} worker(s)"]
                / derived[f"cached loop {loss.split()[0]}, {args.visits} visits"],
                2,
            )
            for loss in modules
        },
        "trainer bf16_vs_float32": {
            loss: round(
                measured[f"trainer {loss} bf16, {args.workers} worker(s)"]
                / measured[f"trainer {loss}, {args.workers} worker(s)"],
                2,
            )
            for loss in ("mse", "nce+")
            if native_bf16
        },
        "windows_vs_whole_maps, mse": {
            "head step": round(per_pair["head step mse"] / per_pair["head step mse windows"], 2),
            "trainer": round(
                measured[f"trainer mse windows, {args.workers} worker(s)"]
                / measured[f"trainer mse, {args.workers} worker(s)"],
                2,
            ),
        },
        "bf16_vs_float32, head step": {
            loss: round(per_pair[f"head step {loss}"] / per_pair[f"head step {loss} bf16"], 2)
            for loss in ("mse", "nce+")
            if f"head step {loss} bf16" in per_pair
        },
        f"{per_reference} per reference vs independent pairs": {
            "stream item": round(rates[grouped_name] / rates["stream item"], 2),
            **{
                f"trainer {loss}": round(
                    measured[
                        f"trainer {loss} {per_reference} per reference, {args.workers} worker(s)"
                    ]
                    / measured[f"trainer {loss}, {args.workers} worker(s)"],
                    2,
                )
                for loss in runs
                if "windows" not in loss
            },
        },
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "torch": torch.__version__,
        "settings": vars(args) | {"out": str(args.out)},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
