"""Training throughput of the box head (pairs per second) on the CPU.

Times, round-robin (one call of each per round, so that load from other processes on a shared
machine hits all alike), on one pre-collated batch of synthetic pairs:

- ``features``: the frozen backbone on the reference and test crops (no_grad): the part of a
  step that no loss can avoid; the baseline of the ratios;
- ``step/<loss>``: a whole optimizer step (features, IoU-Net forward, loss, backward, Adam) for
  MSE with 16 proposals (ATOM) and for EBM losses with M = 128 samples (BMVC recipes);
- ``data``: producing one batch of pairs (synthetic rendering + cropping + proposals), one process.

Then ``trainer``: the rate one epoch of the full :class:`~ebmtrack.training.Trainer` loop reports
(data made in the main process, steps, loss reduction; ``rounds`` batches) on the same kind of
data. Medians are reported; the ATOM architecture (ResNet-18 + full-width IoU-Net) runs with
random weights, which does not change the time.

Usage::

    python benchmarks/bench_training.py --threads 2 --crop 288 --batch 8 --rounds 5
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

from ebmtrack.data.synthetic import SyntheticConfig
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.experiment import run_experiment
from ebmtrack.training.presets import preset_config


def experiment(args: argparse.Namespace, loss: str):
    config = preset_config("synthetic-smoke")  # generated data, nothing on disk
    config.backbone, config.head_width, config.head_dims = args.backbone, 1.0, 256
    config.processing = type(config.processing)(output_size=args.crop)
    config.data.synthetic = SyntheticConfig(num_frames=30)  # 240 x 320 frames
    config.loss = BoxLossConfig(loss)
    trainer = config.trainer
    trainer.batch_size, trainer.samples_per_epoch = args.batch, args.batch * args.rounds
    trainer.epochs, trainer.val_every, trainer.progress = 1, 0, False
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--crop", type=int, default=288, help="crop side in pixels (288)")
    parser.add_argument("--batch", type=int, default=8, help="pairs per step (default 8)")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per configuration")
    parser.add_argument("--backbone", default="resnet18")
    parser.add_argument("--losses", default="mse,nce+,kld-is", help="comma-separated losses")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_training"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    losses = [name.strip() for name in args.losses.split(",") if name.strip()]

    train, _ = experiment(args, "mse").build_datasets()
    batch = default_collate([train[i] for i in range(args.batch)])
    runners = {}
    modules = {loss: experiment(args, loss).build_module().train() for loss in losses}
    base = modules[losses[0]]

    def features():
        base.features(batch["ref_image"]), base.features(batch["test_image"])

    runners["features"] = features
    for loss, module in modules.items():
        optimizer = torch.optim.Adam(module.iou_net.parameters(), lr=1e-3)

        def step(module=module, optimizer=optimizer):
            value, _ = module(batch)
            optimizer.zero_grad(set_to_none=True)
            value.backward()
            optimizer.step()

        runners[f"step/{loss}"] = step
    offset = [args.batch]

    def data():
        start = offset[0]
        default_collate([train[i % len(train)] for i in range(start, start + args.batch)])
        offset[0] += args.batch

    runners["data"] = data

    for run in runners.values():  # warm-up
        run()
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)

    with tempfile.TemporaryDirectory() as run_dir:
        (epoch,) = run_experiment(experiment(args, losses[0]), run_dir)
        trainer_rate = epoch.train["samples_per_s"]

    medians = {name: statistics.median(values) for name, values in times.items()}
    baseline = medians["features"]
    rows = [
        {
            "config": name,
            "s_per_batch": medians[name],
            "pairs_per_s": args.batch / medians[name],
            "ratio_to_features": medians[name] / baseline,
        }
        for name in runners
    ]
    rows.append(
        {
            "config": f"trainer/{losses[0]} (epoch loop, data in-process)",
            "s_per_batch": args.batch / trainer_rate,
            "pairs_per_s": trainer_rate,
            "ratio_to_features": args.batch / trainer_rate / baseline,
        }
    )
    print(
        f"backbone {args.backbone}, crop {args.crop}, batch {args.batch}, {args.threads} threads, "
        f"{args.rounds} rounds, {os.cpu_count()} CPUs (shared machine: compare ratios)"
    )
    print(f"{'config':<46} {'s/batch':>8} {'pairs/s':>8} {'x features':>10}")
    for row in rows:
        print(
            f"{row['config']:<46} {row['s_per_batch']:8.3f} {row['pairs_per_s']:8.2f} "
            f"{row['ratio_to_features']:10.2f}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    report = {
        "settings": {k: str(v) for k, v in vars(args).items()},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "torch": torch.__version__,
        "rows": rows,
    }
    (args.out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
