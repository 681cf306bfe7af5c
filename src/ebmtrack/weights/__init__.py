"""Weights shipped inside the package: the trackers' box heads, DiMP's classifier, MobileNetV2's
ImageNet features, the activation ranges of its int8 model and the confidence calibrators. One
table, :data:`~ebmtrack.weights.table.SHIPPED`, names them by (role, backbone, tag), and
:func:`~ebmtrack.weights.table.shipped_file` looks one up (see ``README.md`` in this folder for
how they were made, checksums and licences). The functions below are that lookup for one role
each, None where nothing ships."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ebmtrack.weights.table import (
    DEFAULT_TAG,
    FOLDER,
    SHIPPED,
    ShippedFile,
    find_shipped,
    shipped_file,
)

__all__ = [
    "DEFAULT_TAG",
    "SHIPPED",
    "DefaultModel",
    "ShippedFile",
    "confidence_calibrators",
    "default_model",
    "dimp_classifier",
    "find_shipped",
    "int8_ranges",
    "pack_box_head",
    "shipped_backbone_weights",
    "shipped_file",
    "siamese_networks",
]

RECORD_FILE = "default_model.json"


@dataclass(frozen=True)
class DefaultModel:
    """The shipped default model.

    Attributes:
        box_head: the box head's file, an IoU-Net (:func:`ebmtrack.models.serialization.
            load_model`); ``iou_net``, its old name, is refused naming this one.
        backbone: its backbone's name.
        backbone_weights: the backbone's ImageNet weights (safetensors, feature layers).
        tracker_params: :class:`~ebmtrack.tracking.atom.params.AtomParams` values the head was
            evaluated with (its box-refinement step length and steps).
        record: the whole JSON record (loss, data, numbers, sha256 of every file).
    """

    box_head: Path
    backbone: str
    backbone_weights: Path
    tracker_params: dict
    record: dict

    @property
    def iou_net(self):
        raise AttributeError("DefaultModel.iou_net was renamed DefaultModel.box_head")


def default_model() -> DefaultModel | None:
    """The shipped model, or None if this installation has none."""
    path = FOLDER / RECORD_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    return DefaultModel(
        box_head=FOLDER / record["iou_net"],
        backbone=record["backbone"],
        backbone_weights=FOLDER / record["backbone_weights"],
        tracker_params=dict(record["tracker_params"]),
        record=record,
    )


def _path(role: str, backbone: str, tag: str = DEFAULT_TAG) -> Path | None:
    entry = find_shipped(role, backbone, tag)
    return entry.path if entry is not None else None


def shipped_backbone_weights(backbone: str) -> tuple[Path, str] | None:
    """(path, sha256) of the ImageNet weights shipped for ``backbone``, or None if none ship."""
    entry = find_shipped("backbone", backbone)
    return (entry.path, entry.sha256) if entry is not None and entry.sha256 else None


def dimp_classifier(backbone: str = "mobilenetv2") -> Path | None:
    """DiMP's target classifier trained offline for ``backbone`` (``ebmtrack train --preset
    dimp-pack-cpu``; a ``DiMPClassifier`` file for :func:`ebmtrack.models.serialization.
    load_model`), or None if none ships for it."""
    return _path("dimp-classifier", backbone)


def int8_ranges(backbone: str = "mobilenetv2") -> Path | None:
    """The activation ranges of the int8 backbone ``backbone`` (``backbone_runtime="onnx-int8"``;
    read by :func:`ebmtrack.models.backbones.int8.load_ranges`), or None if none ship."""
    return _path("int8-ranges", backbone)


def pack_box_head(backbone: str = "mobilenetv2") -> Path | None:
    """The IoU-Net trained with NCE+ on the training pack (``ebmtrack train --preset pack-cpu
    --loss nce+``) that ships for ``backbone`` (the box head of ``atom-polished`` and
    ``dimp-nce+``; tag ``pack``), or None if none ships for it."""
    return _path("box-head", backbone, "pack")


def siamese_networks(model: str) -> tuple[Path, Path]:
    """The paths of NanoTrack ``model``'s shipped backbone and neck + head (``siamese_model``:
    ``v2``, ``v3``; tagged so in the table), each sha256 checked (ValueError, one line, where
    one differs or none ships)."""
    backbone = shipped_file("siamese-backbone", "nanotrack", model)
    head = shipped_file("siamese-head", "nanotrack", model)
    return backbone.checked_path(), head.checked_path()


_CALIBRATOR = next(e for e in SHIPPED if e.role == "calibrator")
CONFIDENCE_CALIBRATORS = _CALIBRATOR.file
CONFIDENCE_SHA256 = _CALIBRATOR.sha256
"""sha256 of the shipped calibrator file (``python studies/confidence.py fit`` prints it;
the table holds it); the file is refused when it differs."""


def confidence_calibrators(backbone: str = "mobilenetv2") -> tuple[Path, str] | None:
    """(path, sha256) of the shipped confidence calibrators of the trackers on ``backbone``
    (:func:`ebmtrack.tracking.calibrator.load_calibrators`), or None if none ship."""
    entry = find_shipped("calibrator", backbone)
    return (entry.path, entry.sha256) if entry is not None else None
