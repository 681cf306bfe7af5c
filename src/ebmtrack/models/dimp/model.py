"""DiMP's target classifier: feature block, filter initializer, model optimizer (DiMP fig. 2).

``DiMPClassifier`` predicts a target-specific k x k filter from a few training images and their
target boxes, then correlates it with a test image's features to score every location:

1. features: the backbone's stride-16 layer -> ``num_blocks`` residual blocks -> a 3x3
   convolution to ``feature_dim`` channels -> instance L2 normalisation with scale
   ``sqrt(1 / (feature_dim * k^2))`` (:func:`~ebmtrack.models.dimp.layers.instance_l2_norm`);
2. initializer: a 3x3 convolution, then PrRoIPool of the target box to k x k, averaged over
   the training images;
3. optimizer: ``num_iter`` steps of :class:`~ebmtrack.models.dimp.optimizer.SteepestDescentGN`.

All three are trained end-to-end through the unrolled optimizer with
:func:`~ebmtrack.models.dimp.loss.classification_loss` on the test scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ebmtrack.models.backbones.spec import backbone_spec
from ebmtrack.models.dimp.layers import apply_filter, instance_l2_norm
from ebmtrack.models.dimp.optimizer import SteepestDescentGN
from ebmtrack.models.iou_net import boxes_to_rois
from ebmtrack.ops.prroi_pool import prroi_pool

__all__ = ["DiMPClassifier", "DiMPConfig", "pool_filter"]


@dataclass(frozen=True)
class DiMPConfig:
    """Sizes and initial values of :class:`DiMPClassifier`; defaults are DiMP-50's
    (``dimpnet50`` called by ``ltr/train_settings/dimp/dimp50.py``).

    Attributes:
        in_channels: channels of the backbone's classification layer (ResNet-50 layer3: 1024).
        num_blocks: residual blocks before the projection (DiMP-50: 0, DiMP-18: 1).
        feature_dim: channels of the classification features and the filter (512; DiMP-18: 256).
        filter_size: k, side of the filter (4).
        stride: pixels per feature cell (16).
        num_iter: default optimizer steps in offline training (5).
        init_step_length: initial step factor beta (0.9).
        init_filter_reg: initial filter_reg, lambda = filter_reg^2 (0.1).
        min_filter_reg: lower bound of filter_reg (1e-3).
        init_gauss_sigma: std (cells) of the initial label function (1/4 / 5 * 18 = 0.9).
        num_dist_bins: distance bins of the label, mask and weight functions (100).
        bin_displacement: bin spacing in cells (0.1).
        mask_init_factor: target mask starts as sigmoid(factor * tanh(2 - d)) (3.0).
        backbone: name of the backbone the head was built for (informational, saved with it).
        feature_layer: name of the backbone layer it reads (informational).
    """

    in_channels: int = 1024
    num_blocks: int = 0
    feature_dim: int = 512
    filter_size: int = 4
    stride: int = 16
    num_iter: int = 5
    init_step_length: float = 0.9
    init_filter_reg: float = 0.1
    min_filter_reg: float = 1e-3
    init_gauss_sigma: float = 0.9
    num_dist_bins: int = 100
    bin_displacement: float = 0.1
    mask_init_factor: float = 3.0
    backbone: str | None = None
    feature_layer: str | None = None

    def __post_init__(self) -> None:
        positive_ints = ("in_channels", "feature_dim", "filter_size", "stride")
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name in ("num_blocks", "num_iter"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        if not isinstance(self.num_dist_bins, int) or self.num_dist_bins < 2:
            raise ValueError(f"num_dist_bins must be an int >= 2, got {self.num_dist_bins!r}")
        for name in ("init_step_length", "min_filter_reg", "init_gauss_sigma", "bin_displacement"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")

    @classmethod
    def for_backbone(cls, backbone, feature_dim: int | None = None) -> DiMPConfig:
        """The config for ``backbone``'s ``classifier_layer``, its layout from the backbone's
        spec (:class:`~ebmtrack.models.backbones.spec.BackboneSpec`: ``dimp_blocks``, and
        ``dimp_dim`` channels unless ``feature_dim`` is given): DiMP-50's (no block, 512) on
        ResNet-50, DiMP-18's (one block, 256) on ResNet-18, one block of 128 on the mobile
        backbones."""
        layer = backbone.classifier_layer
        info = backbone.feature_info[layer]
        spec = backbone_spec(backbone)
        num_blocks, default_dim = spec.dimp_blocks, spec.dimp_dim
        return cls(
            in_channels=info.channels,
            num_blocks=num_blocks,
            feature_dim=feature_dim or default_dim,
            stride=info.stride,
            backbone=backbone.name,
            feature_layer=layer,
        )


class ResidualBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN plus identity, then ReLU (ResNet's basic block).

    Unlike the backbone's block (frozen ImageNet statistics) this one is trained from scratch,
    so its batch norms are ordinary trainable ones that use batch statistics in training.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + x)


def pool_filter(feats: Tensor, boxes: Tensor, filter_size: int, stride: int) -> Tensor:
    """The mean over the N training images of the PrRoI-pooled target region.

    Args:
        feats: (N, B, C, H, W) features.
        boxes: (N, B, 4) xywh target boxes in pixels.
        filter_size: k, the pooled size.
        stride: pixels per feature cell (spatial scale 1 / stride).

    Returns:
        (B, C, k, k).
    """
    num_images, num_seq = feats.shape[:2]
    flat = feats.reshape(num_images * num_seq, *feats.shape[2:])
    rois = boxes_to_rois(boxes.reshape(-1, 1, 4).to(feats.dtype))
    pooled = prroi_pool(flat, rois, filter_size, 1.0 / stride)
    return pooled.reshape(num_images, num_seq, *pooled.shape[1:]).mean(dim=0)


class DiMPClassifier(nn.Module):
    """DiMP's target classifier; see the module docstring.

    Shapes: N training images per sequence, B sequences. Backbone features (N, B, in_channels,
    H, W), classification features (N, B, feature_dim, H, W), boxes (N, B, 4) xywh in pixels of
    the image the features come from, filters (B, feature_dim, k, k), scores (N, B, H', W') with
    the geometry of :mod:`ebmtrack.models.dimp.layers` (for k = 4, H' = H + 1 and cell i sits at
    pixel 16 i).

    Initialisation as the reference: convolution weights N(0, 2 / (k_h k_w out_channels)), zero
    biases, BatchNorm weight 1 and bias 0; optimizer parameters from the config.
    """

    def __init__(self, config: DiMPConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or DiMPConfig()
        blocks = [ResidualBlock(config.in_channels) for _ in range(config.num_blocks)]
        self.feature_blocks = nn.Sequential(*blocks)
        self.feature_projection = nn.Conv2d(
            config.in_channels, config.feature_dim, 3, padding=1, bias=False
        )
        self.init_conv = nn.Conv2d(config.feature_dim, config.feature_dim, 3, padding=1)
        self.optimizer = SteepestDescentGN(
            num_iter=config.num_iter,
            stride=config.stride,
            init_step_length=config.init_step_length,
            init_filter_reg=config.init_filter_reg,
            min_filter_reg=config.min_filter_reg,
            init_gauss_sigma=config.init_gauss_sigma,
            num_dist_bins=config.num_dist_bins,
            bin_displacement=config.bin_displacement,
            mask_init_factor=config.mask_init_factor,
        )
        self.norm_scale = math.sqrt(1.0 / (config.feature_dim * config.filter_size**2))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Reference initialisation of the convolutions and batch norms (torch's global RNG)."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                fan_out = module.kernel_size[0] * module.kernel_size[1] * module.out_channels
                nn.init.normal_(module.weight, 0.0, math.sqrt(2.0 / fan_out))
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def _check(self, tensor: Tensor, name: str, dims: int, channels: int | None = None) -> None:
        if tensor.dim() != dims or (channels is not None and tensor.shape[-3] != channels):
            want = "(N, B, C, H, W)" if dims == 5 else f"{dims} dimensions"
            extra = f" with C = {channels}" if channels is not None else ""
            raise ValueError(f"{name} must have shape {want}{extra}, got {tuple(tensor.shape)}")

    def _check_boxes(self, boxes: Tensor, feats: Tensor, name: str) -> None:
        if boxes.shape != (*feats.shape[:2], 4):
            raise ValueError(
                f"{name} must have shape {(*feats.shape[:2], 4)}, got {tuple(boxes.shape)}"
            )

    def extract_features(self, feat: Tensor) -> Tensor:
        """Classification features (..., feature_dim, H, W) of backbone features
        (..., in_channels, H, W); any leading dimensions."""
        if feat.dim() < 4 or feat.shape[-3] != self.config.in_channels:
            raise ValueError(
                f"feat must have shape (..., {self.config.in_channels}, H, W), "
                f"got {tuple(feat.shape)}"
            )
        lead = feat.shape[:-3]
        out = self.feature_projection(self.feature_blocks(feat.reshape(-1, *feat.shape[-3:])))
        out = instance_l2_norm(out, self.norm_scale)
        return out.reshape(*lead, *out.shape[-3:])

    def initialize_filter(self, feats: Tensor, boxes: Tensor) -> Tensor:
        """Initial filters (B, feature_dim, k, k) from classification features (N, B, D, H, W)
        and target boxes (N, B, 4): 3x3 conv, PrRoIPool of the box, mean over the N images."""
        self._check(feats, "feats", 5, self.config.feature_dim)
        self._check_boxes(boxes, feats, "boxes")
        num_images, num_seq = feats.shape[:2]
        conv = self.init_conv(feats.reshape(num_images * num_seq, *feats.shape[2:]))
        conv = conv.reshape(num_images, num_seq, *conv.shape[1:])
        return pool_filter(conv, boxes, self.config.filter_size, self.config.stride)

    def optimize_filter(
        self,
        filters: Tensor,
        feats: Tensor,
        boxes: Tensor,
        num_iter: int | None = None,
        sample_weight: Tensor | None = None,
    ) -> tuple[list[Tensor], list[Tensor]]:
        """``num_iter`` (default ``config.num_iter``) optimizer steps from ``filters``.

        Returns the num_iter + 1 filter iterates (input first) and the discriminative loss of
        each; see :meth:`SteepestDescentGN.forward` for ``sample_weight``.
        """
        self._check(feats, "feats", 5, self.config.feature_dim)
        self._check_boxes(boxes, feats, "boxes")
        k = self.config.filter_size
        if filters.shape != (feats.shape[1], self.config.feature_dim, k, k):
            raise ValueError(
                f"filters must have shape {(feats.shape[1], self.config.feature_dim, k, k)}, "
                f"got {tuple(filters.shape)}"
            )
        return self.optimizer(filters, feats, boxes, num_iter, sample_weight)

    def classify(self, filters: Tensor, feats: Tensor) -> Tensor:
        """Scores (N, B, H', W') of the filters (B, D, k, k) on features (N, B, D, H, W)."""
        self._check(feats, "feats", 5, self.config.feature_dim)
        if filters.shape[0] != feats.shape[1]:
            raise ValueError(
                f"filters must hold one filter per sequence ({feats.shape[1]}), "
                f"got {filters.shape[0]}"
            )
        return apply_filter(feats, filters)

    def forward(
        self,
        train_feats: Tensor,
        test_feats: Tensor,
        train_boxes: Tensor,
        num_iter: int | None = None,
    ) -> list[Tensor]:
        """Offline training pass: the test scores of every filter iterate.

        Args:
            train_feats: (N, B, in_channels, H, W) backbone features of the training images.
            test_feats: (M, B, in_channels, H, W) backbone features of the test images.
            train_boxes: (N, B, 4) target boxes in the training images.
            num_iter: optimizer steps (default ``config.num_iter``).

        Returns:
            num_iter + 1 score maps (M, B, H', W'), from the initial filter to the last.
        """
        self._check(train_feats, "train_feats", 5, self.config.in_channels)
        self._check(test_feats, "test_feats", 5, self.config.in_channels)
        train = self.extract_features(train_feats)
        test = self.extract_features(test_feats)
        filters = self.initialize_filter(train, train_boxes)
        iterates, _ = self.optimize_filter(filters, train, train_boxes, num_iter)
        return [self.classify(f, test) for f in iterates]
