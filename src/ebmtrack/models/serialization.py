"""Saving and loading heads as one safetensors file with their JSON config in its header.

The header metadata holds ``format`` (``ebmtrack-model``), ``model`` (the class name) and
``config`` (the config dataclass as JSON: backbone name, feature layers, widths). Loading rebuilds
the model from the config and checks that the tensors match it name by name and shape by shape,
so a file made for another backbone or width fails with a message naming the first bad key. No
pickle is involved at any point.

A head is trained on one backbone's features, so the header also records its provenance
(:data:`PROVENANCE`): ``backbone_weights``, the key of the backbone weights the features came
from (:func:`~ebmtrack.models.backbones.onnx_files.weights_key`, a short sha256),
``backbone_weights_from`` (where those weights came from, e.g. ``random initialisation
(pretrained: false)``), ``trained_on`` (the precision and runtime of the training) and, for a
box head, ``loss``, the loss that trained it (``mse``: it predicts IoU; an EBM loss such as
``nce+``: it scores an energy f(x, y)), which says how a tracker may climb it
(:func:`head_loss`). :func:`check_backbone` refuses a head whose backbone weights are not the
tracker's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save
from torch import nn

from ebmtrack.models.atom_classifier import AtomClassifier, ClassifierConfig
from ebmtrack.models.backbones.onnx_files import weights_key
from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig

__all__ = [
    "PROVENANCE",
    "canonical_bytes",
    "check_backbone",
    "head_loss",
    "load_model",
    "read_model_config",
    "read_provenance",
    "save_model",
    "trained_features",
]

logger = logging.getLogger(__name__)

FORMAT = "ebmtrack-model"
PROVENANCE = ("backbone_weights", "backbone_weights_from", "trained_on", "loss")
"""The header entries that say what a head was trained on (see the module's docstring)."""

# class name -> (class, config dataclass); every model takes its config as first argument.
MODELS: dict[str, tuple[type[nn.Module], type]] = {
    "AtomIoUNet": (AtomIoUNet, IoUNetConfig),
    "AtomClassifier": (AtomClassifier, ClassifierConfig),
    "DiMPClassifier": (DiMPClassifier, DiMPConfig),
}


def save_model(
    model: nn.Module,
    path: str | Path,
    provenance: Mapping[str, str] | None = None,
    dtype: torch.dtype | None = None,
) -> Path:
    """Write ``model``'s state dict and config to ``path`` (.safetensors); returns the path.

    ``provenance``: the header entries of :data:`PROVENANCE` (what training writes, from
    :func:`backbone_provenance`). ``dtype``: store the floating-point tensors in it (e.g.
    ``torch.float16``, half the bytes; :func:`load_model` builds the model in float32 from
    either)."""
    name = type(model).__name__
    if name not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {name}")
    provenance = dict(provenance or {})
    unknown = sorted(set(provenance) - set(PROVENANCE))
    if unknown:
        raise ValueError(f"unknown provenance entries {unknown}; valid: {list(PROVENANCE)}")
    config = json.dumps(dataclasses.asdict(model.config))
    state = {key: value.detach().contiguous().cpu() for key, value in model.state_dict().items()}
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"format": FORMAT, "model": name, "config": config}
    metadata.update((key, str(value)) for key, value in provenance.items())
    path.write_bytes(canonical_bytes(save(state, metadata=metadata)))
    return path


def canonical_bytes(data: bytes) -> bytes:
    """A safetensors file's bytes with its JSON header's keys sorted (safetensors writes the
    metadata in hash order, which changes between calls), so that the same model and metadata
    always give the same file and sha256. The tensors' offsets are relative to the data that
    follows the header, so only the header changes; it is padded to 8 bytes as safetensors pads
    it."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + size :]


def backbone_provenance(backbone: nn.Module, weights_from: str, trained_on: str) -> dict:
    """The :data:`PROVENANCE` entries of a head trained on ``backbone``'s features."""
    return {
        "backbone_weights": weights_key(backbone),
        "backbone_weights_from": weights_from,
        "trained_on": trained_on,
    }


def _metadata(path: Path) -> dict[str, str]:
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as handle:
            return handle.metadata() or {}
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"{path} is not a safetensors file: {err}") from None


def read_provenance(path: str | Path) -> dict[str, str]:
    """The :data:`PROVENANCE` entries a file's header holds (none in files written before they
    were recorded)."""
    metadata = _metadata(Path(path))
    return {key: metadata[key] for key in PROVENANCE if key in metadata}


