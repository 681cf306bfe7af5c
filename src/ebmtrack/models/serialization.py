"""Saving and loading heads as one safetensors file with their JSON config in its header.

The header metadata holds ``format`` (``ebmtrack-model``), ``model`` (the class name) and
``config`` (the config dataclass as JSON: backbone name, feature layers, widths). Loading rebuilds
the model from the config and checks that the tensors match it name by name and shape by shape,
so a file made for another backbone or width fails with a message naming the first bad key. No
pickle is involved at any point.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file
from torch import nn

from ebmtrack.models.atom_classifier import AtomClassifier, ClassifierConfig
from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig

__all__ = ["load_model", "read_model_config", "save_model"]

FORMAT = "ebmtrack-model"

# class name -> (class, config dataclass); every model takes its config as first argument.
MODELS: dict[str, tuple[type[nn.Module], type]] = {
    "AtomIoUNet": (AtomIoUNet, IoUNetConfig),
    "AtomClassifier": (AtomClassifier, ClassifierConfig),
    "DiMPClassifier": (DiMPClassifier, DiMPConfig),
}


def save_model(model: nn.Module, path: str | Path) -> Path:
    """Write ``model``'s state dict and config to ``path`` (.safetensors); returns the path."""
    name = type(model).__name__
    if name not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {name}")
    config = json.dumps(dataclasses.asdict(model.config))
    state = {key: value.detach().contiguous().cpu() for key, value in model.state_dict().items()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path), metadata={"format": FORMAT, "model": name, "config": config})
    return path


def read_model_config(path: str | Path) -> tuple[str, object]:
    """The (class name, config dataclass) stored in a file written by :func:`save_model`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"{path} is not a safetensors file: {err}") from None
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
    model.load_state_dict(state)
    return model.eval()
