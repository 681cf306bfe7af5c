"""The tracker options of ``track`` and ``demo`` (and ``--peer-models`` of ``eval``): one flag per
setting, checked here so that errors name the flag, not the Python argument behind it."""

from __future__ import annotations

import argparse
from pathlib import Path

from ebmtrack.cli.main import CLIError, resolve_device

OURS = ("atom", "dimp-nce+")  # trackers with a backbone and a box head of ours
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
        help="tracker name (default atom): atom, dimp-nce+, or OpenCV's csrt, kcf, mil, mosse, "
        "medianflow, tld, boosting, nanotrack, vit",
    )
    parser.add_argument(
        "--weights",
        type=Path,
        metavar="FILE",
        help="box-head weights (.safetensors) of atom (an IoU-Net) or dimp-nce+",
    )
    parser.add_argument(
        "--backbone",
        help="backbone of atom and dimp-nce+ (default mobilenetv2; also efficientnet-lite0, "
        "resnet18, resnet50, nanotrack)",
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
    """The backbone file to load, or None for the shipped ImageNet weights."""
    from ebmtrack.models.backbones import backbone_names
    from ebmtrack.models.backbones.registry import FILE_BACKBONES, PACKAGED_WEIGHTS

    if backbone not in backbone_names():
        raise CLIError(f"--backbone: unknown backbone {backbone!r}; valid: {backbone_names()}")
    given = args.backbone_weights
    if given is not None:
        if not given.is_file():
            raise CLIError(f"--backbone-weights {given}: file not found")
        return given
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

    Refuses (CLIError naming the flag) a flag the tracker does not take, and a setting that
    cannot work (a DNN peer without its files, a backbone without weights).
    """
    name = args.tracker
    search_size = getattr(args, "search_size", None)
    onnx = getattr(args, "onnx", False)
    device = resolve_device(getattr(args, "device", "cpu") or "cpu")
    if name not in OURS:
        given = [
            flag
            for flag, value in (
                ("--weights", args.weights),
                ("--backbone", args.backbone),
                ("--backbone-weights", args.backbone_weights),
                ("--search-size", search_size),
                ("--onnx", onnx),
            )
            if value
        ]
        if device != "cpu":
            given.append("--device")
        if name not in PEER_MODEL_TRACKERS and args.peer_models is not None:
            given.append("--peer-models")
        if given:
            raise CLIError(f"{', '.join(given)}: not used by --tracker {name}")
        if name in PEER_MODEL_TRACKERS:
            peer_models_check(name, args.peer_models)
            return name, {"model_dir": args.peer_models}
        return name, {}
    backbone = args.backbone or "mobilenetv2"
    options: dict = {"backbone": backbone, "weights": args.weights, "device": device}
    backbone_weights = _backbone_weights(backbone, args)
    if backbone_weights is not None:
        options["backbone_weights"] = backbone_weights
    if args.weights is not None and not args.weights.is_file():
        raise CLIError(f"--weights {args.weights}: file not found")
    if search_size is not None:
        if search_size < 64 or search_size % 16:
            raise CLIError(f"--search-size must be a multiple of 16, >= 64; got {search_size}")
        options["search_size"] = search_size
    if onnx:
        options["backbone_runtime"] = "onnx"
    return name, options
