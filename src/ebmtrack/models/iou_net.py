"""ATOM's target-estimation head: an IoU predictor modulated by the reference frame (eq. 1, fig. 3).

``IoU(B) = g(c(x0, B0) * z(x, B))``: the reference branch turns the first frame's features ``x0``
and its box ``B0`` into two positive channel-weight vectors ``c`` (one per feature level); the test
branch pools the current frame's features ``z(x, B)`` inside each proposal ``B`` with Precise RoI
Pooling, after weighting the channels with ``c``; ``g`` (two parallel linear blocks and a final
linear layer) predicts the overlap. Because PrRoIPool is differentiable in the box, the predicted
IoU can be maximised over ``B`` by gradient ascent.

Boxes are ``(x, y, w, h)`` in pixels of the image the features come from (the search crop), with
the conventions of :mod:`ebmtrack.tracking.base`. The layer sizes are those of the reference
implementation for ResNet-18 (``input_channels`` = (128, 256)); ``width`` scales the hidden layers
for smaller backbones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ebmtrack.models.backbones.spec import backbone_spec
from ebmtrack.ops.boxes import box_convert
from ebmtrack.ops.prroi_pool import prroi_pool

__all__ = ["AtomIoUNet", "IoUNetConfig"]


@dataclass(frozen=True)
class IoUNetConfig:
    """Sizes of :class:`AtomIoUNet`; the defaults are ATOM's for ResNet-18 ``layer2``/``layer3``.

    Attributes:
        input_channels: channels of the two backbone levels (fine, coarse).
        pred_input_dim: channels of the test-branch features and of the modulation vectors.
        pred_inter_dim: outputs of the two linear blocks of the predictor ``g``.
        width: multiplier of the hidden convolution widths (128 and 256 at width 1).
        strides: pixels per feature cell of the two levels; spatial scale = 1 / stride.
        backbone: name of the backbone the head was built for (informational, saved with it).
        feature_layers: names of the two backbone layers it reads (informational).
    """

    input_channels: tuple[int, int] = (128, 256)
    pred_input_dim: tuple[int, int] = (256, 256)
    pred_inter_dim: tuple[int, int] = (256, 256)
    width: float = 1.0
    strides: tuple[int, int] = (8, 16)
    backbone: str | None = None
    feature_layers: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        for name in ("input_channels", "pred_input_dim", "pred_inter_dim", "strides"):
            value = tuple(getattr(self, name))
            if len(value) != 2 or not all(isinstance(v, int) and v > 0 for v in value):
                raise ValueError(f"{name} must be two positive ints, got {value!r}")
            object.__setattr__(self, name, value)
        if not self.width > 0:
            raise ValueError(f"width must be positive, got {self.width!r}")
        if self.feature_layers is not None:
            object.__setattr__(self, "feature_layers", tuple(self.feature_layers))

    @classmethod
    def for_backbone(cls, backbone, width: float | None = None) -> IoUNetConfig:
        """The config for ``backbone``'s ``default_layers`` (channels, strides, names).

        ``width`` (default: the backbone's spec's ``iou_net_width``: 1 for the ResNets, 0.5 for
        the mobile backbones; :class:`~ebmtrack.models.backbones.spec.BackboneSpec`) scales the
        hidden layers and the predictor's dimensions (256 at width 1).
        """
        if width is None:
            width = backbone_spec(backbone).iou_net_width
        layers = tuple(backbone.default_layers)
        dim = max(8, round(256 * width))
        return cls(
            input_channels=tuple(backbone.feature_info[layer].channels for layer in layers),
            pred_input_dim=(dim, dim),
            pred_inter_dim=(dim, dim),
            width=width,
            strides=tuple(backbone.feature_info[layer].stride for layer in layers),
            backbone=backbone.name,
            feature_layers=layers,
        )

    def hidden(self, channels: int) -> int:
        """A nominal hidden width scaled by ``width`` (at least 8)."""
        return max(8, round(channels * self.width))


# Reference branch pools 3x3 (fine) and 1x1 (coarse); the test branch 5x5 and 3x3.
_REF_POOL = (3, 1)
_TEST_POOL = (5, 3)


def _conv_block(in_ch: int, out_ch: int, kernel: int = 3, padding: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, kernel, padding=padding, bias=True),
        nn.BatchNorm2d(out_ch),
        nn.ReLU(inplace=True),
    )


def _linear_block(in_features: int, out_features: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(in_features, out_features), nn.BatchNorm1d(out_features), nn.ReLU()
    )


def boxes_to_rois(boxes: Tensor) -> Tensor:
    """(B, N, 4) xywh boxes -> (B*N, 5) rows (batch, x1, y1, x2, y2) for :func:`prroi_pool`."""
    batch, num = boxes.shape[:2]
    index = torch.arange(batch, device=boxes.device, dtype=boxes.dtype)
    index = index[:, None, None].expand(batch, num, 1)
    return torch.cat([index, box_convert(boxes, "xywh", "xyxy")], dim=-1).reshape(batch * num, 5)


class AtomIoUNet(nn.Module):
    """The IoU predictor of ATOM; see the module docstring and reference B.2 for the layers.

    Every convolution is conv + BatchNorm + ReLU, every linear block Linear + BatchNorm + ReLU.
    Initialisation: Kaiming-normal (fan-in) weights, zero biases, BatchNorm weights U(0, 1) as in
    the reference implementation.
    """

    def __init__(self, config: IoUNetConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or IoUNetConfig()
        in_fine, in_coarse = config.input_channels
        dim_fine, dim_coarse = config.pred_input_dim
        h128, h256 = config.hidden(128), config.hidden(256)
        # Reference branch.
        self.ref_conv_fine = _conv_block(in_fine, h128)
        self.ref_pool_conv_fine = _conv_block(h128, h256, kernel=_REF_POOL[0], padding=0)
        self.ref_conv_coarse = _conv_block(in_coarse, h256)
        self.ref_modulation_fine = _conv_block(2 * h256, dim_fine, kernel=1, padding=0)
        self.ref_modulation_coarse = _conv_block(2 * h256, dim_coarse, kernel=1, padding=0)
        # Test branch.
        self.test_conv_fine = nn.Sequential(_conv_block(in_fine, h256), _conv_block(h256, dim_fine))
        self.test_conv_coarse = nn.Sequential(
            _conv_block(in_coarse, h256), _conv_block(h256, dim_coarse)
        )
        # Predictor g.
        inter_fine, inter_coarse = config.pred_inter_dim
        self.predictor_fine = _linear_block(dim_fine * _TEST_POOL[0] ** 2, inter_fine)
        self.predictor_coarse = _linear_block(dim_coarse * _TEST_POOL[1] ** 2, inter_coarse)
        self.iou_predictor = nn.Linear(inter_fine + inter_coarse, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal weights, zero biases, BatchNorm weights U(0, 1) (torch's global RNG)."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.Linear):
                nn.init.kaiming_normal_(module.weight, mode="fan_in")
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.BatchNorm2d | nn.BatchNorm1d):
                nn.init.uniform_(module.weight)
                nn.init.zeros_(module.bias)

    @property
    def spatial_scales(self) -> tuple[float, float]:
        return (1.0 / self.config.strides[0], 1.0 / self.config.strides[1])

    def _check_levels(self, feats: list[Tensor], name: str) -> None:
        if len(feats) != 2:
            raise ValueError(
                f"{name} must be a list of 2 feature maps (fine, coarse), got {len(feats)}"
            )
        for level, (feat, channels) in enumerate(zip(feats, self.config.input_channels)):
            if feat.dim() != 4 or feat.shape[1] != channels:
                raise ValueError(
                    f"{name}[{level}] must have shape (B, {channels}, H, W), "
                    f"got {tuple(feat.shape)}"
                )

    def modulation(self, ref_feats: list[Tensor], ref_boxes: Tensor) -> list[Tensor]:
        """The target-specific channel weights ``c(x0, B0)``.

        Args:
            ref_feats: [(B, C_fine, H1, W1), (B, C_coarse, H2, W2)] reference-frame features.
            ref_boxes: (B, 4) xywh target boxes in pixels of the reference crop.

        Returns:
            [(B, pred_input_dim[0]), (B, pred_input_dim[1])], non-negative.
        """
        self._check_levels(ref_feats, "ref_feats")
        if ref_boxes.dim() != 2 or ref_boxes.shape != (ref_feats[0].shape[0], 4):
            raise ValueError(
                f"ref_boxes must have shape ({ref_feats[0].shape[0]}, 4), "
                f"got {tuple(ref_boxes.shape)}"
            )
        rois = boxes_to_rois(ref_boxes[:, None].to(ref_feats[0].dtype))
        scale_fine, scale_coarse = self.spatial_scales
        fine = prroi_pool(self.ref_conv_fine(ref_feats[0]), rois, _REF_POOL[0], scale_fine)
        fine = self.ref_pool_conv_fine(fine)  # (B, h256, 1, 1)
        coarse = prroi_pool(self.ref_conv_coarse(ref_feats[1]), rois, _REF_POOL[1], scale_coarse)
        joint = torch.cat([fine, coarse], dim=1)
        return [
            self.ref_modulation_fine(joint).flatten(1),
            self.ref_modulation_coarse(joint).flatten(1),
        ]

    def test_features(self, test_feats: list[Tensor]) -> list[Tensor]:
        """Test-branch features [(B, pred_input_dim[0], H1, W1), (B, pred_input_dim[1], H2, W2)].

        Only the convolutions: cheap to compute on a window of the feature maps that covers the
        proposals (plus two cells of margin for the two 3x3 convolutions).
        """
        self._check_levels(test_feats, "test_feats")
        return [self.test_conv_fine(test_feats[0]), self.test_conv_coarse(test_feats[1])]

    def predict_iou(
        self, modulation: list[Tensor], test_features: list[Tensor], proposals: Tensor
    ) -> Tensor:
        """Predicted IoU (in [-1, 1] once trained, 2 * IoU - 1) of each proposal.

        Args:
            modulation: output of :meth:`modulation`, [(B, D1), (B, D2)].
            test_features: output of :meth:`test_features`, [(B, D1, H1, W1), (B, D2, H2, W2)].
            proposals: (B, N, 4) xywh boxes in pixels of the test crop.

        Returns:
            (B, N). Differentiable with respect to ``proposals`` (for gradient ascent).
        """
        return self.predict_iou_modulated(self.modulate(modulation, test_features), proposals)

    @staticmethod
    def modulate(modulation: list[Tensor], test_features: list[Tensor]) -> list[Tensor]:
        """Channel-weight the test features by the modulation vectors (before pooling)."""
        return [
            feat * weights[:, :, None, None] for feat, weights in zip(test_features, modulation)
        ]

    def predict_iou_modulated(self, modulated: list[Tensor], proposals: Tensor) -> Tensor:
        """:meth:`predict_iou` from features already passed through :meth:`modulate`; lets an
        optimiser that evaluates many box sets on one frame weight the features once."""
        batch = modulated[0].shape[0]
        if proposals.dim() != 3 or proposals.shape[0] != batch or proposals.shape[2] != 4:
            raise ValueError(
                f"proposals must have shape ({batch}, N, 4), got {tuple(proposals.shape)}"
            )
        num = proposals.shape[1]
        rois = boxes_to_rois(proposals.to(modulated[0].dtype))
        pooled = [
            prroi_pool(feat, rois, size, scale)
            for feat, size, scale in zip(modulated, _TEST_POOL, self.spatial_scales)
        ]
        joint = torch.cat([self.predictor_fine(pooled[0]), self.predictor_coarse(pooled[1])], dim=1)
        return self.iou_predictor(joint).reshape(batch, num)

    def forward(
        self,
        ref_feats: list[Tensor],
        test_feats: list[Tensor],
        ref_boxes: Tensor,
        proposals: Tensor,
    ) -> Tensor:
        """Predicted IoU (B, N) of ``proposals`` (B, N, 4) given the reference box (B, 4)."""
        return self.predict_iou(
            self.modulation(ref_feats, ref_boxes), self.test_features(test_feats), proposals
        )
