"""Inference-only rewrites of a frozen backbone for eager CPU speed.

BatchNorm after a convolution is an affine map per output channel, so it folds into the
convolution's weight and bias (one pass over the feature map instead of two); channels-last memory
lets oneDNN use its fast depthwise and 1x1 kernels. Both leave the outputs unchanged up to float
rounding (tested).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ebmtrack.models.backbones.base import Backbone, FrozenBatchNorm2d


def fold_batchnorm(backbone: Backbone) -> Backbone:
    """A copy of ``backbone`` with every :class:`FrozenBatchNorm2d` folded into its convolution.

    In these architectures each BatchNorm directly follows the convolution registered just before
    it, with nothing in between, so conv -> BN becomes one conv with
    ``weight * gamma / sqrt(var + eps)`` and bias ``beta - mean * gamma / sqrt(var + eps)``.
    The copy has a different state dict (no BN buffers, conv biases), so save the original.
    """
    folded = copy.deepcopy(backbone)
    previous_conv: nn.Conv2d | None = None
    replacements: list[tuple[nn.Module, str]] = []
    for parent in folded.modules():
        for child_name, child in parent.named_children():
            if isinstance(child, nn.Conv2d):
                previous_conv = child
            elif isinstance(child, FrozenBatchNorm2d):
                if previous_conv is None or previous_conv.out_channels != child.weight.numel():
                    raise ValueError(f"{child_name}: no convolution to fold this BatchNorm into")
                _fold_into(previous_conv, child)
                previous_conv = None
                replacements.append((parent, child_name))
    for parent, child_name in replacements:
        setattr(parent, child_name, nn.Identity())
    return folded


@torch.no_grad()
def _fold_into(conv: nn.Conv2d, bn: FrozenBatchNorm2d) -> None:
    scale = bn.weight * torch.rsqrt(bn.running_var + bn.eps)
    bias = bn.bias - bn.running_mean * scale
    if conv.bias is not None:
        bias = bias + conv.bias * scale
    conv.weight.mul_(scale.view(-1, 1, 1, 1))
    conv.bias = nn.Parameter(bias, requires_grad=False)


def optimize_for_inference(backbone: Backbone, channels_last: bool = True) -> Backbone:
    """A frozen eval-mode copy with BatchNorm folded and, by default, channels-last weights.

    Inputs are converted to channels-last inside :meth:`Backbone.forward` and outputs come back
    contiguous, so callers see no difference.
    """
    fast = fold_batchnorm(backbone).eval().requires_grad_(False)
    if channels_last:
        fast = fast.to(memory_format=torch.channels_last)
    return fast
