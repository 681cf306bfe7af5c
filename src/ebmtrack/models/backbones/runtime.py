"""Which runtime runs a tracker's backbone, and in which precision: chosen once, here.

A tracker asks :func:`select_runtime` with its ``precision`` and ``backbone_runtime`` parameters
and gets a :class:`BackboneRuntime`; :func:`feature_extractor` builds the per-frame feature
call for it. Thread counts and the allocator are process settings (:mod:`ebmtrack.process`).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.backbones.inference import optimize_for_inference
from ebmtrack.models.backbones.int8 import find_ranges, quantizer_available
from ebmtrack.models.backbones.onnx_files import default_cache_dir, state_dict_sha256
from ebmtrack.models.backbones.onnx_runtime import OnnxBackbone
from ebmtrack.models.precision import resolve_precision
from ebmtrack.values import OptionError

__all__ = [
    "BACKBONE_RUNTIMES",
    "BackboneRuntime",
    "check_backbone_runtime",
    "feature_extractor",
    "int8_available",
    "onnx_installed",
    "select_runtime",
]

BACKBONE_RUNTIMES = ("auto", "torch", "onnx", "onnx-int8")


@dataclass(frozen=True)
class BackboneRuntime:
    """A resolved backbone runtime: ``name`` ``torch`` (eager PyTorch), ``onnx`` (ONNX Runtime,
    float32) or ``onnx-int8``; ``dtype`` the eager backbone's and the tracker's matrix products'
    (float32 on ONNX Runtime)."""

    name: str
    dtype: torch.dtype = torch.float32


def onnx_installed() -> bool:
    """Whether ONNX Runtime and ``onnx`` (the exporter's) are installed."""
    return all(importlib.util.find_spec(name) for name in ("onnxruntime", "onnx"))


def int8_available(backbone: Backbone, cache_dir: str | Path | None = None) -> bool:
    """Whether ``backbone`` can run in int8 here: ranges ship for its weights (its feature
    layers' hash) and the installed ONNX Runtime can build the model from them, or built it
    already (an int8 file from these ranges is in ``cache_dir``, default the ONNX cache
    folder; asking the quantizer otherwise imports ``onnx``, 0.7 s of a tracker's start-up)."""
    weights_key = state_dict_sha256(backbone, skip=backbone.classifier_prefixes)[:16]
    ranges = find_ranges(backbone.name, weights_key)
    if ranges is None:
        return False
    folder = Path(cache_dir if cache_dir is not None else default_cache_dir()).expanduser()
    if any(folder.glob(f"{backbone.name}-{weights_key}-*-int8-{ranges.digest}.onnx")):
        return True
    return quantizer_available()


def check_backbone_runtime(runtime: str, device: torch.device | str) -> None:
    """Raise :class:`~ebmtrack.values.OptionError` for an unknown ``backbone_runtime`` and for an
    ONNX one off the CPU."""
    if runtime not in BACKBONE_RUNTIMES:
        raise OptionError(
            f"backbone_runtime must be one of {', '.join(BACKBONE_RUNTIMES)}, got {runtime!r}",
            "backbone_runtime",
        )
    if runtime in ("onnx", "onnx-int8") and torch.device(device).type != "cpu":
        raise OptionError(
            f"backbone_runtime={runtime!r} runs on the CPU, not {device}: use device='cpu'",
            "backbone_runtime",
            "device",
        )


def select_runtime(
    precision: str,
    runtime: str,
    device: torch.device | str,
    int8: bool | Callable[[], bool] = False,
) -> BackboneRuntime:
    """The runtime for a tracker's ``precision`` and ``backbone_runtime`` parameters.

    ``precision``: ``float32``, ``bfloat16`` or ``auto``: float32 where the backbone runs in
    int8 (below), else bfloat16 exactly on CPUs with native bfloat16 instructions
    (:func:`~ebmtrack.models.precision.fast_dtype`). On such a CPU the int8 backbone with float32
    products ran the default tracker at 31.7 FPS against 23.1 for eager bfloat16, at the same
    accuracy (docs/results/speed.md), so ``auto`` is the fastest path on every CPU.

    ``runtime`` ``auto``: ONNX Runtime where it is installed, on the CPU in float32, else eager
    PyTorch (on a GPU, and in bfloat16, which ONNX Runtime's CPU kernels do not run). In ONNX
    Runtime the backbone runs in int8 (``onnx-int8``, :mod:`ebmtrack.models.backbones.int8`)
    where ``int8`` says it may (a bool, or a function called only then: the caller knows
    whether its backbone's features may be int8, e.g. :func:`int8_available` for the
    classifier alone), else in float32 (``onnx``): int8 ran the default tracker's frame
    1.33-1.44x cheaper than float32 in ONNX Runtime (itself 1.7x cheaper than eager PyTorch),
    at the same accuracy (docs/results/speed.md).

    Raises ValueError for an unknown precision or runtime (:func:`check_backbone_runtime`: an
    ONNX runtime off the CPU too) and for ``onnx-int8`` in bfloat16.
    """
    check_backbone_runtime(runtime, device)
    on_cpu = torch.device(device).type == "cpu"
    may_int8 = functools.cache(int8) if callable(int8) else lambda: int8  # asked once at most
    if precision == "auto" and on_cpu and runtime in ("auto", "onnx-int8"):
        if runtime == "onnx-int8" or (onnx_installed() and may_int8()):
            return BackboneRuntime("onnx-int8", torch.float32)
    dtype = resolve_precision(precision, device)
    if runtime == "onnx-int8":
        if dtype != torch.float32:
            raise OptionError(
                f"backbone_runtime='onnx-int8' replaces the float32 backbone; the precision "
                f"here is {str(dtype).replace('torch.', '')}: pass precision='float32', or use "
                "another backbone_runtime",
                "backbone_runtime",
                "precision",
            )
        return BackboneRuntime(runtime, dtype)
    if runtime != "auto":
        return BackboneRuntime(runtime, dtype)
    if not (on_cpu and dtype == torch.float32 and onnx_installed()):
        return BackboneRuntime("torch", dtype)
    return BackboneRuntime("onnx-int8" if may_int8() else "onnx", dtype)


def feature_extractor(
    backbone: Backbone, layers: tuple[str, ...], runtime: BackboneRuntime = BackboneRuntime("torch")
) -> Callable[[Tensor], dict[str, Tensor]]:
    """``images (B, 3, S, S) float 0-255 -> {layer: float32 features}`` for a tracker's
    per-frame use, on a resolved ``runtime`` (:func:`select_runtime`).

    ``onnx``: ONNX Runtime on the CPU (float32); ``onnx-int8``: the same model quantized to int8;
    ``torch``: a private copy of ``backbone`` with BatchNorm folded and channels-last (same
    features, about 1.5x faster on a CPU), in ``runtime.dtype``: with ``torch.bfloat16`` the
    weights and activations are rounded to 8 significant bits (the features differ from
    float32's by 17-19 % relative L2 at both of MobileNetV2's head layers, measured on
    search-region crops; box heads barely notice, within 0.007 IoU) and the features come back
    as float32.
    """
    if runtime.name in ("onnx", "onnx-int8"):
        return OnnxBackbone(backbone, layers=layers, int8=runtime.name == "onnx-int8")
    if runtime.name != "torch":
        raise ValueError(f"a resolved runtime is torch, onnx or onnx-int8, got {runtime.name!r}")
    dtype = runtime.dtype
    fast = optimize_for_inference(backbone).to(dtype)
    if dtype == torch.float32:
        return functools.partial(fast, layers=layers)

    def extract(images: Tensor) -> dict[str, Tensor]:
        features = fast(images.to(dtype), layers=layers)
        return {name: value.float() for name, value in features.items()}

    return extract
