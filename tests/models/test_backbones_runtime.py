"""The backbone's runtime and precision, chosen once per tracker (select_runtime)."""

import importlib.util

import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.backbones.runtime import (
    BackboneRuntime,
    feature_extractor,
    onnx_installed,
    select_runtime,
)


def _name(*args, **kwargs) -> str:
    return select_runtime(*args, **kwargs).name


def test_auto_backbone_runtime_is_onnx_exactly_on_a_cpu_in_float32(monkeypatch):
    installed = all(importlib.util.find_spec(m) for m in ("onnxruntime", "onnx"))
    assert onnx_installed() == installed
    assert _name("float32", "auto", "cpu") == ("onnx" if installed else "torch")
    assert _name("bfloat16", "auto", "cpu") == "torch"
    assert _name("float32", "auto", "cuda") == "torch"
    assert _name("float32", "torch", "cpu") == "torch"
    assert _name("bfloat16", "onnx", "cpu") == "onnx"  # as asked
    # int8 where the caller says its weights have ranges; the function is asked only then.
    assert _name("float32", "auto", "cpu", int8=True) == ("onnx-int8" if installed else "torch")
    assert _name("float32", "auto", "cpu", int8=lambda: False) == ("onnx" if installed else "torch")
    never = lambda: pytest.fail("asked")  # noqa: E731
    assert _name("bfloat16", "auto", "cpu", int8=never) == "torch"
    assert _name("float32", "auto", "cuda", int8=never) == "torch"
    assert _name("float32", "onnx", "cpu", int8=never) == "onnx"
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "onnxruntime" else real_find_spec(name, *args),
    )
    assert _name("float32", "auto", "cpu") == "torch"  # not installed
    assert _name("float32", "auto", "cpu", int8=True) == "torch"
    # int8 is asked for, never picked (tests/models/test_backbones_int8.py for its refusals).
    assert _name("float32", "onnx-int8", "cpu") == "onnx-int8"
    match = "backbone_runtime must be one of auto, torch, onnx, onnx-int8"
    with pytest.raises(ValueError, match=match):
        select_runtime("float32", "tensorrt", "cpu")


def test_the_runtime_carries_the_precision():
    assert select_runtime("bfloat16", "torch", "cpu") == BackboneRuntime("torch", torch.bfloat16)
    assert select_runtime("float32", "auto", "cuda") == BackboneRuntime("torch", torch.float32)
    assert select_runtime("bfloat16", "auto", "cuda").dtype == torch.bfloat16
    with pytest.raises(ValueError, match="precision must be one of auto, float32, bfloat16"):
        select_runtime("half", "torch", "cpu")


def test_feature_extractor_takes_a_resolved_runtime_only():
    torch.manual_seed(0)
    backbone = create_backbone("mobilenetv2", pretrained=False)
    layers = ("features.6",)
    images = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1)) * 255
    with torch.no_grad():
        plain = backbone(images, layers)["features.6"]
        fast = feature_extractor(backbone, layers)(images)["features.6"]  # torch, float32
    torch.testing.assert_close(fast, plain, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="a resolved runtime is torch, onnx or onnx-int8"):
        feature_extractor(backbone, layers, BackboneRuntime("auto"))
