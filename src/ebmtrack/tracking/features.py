"""A tracker's per-frame feature extraction: the backbone prepared for inference."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from ebmtrack.models.backbones import optimize_for_inference
from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.backbones.onnx_runtime import OnnxBackbone
from ebmtrack.runtime import resolve_backbone_runtime

__all__ = ["feature_extractor"]


def feature_extractor(
    backbone: Backbone,
    layers: tuple[str, ...],
    runtime: str = "torch",
    dtype: torch.dtype = torch.float32,
) -> Callable[[Tensor], dict[str, Tensor]]:
    """``images (B, 3, S, S) float 0-255 -> {layer: float32 features}`` for a tracker's
    per-frame use.

    ``runtime`` ``"onnx"``: ONNX Runtime on the CPU (float32); ``"onnx-int8"``: the same model
    quantized to int8 (:mod:`ebmtrack.models.backbones.int8`); ``"auto"``: ONNX Runtime where
    :func:`~ebmtrack.runtime.resolve_backbone_runtime` picks it; ``"torch"``: a private copy of
    ``backbone`` with BatchNorm folded and channels-last (same features, about 1.5x faster on a
    CPU), in ``dtype``: with ``torch.bfloat16`` the weights and activations are rounded to 8
    significant bits (the features differ from float32's by 17-19 % relative L2 at both of
    MobileNetV2's head layers, measured on search-region crops; box heads barely notice, within
    0.007 IoU) and the features come back as float32.
    """
    device = next(backbone.parameters(), torch.empty(0)).device
    runtime = resolve_backbone_runtime(runtime, device, dtype)
    if runtime in ("onnx", "onnx-int8"):
        return OnnxBackbone(backbone, layers=layers, int8=runtime == "onnx-int8")
    fast = optimize_for_inference(backbone).to(dtype)
    if dtype == torch.float32:
        return functools.partial(fast, layers=layers)

    def extract(images: Tensor) -> dict[str, Tensor]:
        features = fast(images.to(dtype), layers=layers)
        return {name: value.float() for name, value in features.items()}

    return extract
