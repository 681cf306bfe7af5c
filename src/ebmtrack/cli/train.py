"""``ebmtrack train``: offline training of the box head (ATOM's IoU-Net) with MSE or an EBM loss."""

from __future__ import annotations

import argparse
from pathlib import Path

from ebmtrack.cli.main import CLIError

DATASETS = ("lasot", "got10k", "trackingnet", "coco")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train the target-estimation network (MSE on IoU, or an EBM loss)",
        description=(
            "Train ATOM's IoU-Net on frame pairs of tracking data sets (or generated sequences). "
            "The run folder OUT receives config.yaml, metrics.csv, per-epoch checkpoints and, at "
            "the end, iou_net.safetensors. For several GPUs or machines start it with torchrun, "
            "e.g. `torchrun --nproc_per_node 4 -m ebmtrack.cli.main train ...`."
        ),
    )
    parser.add_argument("--out", required=True, type=Path, help="run folder")
    parser.add_argument(
        "--preset",
        default="atom-r18",
        help="starting config: atom-r18 (default), synthetic-smoke, default-cpu, dimp-cpu "
        "(DiMP's target classifier)",
    )
    parser.add_argument("--config", type=Path, help="YAML/JSON file of config values to apply")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in OUT from its latest checkpoint, with its saved config",
    )
    for name in DATASETS:
        parser.add_argument(f"--{name}", type=Path, metavar="DIR", help=f"{name} root folder")
    parser.add_argument("--backbone", help="backbone name (resnet18, resnet50, mobilenetv2, ...)")
    parser.add_argument("--backbone-weights", type=Path, help="ImageNet checkpoint of the backbone")
    parser.add_argument("--loss", help="mse (ATOM) or an EBM loss: ml-is, kld-is, nce, nce+, ...")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--batch-size", type=int, help="global batch over all processes")
    parser.add_argument("--samples-per-epoch", type=int)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--workers", type=int, help="DataLoader workers per process")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-amp", action="store_true", help="no mixed precision on CUDA")
    parser.add_argument("--threads", type=int, help="torch CPU threads per process")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any config value, e.g. --set trainer.val_every=1 "
        "--set data.val_splits.got10k=val",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _flag_changes(args: argparse.Namespace) -> dict:
    """The config values given by dedicated flags, as a nested dict."""
    trainer = {
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "samples_per_epoch": args.samples_per_epoch,
        "lr": args.lr,
        "num_workers": args.workers,
        "device": args.device,
        "seed": args.seed,
    }
    if args.no_amp:
        trainer["amp"] = False
    if args.no_progress:
        trainer["progress"] = False
    changes: dict = {"trainer": {k: v for k, v in trainer.items() if v is not None}}
    roots = {name: str(getattr(args, name)) for name in DATASETS if getattr(args, name)}
    if roots:
        changes["data"] = {"roots": roots}
    if args.backbone:
        changes["backbone"] = args.backbone
    if args.backbone_weights:
        changes["backbone_weights"] = str(args.backbone_weights)
        changes["pretrained"] = True
    if args.loss:
        changes["loss"] = {"name": args.loss}
    return changes


def build_config(args: argparse.Namespace):
    """The experiment config: preset (or the run's saved config), file, flags, then --set."""
    from ebmtrack.training.config import (
        apply_overrides,
        config_from_dict,
        config_to_dict,
        merge_config_dicts,
        read_config_file,
    )
    from ebmtrack.training.experiment import CONFIG_FILE, ExperimentConfig, preset_config

    saved = args.out / CONFIG_FILE
    if args.resume and saved.is_file():
        data = read_config_file(saved)
    else:
        data = config_to_dict(preset_config(args.preset))
    if args.config is not None:
        data = merge_config_dicts(data, read_config_file(args.config))
    if args.loss and args.loss != data.get("loss", {}).get("name"):
        data["loss"] = {"name": args.loss, "params": {}}  # another loss: start from its recipe
    data = apply_overrides(merge_config_dicts(data, _flag_changes(args)), args.set)
    return config_from_dict(ExperimentConfig, data)


def run(args: argparse.Namespace) -> int:
    import torch

    from ebmtrack.training import NonFiniteLossError
    from ebmtrack.training.distributed import init_distributed, shutdown_distributed
    from ebmtrack.training.experiment import model_file, run_experiment

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    config = build_config(args)
    context = init_distributed(config.trainer.device)
    try:
        results = run_experiment(config, args.out, resume=args.resume, context=context)
    except NonFiniteLossError as err:
        raise CLIError(str(err)) from None
    finally:
        shutdown_distributed()
    if context.is_main:
        if results:
            last = results[-1]
            line = f"epoch {last.epoch}: train loss {last.train['loss']:.4f}"
            if last.val is not None:
                line += f", val loss {last.val['loss']:.4f}"
            print(line)
        else:
            print(f"nothing to do: {args.out} already finished {config.trainer.epochs} epochs")
        print(f"wrote {args.out / model_file(config)}")
    return 0
