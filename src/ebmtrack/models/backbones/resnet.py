"""ResNet-18 / ResNet-50 (He et al. 2016, torchvision's "v1.5": stride on the 3x3 conv).

Module names equal torchvision's, so its ImageNet state dicts (``resnet18-f37072fd.pth``,
``resnet50-*.pth`` or a safetensors copy) load without renaming. Feature layers follow pytracking:
``conv1`` is the stem output after BN + ReLU (before the max-pool), ``layer1``..``layer4`` are the
residual stages. The ATOM paper's "block 3" / "block 4" are ``layer2`` / ``layer3``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ebmtrack.models.backbones.base import (
    IMAGENET_MEAN_RGB,
    IMAGENET_STD_RGB,
    Backbone,
    FeatureInfo,
    FrozenBatchNorm2d,
    Stage,
)
from ebmtrack.models.backbones.spec import BackboneSpec, register_backbone


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with an identity (or 1x1 projection) shortcut."""

    expansion = 1

    def __init__(self, in_channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride, 1, bias=False)
        self.bn1 = FrozenBatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = FrozenBatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(in_channels, width * self.expansion, stride)

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand by 4, with a shortcut."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = FrozenBatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = FrozenBatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * self.expansion, 1, bias=False)
        self.bn3 = FrozenBatchNorm2d(width * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(in_channels, width * self.expansion, stride)

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


def _shortcut(in_channels: int, out_channels: int, stride: int) -> nn.Sequential | None:
    if stride == 1 and in_channels == out_channels:
        return None
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
        FrozenBatchNorm2d(out_channels),
    )


class ResNet(Backbone):
    """A torchvision-compatible ResNet with named feature layers ``conv1``, ``layer1``..``layer4``.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        depths: number of blocks in each of the four stages.
        name: registry name.
        num_classes: size of the ImageNet head ``fc``.
    """

    default_layers = ("layer2", "layer3")
    classifier_layer = "layer3"
    classifier_prefixes = ("fc.",)

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        depths: tuple[int, int, int, int],
        name: str,
        num_classes: int = 1000,
    ) -> None:
        super().__init__(IMAGENET_MEAN_RGB, IMAGENET_STD_RGB)
        self.name = name
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = FrozenBatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        in_channels = 64
        stages = []
        for index, (width, depth) in enumerate(zip((64, 128, 256, 512), depths)):
            stride = 1 if index == 0 else 2
            blocks = []
            for block_index in range(depth):
                blocks.append(block(in_channels, width, stride if block_index == 0 else 1))
                in_channels = width * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)
        exp = block.expansion
        self.feature_info = {
            "conv1": FeatureInfo(2, 64),
            "layer1": FeatureInfo(4, 64 * exp),
            "layer2": FeatureInfo(8, 128 * exp),
            "layer3": FeatureInfo(16, 256 * exp),
            "layer4": FeatureInfo(32, 512 * exp),
        }
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def _stem(self, x: Tensor) -> Tensor:
        return self.relu(self.bn1(self.conv1(x)))

    def _pool_then_layer1(self, x: Tensor) -> Tensor:
        return self.layer1(self.maxpool(x))

    def stages(self) -> list[Stage]:
        return [
            ("conv1", self._stem),
            ("layer1", self._pool_then_layer1),
            ("layer2", self.layer2),
            ("layer3", self.layer3),
            ("layer4", self.layer4),
        ]

    def logits_from(self, last_features: Tensor) -> Tensor:
        return self.fc(torch.flatten(self.avgpool(last_features), 1))


def resnet18() -> ResNet:
    """ResNet-18: layer2 = 128 ch at stride 8, layer3 = 256 ch at stride 16."""
    return ResNet(BasicBlock, (2, 2, 2, 2), "resnet18")


def resnet50() -> ResNet:
    """ResNet-50: layer2 = 512 ch at stride 8, layer3 = 1024 ch at stride 16."""
    return ResNet(Bottleneck, (3, 4, 6, 3), "resnet50")


# No ImageNet weights ship for the ResNets (pass a torchvision checkpoint). The heads keep the
# papers' sizes: the IoU-Net at full width; DiMP-18's classifier (one block, 256 channels) and
# DiMP-50's (no block, 512).
SPECS = (
    register_backbone(BackboneSpec("resnet18", resnet18, iou_net_width=1.0, dimp_dim=256)),
    register_backbone(
        BackboneSpec("resnet50", resnet50, iou_net_width=1.0, dimp_blocks=0, dimp_dim=512)
    ),
)
