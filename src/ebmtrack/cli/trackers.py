"""The tracker options of ``track`` and ``demo`` (and ``--peer-models`` of ``eval``): one flag per
setting, checked here so that errors name the flag, not the Python argument behind it."""

from __future__ import annotations

import argparse
from pathlib import Path

from ebmtrack.cli.main import CLIError, resolve_device
from ebmtrack.cli.options import add_option, parse_option

# Trackers with a backbone of ours: the registry's own (a test keeps the two lists equal).
OURS = ("atom", "atom-iounet", "atom-gated", "atom-polished", "atom-lt", "dimp-nce+")
WITH_BOX_HEAD = ("atom-iounet", "atom-gated", "atom-polished", "dimp-nce+")
PEER_MODEL_TRACKERS = ("nanotrack", "vit")  # OpenCV's DNN trackers, from ONNX files
NANOTRACK_BACKBONE_FILE = "nanotrack_backbone_sim.onnx"

PEER_MODELS_HELP = (
    "folder holding the ONNX files of OpenCV's nanotrack and vit trackers "
    "(nanotrack_backbone_sim.onnx, nanotrack_head_sim.onnx, vitTracker.onnx)"
)


def add_peer_models_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--peer-models", type=Path, metavar="DIR", help=PEER_MODELS_HELP)


def add_tracker_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tracker``, ``--weights``, ``--backbone``, ``--backbone-weights``, ``--peer-models``."""
    parser.add_argument(
        "--tracker",
        default="atom",
        help=f"registered tracker name (default atom): {', '.join(OURS)}, or OpenCV's "
        "csrt, kcf, mil, mosse, medianflow, tld, boosting, nanotrack, vit",
    )
    parser.add_argument(
        "--weights",
        type=Path,
        metavar="FILE",
        help=f"box-head weights (.safetensors) of {', '.join(WITH_BOX_HEAD[:-1])} (an IoU-Net) "
        "or dimp-nce+ (option weights)",
    )
    parser.add_argument(
        "--backbone",
        help=f"backbone of {', '.join(OURS)} (option backbone; default "
        "mobilenetv2; also efficientnet-lite0, resnet18, resnet50, nanotrack)",
    )
    parser.add_argument(
        "--backbone-weights",
        type=Path,
        metavar="FILE",
        help="the backbone's weights: a torchvision checkpoint (.pth or .safetensors) for "
        "resnet18 / resnet50, which ship none; NanoTrack's nanotrack_backbone_sim.onnx for "
        "nanotrack (default: that file in --peer-models); for the others their shipped "
        "ImageNet weights",
    )
    add_peer_models_argument(parser)


def peer_models_check(tracker: str, peer_models: Path | None) -> None:
    """A DNN peer tracker without ``--peer-models``: one line naming the flag and the files."""
    from ebmtrack.tracking.opencv import MODEL_FILES

    files = ", ".join(name for name, _ in MODEL_FILES[tracker].values())
    if peer_models is None:
        raise CLIError(f"--tracker {tracker} needs --peer-models DIR, the folder holding {files}")
    if not peer_models.is_dir():
        raise CLIError(f"--peer-models {peer_models}: not a folder")


def _backbone_weights(backbone: str, args: argparse.Namespace) -> Path | None:
    """The backbone file to load when ``--backbone-weights`` is not given, or None for the
    shipped ImageNet weights."""
    from ebmtrack.models.backbones import backbone_names
    from ebmtrack.models.backbones.registry import FILE_BACKBONES, PACKAGED_WEIGHTS

    if backbone not in backbone_names():
        return None  # the tracker refuses it, naming the valid ones
    if backbone in FILE_BACKBONES:
        if args.peer_models is not None and (args.peer_models / NANOTRACK_BACKBONE_FILE).is_file():
            return args.peer_models / NANOTRACK_BACKBONE_FILE
        raise CLIError(
            f"--backbone {backbone} needs --backbone-weights FILE (NanoTrack v2's "
            f"{NANOTRACK_BACKBONE_FILE}) or --peer-models DIR holding it"
        )
    if backbone not in PACKAGED_WEIGHTS:
        raise CLIError(
            f"--backbone {backbone} needs --backbone-weights FILE: no ImageNet weights ship for "
            f"it (e.g. torchvision's {backbone}-*.pth, or a .safetensors copy)"
        )
    return None


def tracker_settings(args: argparse.Namespace) -> tuple[str, dict]:
    """``(name, options)`` for :func:`ebmtrack.api.load_tracker` from the parsed flags.

    The tracker flags (``--backbone``, ``--weights``, ``--device``, ...) and every ``--option
    KEY=VALUE`` are options of whichever tracker is named; the registry refuses those it does not
    take, with the same message as ``load_tracker``. Refused here (CLIError naming the flag): a
    setting that cannot work (a DNN peer without its files, a backbone without weights, a
    missing weights file) and ``--peer-models`` for a tracker that reads no model files.
    """
    name = args.tracker
    device = getattr(args, "device", None)
    flags = {
        "backbone": args.backbone,
        "weights": args.weights,
        "backbone_weights": args.backbone_weights,
        "device": None if device is None else resolve_device(device),
        "search_size": getattr(args, "search_size", None),
        "backbone_runtime": "onnx" if getattr(args, "onnx", False) else None,
    }
    options = {key: value for key, value in flags.items() if value is not None}
    for item in getattr(args, "option", None) or []:
        add_option(options, *parse_option(item), f"--option {item!r}")
    if name in PEER_MODEL_TRACKERS:
        if "model_dir" not in options:
            peer_models_check(name, args.peer_models)
            options["model_dir"] = args.peer_models
        return name, options
    if name not in OURS:
        if args.peer_models is not None:
            raise CLIError(f"--peer-models: not used by --tracker {name}")
        return name, options
    if options.get("device") == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise CLIError("--device cuda: CUDA is not available")
    if args.backbone_weights is not None and not args.backbone_weights.is_file():
        raise CLIError(f"--backbone-weights {args.backbone_weights}: file not found")
    backbone = options.get("backbone", "mobilenetv2")
    if isinstance(backbone, str) and "backbone_weights" not in options:
        backbone_weights = _backbone_weights(backbone, args)
        if backbone_weights is not None:
            options["backbone_weights"] = backbone_weights
    if args.weights is not None and not args.weights.is_file():
        raise CLIError(f"--weights {args.weights}: file not found")
    return name, options
