"""``ebmtrack train``: offline training of the box head (ATOM's IoU-Net) with MSE or an EBM loss."""

from __future__ import annotations

import argparse
from pathlib import Path

from ebmtrack.cli.main import (
    CLIError,
    add_device_argument,
    add_out_argument,
    add_progress_argument,
    add_threads_argument,
    non_negative_int,
    positive_int,
    resolve_device,
    threads,
)
from ebmtrack.cli.paths import check_output_folder

DATASETS = ("lasot", "got10k", "trackingnet", "coco")
DEFAULT_PRESET = "atom-r18"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train the target-estimation network (MSE on IoU, or an EBM loss)",
        description=(
            "Train ATOM's IoU-Net on frame pairs of tracking data sets (or generated sequences). "
            "The run folder OUT receives config.yaml, metrics.csv, per-epoch checkpoints and, at "
            "the end, iou_net.safetensors (with a dimp preset: DiMP's target classifier, "
            "dimp_classifier.safetensors). For several GPUs or machines start it with torchrun, "
            "e.g. `torchrun --nproc_per_node 4 -m ebmtrack.cli.main train ...`."
        ),
    )
    add_out_argument(parser, "run folder (config.yaml, metrics.csv, checkpoints/, the model)")
    parser.add_argument(
        "--preset",
        default=DEFAULT_PRESET,
        help="starting config: atom-r18 (default; ATOM's recipe: needs ResNet-18 weights and "
        "GOT-10k / LaSOT / TrackingNet / COCO), synthetic-smoke (generated data only, "
        "seconds), pack-cpu (the box head on the training pack train/ below the data root and "
        "generated sequences, 2 CPU cores), pack-stream (the same head on the whole pack, "
        "every sample a fresh pair with worker-made int8 features: the long run; the recipe "
        "of atom-iounet's head), dimp-pack-cpu (DiMP's target classifier, pack-cpu's data), "
        "dimp-pack-clips (the same on the whole pack: the recipe of the shipped classifier), "
        "dimp-pack-stream (the same classifier, every sample a fresh set of frames with "
        "worker-made features), "
        "default-cpu and dimp-cpu (pack-cpu and dimp-pack-cpu on sequences/ below the data "
        "root: the test sequences less a held-out fold, the recipes of the models shipped "
        "until 5 Dec 2026). The data root is $EBMTRACK_DATA, default ../shared/data",
    )
    parser.add_argument("--config", type=Path, help="YAML/JSON file of config values to apply")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its latest checkpoint, with its saved config",
    )
    for name in DATASETS:
        parser.add_argument(f"--{name}", type=Path, metavar="DIR", help=f"{name} root folder")
    parser.add_argument("--backbone", help="backbone name (resnet18, resnet50, mobilenetv2, ...)")
    parser.add_argument(
        "--backbone-weights",
        type=Path,
        metavar="FILE",
        help="the backbone's weights: a torchvision checkpoint (.pth or .safetensors) for "
        "resnet18 / resnet50, which ship none (default: the shipped ImageNet weights)",
    )
    parser.add_argument("--loss", help="mse (ATOM) or an EBM loss: ml-is, kld-is, nce, nce+, ...")
    parser.add_argument("--epochs", type=positive_int, help="epochs to train (default: preset)")
    parser.add_argument(
        "--batch-size", type=positive_int, help="global batch over all processes (default: preset)"
    )
    parser.add_argument(
        "--samples-per-epoch", type=positive_int, help="training pairs per epoch (default: preset)"
    )
    parser.add_argument("--lr", type=float, help="learning rate (default: preset)")
    parser.add_argument(
        "--data-workers",
        type=non_negative_int,
        metavar="N",
        help="data-loading (DataLoader) processes per training process (default: preset)",
    )
    add_device_argument(parser, default=None, default_text="the preset's, auto")
    parser.add_argument("--seed", type=int, help="random seed of the run (default: preset)")
    parser.add_argument("--no-amp", action="store_true", help="no mixed precision on CUDA")
    add_threads_argument(parser, default=None, default_text="torch's")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any config value, e.g. --set trainer.val_every=1 "
        "--set data.val_splits.got10k=val",
    )
    parser.add_argument(
        "--export",
        type=Path,
        metavar="FILE",
        help="write the model of the latest checkpoint of the run in --out to FILE and exit "
        "(a long run's model before it ends); takes no other flag",
    )
    parser.add_argument(
        "--write-resume-point",
        type=Path,
        metavar="FILE",
        help="write the latest checkpoint of the run in --out, with its config, to the one small "
        "file FILE (the optimizer's moments in bfloat16) and exit: what a fresh machine needs "
        "to continue the run; takes no other flag",
    )
    parser.add_argument(
        "--resume-from",
        type=Path,
        metavar="FILE",
        help="start the empty run folder --out from the resume point FILE and continue the run "
        "(as --resume does); takes no other config flag",
    )
    add_progress_argument(parser)
    parser.set_defaults(
        func=run,
        interrupted_note="the last complete checkpoint is kept in {out}; add --resume to continue",
    )


