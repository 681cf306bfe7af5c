import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.backbones.runtime import BackboneRuntime, feature_extractor
from ebmtrack.models.precision import fast_dtype, resolve_precision


def test_fast_dtype_is_bfloat16_only_on_cpus_with_native_bfloat16():
    assert fast_dtype("cuda") == torch.float32
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            native = any("avx512_bf16" in line or "amx_bf16" in line for line in cpuinfo)
    except OSError:
        native = False
    assert fast_dtype("cpu") == (torch.bfloat16 if native else torch.float32)
    assert resolve_precision("auto", "cpu") == fast_dtype("cpu")
    assert resolve_precision("float32", "cpu") == torch.float32
    assert resolve_precision("bfloat16", "cuda") == torch.bfloat16
    with pytest.raises(ValueError, match="precision must be one of auto, float32, bfloat16"):
        resolve_precision("half", "cpu")


def test_bfloat16_backbone_gives_float32_features_close_to_float32_ones():
    torch.manual_seed(0)
    backbone = create_backbone("mobilenetv2", pretrained=False)
    layers = ("features.6", "features.13")
    images = torch.rand(2, 3, 96, 96, generator=torch.Generator().manual_seed(1)) * 255
    with torch.no_grad():
        exact = feature_extractor(backbone, layers)(images)
        bfloat16 = BackboneRuntime("torch", torch.bfloat16)
        rounded = feature_extractor(backbone, layers, bfloat16)(images)
    for name in layers:
        assert rounded[name].dtype == torch.float32
        relative = (rounded[name] - exact[name]).norm() / exact[name].norm()
        assert 1e-5 < relative < 0.1, (name, relative)  # rounded, and only by the rounding