def head_loss(path: str | Path) -> str | None:
    """The loss that trained the box head at ``path`` (``mse``, ``nce+``, ...): its header's
    ``loss``; for a file written before heads recorded it, the shipped table's entry of a
    shipped file with the same bytes (:data:`ebmtrack.weights.SHIPPED`); None when neither
    says."""
    import hashlib

    from ebmtrack.weights.table import SHIPPED

    recorded = read_provenance(path).get("loss")
    if recorded:
        return recorded
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return next((e.loss for e in SHIPPED if e.sha256 == digest and e.loss), None)


def trained_features(path: str | Path) -> str:
    """The backbone runtime whose features the head at ``path`` was trained on, from its header's
    ``trained_on``: ``onnx-int8`` (streamed by the data workers of ``feature_stream``) or
    ``float32`` (eager float32, also for a file that records none)."""
    trained_on = read_provenance(path).get("trained_on", "")
    return "onnx-int8" if "backbone onnx-int8" in trained_on else "float32"


def check_backbone(
    path: str | Path, backbone: nn.Module, what: str, backbone_weights: str | Path | None = None
) -> None:
    """Refuse (ValueError, one line naming both) the head at ``path`` when the backbone weights
    it was trained on are not ``backbone``'s (``backbone_weights``: the file those were read
    from, None for the shipped ImageNet weights; for the message). A file that records none is
    loaded with one warning."""
    recorded = read_provenance(path)
    trained = recorded.get("backbone_weights")
    name = getattr(backbone, "name", type(backbone).__name__)
    if trained is None:
        logger.warning(
            "%s records no backbone weights (written before ebmtrack recorded them): not "
            "checked against the tracker's %s weights",
            path,
            name,
        )
        return
    mine = weights_key(backbone)
    if trained != mine:
        tracker_weights = backbone_weights or "the shipped ImageNet weights"
        origin = recorded.get("backbone_weights_from", "origin not recorded")
        raise ValueError(
            f"{path}: this {what} was trained on {name} weights {trained} ({origin}), the "
            f"tracker's backbone is {name} weights {mine} ({tracker_weights}); give a head "
            "trained on the tracker's backbone weights, or those weights (--backbone-weights)"
        )


def read_model_config(path: str | Path) -> tuple[str, object]:
    """The (class name, config dataclass) stored in a file written by :func:`save_model`."""
    path = Path(path)
    metadata = _metadata(path)
    if metadata.get("format") != FORMAT or metadata.get("model") not in MODELS:
        raise ValueError(
            f"{path} is not an ebmtrack model file (header format={metadata.get('format')!r}, "
            f"model={metadata.get('model')!r}; valid models: {sorted(MODELS)})"
        )
    name = metadata["model"]
    config_type = MODELS[name][1]
    try:
        fields = json.loads(metadata.get("config", ""))
        config = config_type(**fields)
    except (json.JSONDecodeError, TypeError) as err:
        raise ValueError(f"{path}: bad {name} config in the header: {err}") from None
    return name, config


def load_model(path: str | Path, expected: str | None = None) -> nn.Module:
    """Rebuild the model saved at ``path`` (in eval mode, on the CPU).

    Args:
        path: a file written by :func:`save_model`.
        expected: if given, the class name the file must hold.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not an ebmtrack model file, another model than ``expected``, or tensors that
            do not match the config (the message names the missing, unexpected or mismatched key).
    """
    name, config = read_model_config(path)
    if expected is not None and name != expected:
        raise ValueError(f"{path} holds a {name}, expected a {expected}")
    model = MODELS[name][0](config)
    state = load_file(str(path))
    reference = model.state_dict()
    missing = sorted(set(reference) - set(state))
    unexpected = sorted(set(state) - set(reference))
    if missing:
        raise ValueError(f"{path}: missing tensor {missing[0]!r} ({len(missing)} missing in all)")
    if unexpected:
        raise ValueError(f"{path}: unexpected tensor {unexpected[0]!r} ({len(unexpected)} in all)")
    for key, value in reference.items():
        if state[key].shape != value.shape:
            raise ValueError(
                f"{path}: tensor {key!r} has shape {tuple(state[key].shape)}, the config needs "
                f"{tuple(value.shape)}"
            )
        if state[key].is_floating_point() != value.is_floating_point():
            raise ValueError(f"{path}: tensor {key!r} has dtype {state[key].dtype}")
    model.load_state_dict(state)
    return model.eval()
