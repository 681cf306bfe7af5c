"""Where exported ONNX backbones are kept and the key that names them: the two facts the ONNX
runtime (:mod:`~ebmtrack.models.backbones.onnx_runtime`) and the int8 files
(:mod:`~ebmtrack.models.backbones.int8`) share."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
from torch import nn

__all__ = ["default_cache_dir", "state_dict_sha256", "weights_key"]


def default_cache_dir() -> Path:
    """Where exported ONNX files are kept: ``$XDG_CACHE_HOME/ebmtrack/onnx`` when that variable
    holds an absolute path (the XDG base-directory rule), else ``~/.cache/ebmtrack/onnx``."""
    root = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(root) if os.path.isabs(root) else Path("~/.cache").expanduser()
    return base / "ebmtrack" / "onnx"


def state_dict_sha256(module: nn.Module, skip: tuple[str, ...] = ()) -> str:
    """Hex sha256 of a module's state dict (names, dtypes, shapes and values), leaving out the
    keys that start with one of ``skip``."""
    digest = hashlib.sha256()
    for key, value in module.state_dict().items():
        if key.startswith(skip):
            continue
        tensor = value.detach().cpu().contiguous()
        digest.update(f"{key}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def weights_key(backbone: nn.Module) -> str:
    """The short sha256 (16 hex digits) that names a backbone's weights: of its state dict
    without the ImageNet head (``classifier_prefixes``). The ONNX files, the int8 ranges and
    the heads' provenance (:mod:`ebmtrack.models.serialization`) are keyed by it."""
    return state_dict_sha256(backbone, skip=getattr(backbone, "classifier_prefixes", ()))[:16]