def _flag_changes(args: argparse.Namespace) -> dict:
    """The config values given by dedicated flags, as a nested dict."""
    if args.device == "cuda":
        resolve_device(args.device)  # no GPU: the message every command gives
    trainer = {
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "samples_per_epoch": args.samples_per_epoch,
        "lr": args.lr,
        "num_workers": args.data_workers,
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
    """The experiment config: :func:`ebmtrack.training.runs.build_experiment` of the preset (or
    the run's saved config), ``--config``, the flags and ``--set``, its errors naming the flags."""
    from ebmtrack.training.experiment import CONFIG_FILE
    from ebmtrack.training.runs import Origins, build_experiment

    saved = args.out / CONFIG_FILE
    if args.resume and not saved.is_file():
        raise CLIError(
            f"--resume: {args.out} holds no run to resume (no {CONFIG_FILE}); leave out "
            "--resume to start one"
        )
    origins = Origins(
        base=lambda preset: f"--preset {preset}",
        config_file=lambda path: f"--config {path}",
        override=lambda item: f"--set {item}",
        change=lambda key: "--" + key.replace("_", "-"),
    )
    try:
        return build_experiment(
            args.preset,
            run=args.out if args.resume else None,
            config_file=args.config,
            changes=_flag_changes(args),
            overrides=args.set,
            origins=origins,
        )
    except ValueError as err:
        raise CLIError(str(err)) from None


def check_inputs(config, args: argparse.Namespace) -> None:
    """Refuse, in one line naming the flags, a config whose backbone weights or training data
    are missing: before anything is built or written."""
    from ebmtrack.models.backbones.registry import backbone_specs
    from ebmtrack.training.presets import DATA_ROOT_ENV
    from ebmtrack.training.sources import SOURCES

    needs = []
    backbone = config.backbone
    spec = backbone_specs().get(backbone)
    if spec is not None and config.pretrained and config.backbone_weights is None and not (
        spec.weights
    ):
        what = (
            f"its {spec.weights_file}"
            if spec.weights_file is not None
            else f"ImageNet weights, e.g. torchvision's {backbone}-*.pth; none ship"
        )
        needs.append(f"--backbone-weights FILE for backbone {backbone} ({what})")
    data = config.data
    key = SOURCES[data.source].folder_setting  # the folder the source reads, if any
    folder = None if key is None else getattr(data, key)
    if folder is not None and not Path(folder).is_dir():
        needs.append(
            f"the data in {folder} (data.{key}: not a folder; run from the repository root "
            f"beside ../shared, set {DATA_ROOT_ENV}=DIR (the data root), or --set data.{key}=DIR)"
        )
    if data.source == "datasets" and not data.roots:
        needs.append(
            "training data: --got10k DIR, --lasot DIR, --trackingnet DIR and/or --coco DIR"
        )
    if needs:
        preset = f"--preset {config.preset}" + (
            " (the default)" if config.preset == args.preset == DEFAULT_PRESET else ""
        )
        hint = "" if config.preset == "synthetic-smoke" else "; --preset synthetic-smoke runs "
        hint += "on generated data alone" if hint else ""
        raise CLIError(f"{preset} needs {' and '.join(needs)}{hint}")


def _write_failed(err: Exception) -> bool:
    """Whether ``err`` is safetensors' or torch.save's report of a failed write (full disk):
    neither raises an OSError."""
    text = str(err)
    if type(err).__name__ == "SafetensorError":
        return "I/O error" in text
    return isinstance(err, RuntimeError) and (
        "PytorchStreamWriter" in text or "file write failed" in text
    )


def _only_out(args: argparse.Namespace, flag: str, what: str, allowed: tuple[str, ...]) -> None:
    """Refuse every config flag beside ``flag`` (and ``allowed``), in one line."""
    changes = _flag_changes(args)
    given = {
        **changes["trainer"],
        "resume": args.resume or None,
        "set": args.set,
        "config": args.config,
        "preset": args.preset if args.preset != DEFAULT_PRESET else None,
        "export": args.export,
        "write_resume_point": args.write_resume_point,
        "resume_from": args.resume_from,
    }
    extra = sorted(
        name
        for name, value in given.items()
        if value not in (None, [], False) and name not in (flag, *allowed)
    )
    if extra or len(changes) > 1:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in extra) or "a config flag"
        raise CLIError(f"--{flag.replace('_', '-')} {what} and takes only --out, not {flags}")


