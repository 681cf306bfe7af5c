"""Weights shipped inside the package: the default tracker's IoU-Net, MobileNetV2's ImageNet
features and the activation ranges of its int8 model (see ``README.md`` in this folder for how
they were made, checksums and licences)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ebmtrack.weights.packed import packed_exists

__all__ = [
    "DefaultModel",
    "confidence_calibrators",
    "default_model",
    "dimp_classifier",
    "int8_ranges",
    "nce_box_head",
    "pack_box_head",
    "shipped_backbone_weights",
]

FOLDER = Path(__file__).resolve().parent
RECORD_FILE = "default_model.json"
NCE_BOX_HEAD = "iou_net_nce_mobilenetv2.safetensors"
DIMP_CLASSIFIER = "dimp_classifier_mobilenetv2.safetensors"
PACK_BOX_HEAD = "iou_net_pack_mobilenetv2.safetensors"
INT8_RANGES = "int8_ranges.json"


@dataclass(frozen=True)
class DefaultModel:
    """The shipped default model.

    Attributes:
        iou_net: the IoU-Net file (:func:`ebmtrack.models.serialization.load_model`).
        backbone: its backbone's name.
        backbone_weights: the backbone's ImageNet weights (safetensors, feature layers).
        tracker_params: :class:`~ebmtrack.tracking.atom.params.AtomParams` values the head was
            evaluated with (its box-refinement step length and steps).
        record: the whole JSON record (loss, data, numbers, sha256 of every file).
    """

    iou_net: Path
    backbone: str
    backbone_weights: Path
    tracker_params: dict
    record: dict


def default_model() -> DefaultModel | None:
    """The shipped model, or None if this installation has none."""
    path = FOLDER / RECORD_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    return DefaultModel(
        iou_net=FOLDER / record["iou_net"],
        backbone=record["backbone"],
        backbone_weights=FOLDER / record["backbone_weights"],
        tracker_params=dict(record["tracker_params"]),
        record=record,
    )


def shipped_backbone_weights(backbone: str) -> tuple[Path, str] | None:
    """(path, sha256) of the ImageNet weights shipped for ``backbone``, or None if none ship."""
    model = default_model()
    if model is None or model.backbone != backbone or not packed_exists(model.backbone_weights):
        return None
    digests = {entry["file"]: entry["sha256"] for entry in model.record.get("files", [])}
    sha256 = digests.get(model.backbone_weights.name)
    return (model.backbone_weights, sha256) if sha256 else None


def nce_box_head(backbone: str = "mobilenetv2") -> Path | None:
    """The IoU-Net trained with NCE+ that ships for ``backbone`` (the box head of the
    ``dimp-nce+`` tracker), or None if none ships for it."""
    path = FOLDER / NCE_BOX_HEAD
    return path if backbone == "mobilenetv2" and path.is_file() else None


def dimp_classifier(backbone: str = "mobilenetv2") -> Path | None:
    """DiMP's target classifier trained offline for ``backbone`` (``ebmtrack train --preset
    dimp-cpu``; a ``DiMPClassifier`` file for :func:`ebmtrack.models.serialization.load_model`),
    or None if none ships for it."""
    path = FOLDER / DIMP_CLASSIFIER
    return path if backbone == "mobilenetv2" and path.is_file() else None


def int8_ranges() -> Path | None:
    """The activation ranges of the int8 backbones (``backbone_runtime="onnx-int8"``; read by
    :func:`ebmtrack.models.backbones.int8.load_ranges`), or None if this installation has none."""
    path = FOLDER / INT8_RANGES
    return path if path.is_file() else None


def pack_box_head(backbone: str = "mobilenetv2") -> Path | None:
    """The IoU-Net trained with NCE+ on the training pack (``ebmtrack train --preset pack-cpu
    --loss nce+``) that ships for ``backbone`` (the box head of the ``atom-gated`` and
    ``atom-polished`` trackers), or None if none ships for it."""
    path = FOLDER / PACK_BOX_HEAD
    return path if backbone == "mobilenetv2" and path.is_file() else None


CONFIDENCE_CALIBRATORS = "confidence_mobilenetv2.json"
CONFIDENCE_SHA256 = "b8ea106284741049b9de853df5f6e0560224b0972706e534140e3abbeca7a8fe"
"""sha256 of the shipped calibrator file (``python studies/confidence.py fit`` prints
it); the file is refused when it differs."""


def confidence_calibrators() -> tuple[Path, str] | None:
    """(path, sha256) of the shipped confidence calibrators of the MobileNetV2 trackers
    (:func:`ebmtrack.tracking.calibrator.load_calibrators`), or None if none ship."""
    path = FOLDER / CONFIDENCE_CALIBRATORS
    return (path, CONFIDENCE_SHA256) if path.is_file() else None
