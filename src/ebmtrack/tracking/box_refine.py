"""What box refinement needs in both trackers: random proposals around the classifier's box, the
box head's checks and BatchNorm folding, the feature window it reads, the final selection and the
damped size update. Boxes are (x, y, w, h) in crop pixels throughout. The ascents themselves are
each tracker's own (:mod:`ebmtrack.tracking.atom.refine`, :mod:`ebmtrack.tracking.ebm_refine`).
"""

from __future__ import annotations

import copy
import math

import torch
from torch import Tensor, nn

# The window and the size update are plain arithmetic, one definition shared with the torch-free
# runtime (they read tensors and arrays alike).
from ebmtrack.lite.head import blend_size, feature_window
from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.iou_net import AtomIoUNet

__all__ = [
    "blend_size",
    "check_box_head",
    "feature_window",
    "fold_box_head",
    "jitter_proposals",
    "select_box",
    "window_test_features",
]


def check_box_head(iou_net: AtomIoUNet, backbone: Backbone, layers: tuple[str, str]) -> None:
    """Raise ValueError unless ``iou_net`` reads ``backbone``'s ``layers`` (channels, strides)."""
    config = iou_net.config
    channels = tuple(backbone.feature_info[layer].channels for layer in layers)
    strides = tuple(backbone.feature_info[layer].stride for layer in layers)
    if config.input_channels != channels or config.strides != strides:
        raise ValueError(
            f"the IoU-Net expects {config.input_channels} channels at strides {config.strides}"
            f" (built for backbone {config.backbone!r}); backbone {backbone.name!r} layers "
            f"{list(layers)} give {channels} at {strides}"
        )
    if strides[1] % strides[0]:
        raise ValueError(f"the IoU-Net's strides {strides} must divide each other")


def fold_box_head(iou_net: AtomIoUNet) -> AtomIoUNet:
    """A frozen eval-mode copy of ``iou_net`` with every BatchNorm folded into the layer before it.

    In eval mode a BatchNorm is an affine map per channel, so conv (or linear) -> BN is one conv
    (linear) with ``weight * s`` and bias ``(bias - mean) * s + beta``, ``s = gamma /
    sqrt(var + eps)``: the same outputs up to float rounding (tested) with one pass fewer per
    block, in the test branch and the predictor that run every frame. The copy's state dict has
    no BatchNorm entries: save the original.
    """
    folded = copy.deepcopy(iou_net).eval().requires_grad_(False)
    for block in folded.modules():
        if not isinstance(block, nn.Sequential):
            continue
        for index in range(1, len(block)):
            layer, norm = block[index - 1], block[index]
            if isinstance(layer, nn.Conv2d | nn.Linear) and isinstance(
                norm, nn.BatchNorm2d | nn.BatchNorm1d
            ):
                _fold_batchnorm(layer, norm)
                block[index] = nn.Identity()
    return folded


@torch.no_grad()
def _fold_batchnorm(layer: nn.Conv2d | nn.Linear, norm: nn.BatchNorm2d | nn.BatchNorm1d) -> None:
    scale = norm.weight * torch.rsqrt(norm.running_var + norm.eps)
    bias = layer.bias if layer.bias is not None else torch.zeros_like(scale)
    layer.weight.mul_(scale.reshape(-1, *([1] * (layer.weight.dim() - 1))))
    layer.bias = nn.Parameter((bias - norm.running_mean) * scale + norm.bias, requires_grad=False)


def jitter_proposals(
    box: Tensor,
    num_random: int,
    center_jitter: float,
    size_jitter: float,
    generator: torch.Generator,
) -> Tensor:
    """``box`` (4,) followed by ``num_random`` boxes with uniform noise -> (1 + num_random, 4).

    The centre moves by U(-1/2, 1/2) * ``center_jitter`` * sqrt(w h) and w, h change by
    U(-1/2, 1/2) * ``size_jitter`` * sqrt(w h) (additive), with w, h kept >= min(w, h) / 3.
    """
    scale = math.sqrt(float(box[2] * box[3]))
    noise = torch.rand(num_random, 4, generator=generator, dtype=box.dtype) - 0.5
    noise = noise.to(box.device) * scale
    center = box[:2] + box[2:] / 2 + noise[:, :2] * center_jitter
    size = (box[2:] + noise[:, 2:] * size_jitter).clamp(min=float(box[2:].min()) / 3.0)
    jittered = torch.cat([center - size / 2, size], dim=1)
    return torch.cat([box[None], jittered], dim=0)


def window_test_features(
    iou_net: AtomIoUNet, feats: list[Tensor], boxes: Tensor, margin: float
) -> tuple[list[Tensor], Tensor]:
    """The IoU-Net's test-branch features of the window of ``feats`` that covers ``boxes``.

    Only that window goes through the test branch's convolutions (:func:`feature_window`), which
    gives the same IoUs for those boxes as the whole map at a fraction of the cost.

    Args:
        iou_net: the IoU predictor (or its :func:`fold_box_head` copy).
        feats: the backbone's [fine, coarse] maps, batch 1, in the order of ``config.strides``.
        boxes: (N, 4) xywh crop px, the boxes that will be scored.
        margin: crop pixels added on every side of the boxes (room for them to move).

    Returns:
        ``(test_features, offset)``: the window's test features and the (4,) offset
        ``(x0, y0, 0, 0)`` in crop px to subtract from boxes before scoring them on it.
    """
    fine, coarse = feats
    fine_stride, coarse_stride = iou_net.config.strides
    ratio = coarse_stride // fine_stride
    r0, r1, c0, c1 = feature_window(boxes, margin, coarse_stride, tuple(coarse.shape[-2:]))
    # no_grad, not inference_mode: the outputs must be usable by an ascent's autograd.
    with torch.no_grad():
        test_features = iou_net.test_features(
            [
                fine[..., r0 * ratio : r1 * ratio, c0 * ratio : c1 * ratio].contiguous(),
                coarse[..., r0:r1, c0:c1].contiguous(),
            ]
        )
    offset = torch.tensor([c0 * coarse_stride, r0 * coarse_stride, 0.0, 0.0], device=boxes.device)
    return test_features, offset


def select_box(boxes: Tensor, ious: Tensor, top_k: int, max_aspect_ratio: float) -> Tensor | None:
    """Mean of the ``top_k`` highest-IoU boxes among those with an aspect ratio inside
    (1 / max, max); None if no box qualifies. ``boxes`` (N, 4), ``ious`` (N,) -> (4,)."""
    aspect = boxes[:, 2] / boxes[:, 3]
    keep = (aspect < max_aspect_ratio) & (aspect > 1.0 / max_aspect_ratio)
    if not bool(keep.any()):
        return None
    boxes, ious = boxes[keep], ious[keep]
    top = torch.topk(ious, min(top_k, ious.numel())).indices
    return boxes[top].mean(dim=0)