def export(args: argparse.Namespace) -> int:
    from ebmtrack.training.runs import export_checkpoint

    _only_out(args, "export", "writes a run's checkpoint", ())
    try:
        epoch = export_checkpoint(args.out, args.export)
    except (ValueError, FileNotFoundError) as err:
        raise CLIError(f"--export: {err}") from None
    print(f"wrote {args.export} (the model of epoch {epoch} of {args.out})")
    return 0


def write_resume_point(args: argparse.Namespace) -> int:
    from ebmtrack.training.resume_point import write_resume_point
    from ebmtrack.weights.packed import stored_files

    _only_out(args, "write_resume_point", "writes a run's resume point", ())
    try:
        checkpoint = write_resume_point(args.out, args.write_resume_point)
    except (ValueError, FileNotFoundError) as err:
        raise CLIError(f"--write-resume-point: {err}") from None
    point = args.write_resume_point
    files = stored_files(point)
    size = sum(f.stat().st_size for f in files) / 1e6
    stored = "" if files == [point] else f" in {len(files)} parts {point.name}.part1, ..."
    print(
        f"wrote {point} ({size:.1f} MB{stored}: epoch {checkpoint.epoch}, step "
        f"{checkpoint.global_step} of {args.out}); continue with: ebmtrack train --out DIR "
        f"--resume-from {args.write_resume_point}"
    )
    return 0


def restore(args: argparse.Namespace) -> None:
    """Restore ``--resume-from`` into ``--out``; the run then resumes from it."""
    from ebmtrack.training.resume_point import restore_resume_point

    _only_out(args, "resume_from", "continues a run", ("resume",))
    try:
        checkpoint = restore_resume_point(args.resume_from, args.out)
    except (ValueError, FileNotFoundError) as err:
        raise CLIError(f"--resume-from: {err}") from None
    print(f"restored epoch {checkpoint.epoch} (step {checkpoint.global_step}) into {args.out}")
    args.resume = True


def run(args: argparse.Namespace) -> int:
    from ebmtrack.training import NonFiniteLossError
    from ebmtrack.training.distributed import init_distributed, shutdown_distributed
    from ebmtrack.training.experiment import run_experiment

    if args.export is not None:
        return export(args)
    if args.write_resume_point is not None:
        return write_resume_point(args)
    check_output_folder(args.out)
    if args.resume_from is not None:
        restore(args)
    config = build_config(args)
    check_inputs(config, args)
    with threads(args.threads):
        context = init_distributed(config.trainer.device)
        try:
            results = run_experiment(config, args.out, resume=args.resume, context=context)
        except NonFiniteLossError as err:
            raise CLIError(str(err)) from None
        except Exception as err:
            if _write_failed(err):
                raise CLIError(f"cannot write the run to {args.out}: {err}") from None
            raise
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
        print(f"wrote {args.out / config.model_file}")
    return 0
