"""The box head as the trackers run it: one IoU-Net (ATOM's, or one trained as an EBM) checked
against the backbone, folded for speed, modulated by the first frame, read on a feature window
around jittered proposals (:mod:`ebmtrack.tracking.box_refine` for the pieces)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.tracking.box_refine import (
    check_box_head,
    fold_box_head,
    jitter_proposals,
    window_test_features,
)
from ebmtrack.tracking.search_region import FirstFrame

__all__ = ["BoxHead", "ProposalConfig"]


@dataclass(frozen=True)
class ProposalConfig:
    """The jittered proposals a box head's refinement starts from
    (:func:`~ebmtrack.tracking.box_refine.jitter_proposals`; the fields of
    :class:`~ebmtrack.tracking.params.SearchRegionParams` of the same names)."""

    seed: int = 0
    num_random_proposals: int = 9
    proposal_center_jitter: float = 0.1
    proposal_size_jitter: float = 0.5


class BoxHead:
    """An :class:`~ebmtrack.models.iou_net.AtomIoUNet` ready for per-frame use.

    Args:
        net: the trained head; moved to ``device`` and set to eval mode (the reference branch
            runs on it, once per target).
        backbone: the tracker's backbone; the head reads its ``default_layers`` (refused with
            a ValueError where their channels or strides are not the head's).
        device: where the head runs.

    Attributes:
        net: the head as given.
        folded: its frozen copy with BatchNorm folded in (:func:`~ebmtrack.tracking.box_refine.
            fold_box_head`), which runs every frame.
        layers: the backbone layers it reads, fine then coarse.
    """

    def __init__(self, net: AtomIoUNet, backbone: Backbone, device: torch.device) -> None:
        self.net = net.to(device).eval()
        self.layers: tuple[str, ...] = tuple(backbone.default_layers)
        check_box_head(self.net, backbone, self.layers)
        self.folded = fold_box_head(self.net)
        self.device = device

    def modulation(self, first: FirstFrame, search_size: int) -> list[Tensor]:
        """The modulation vectors of the target in the unaugmented first-frame crop (the first
        row of ``first.feats``, the crop resized to ``search_size`` px)."""
        size = first.size * search_size / first.side
        box = np.concatenate([first.centers[0] - size / 2, size])
        with torch.no_grad():
            ref_box = torch.as_tensor(box, dtype=torch.float32, device=self.device)
            feats = [first.feats[layer][:1] for layer in self.layers]
            return self.net.modulation(feats, ref_box[None])

    def proposals(self, start: Tensor, params: ProposalConfig, frame_index: int) -> Tensor:
        """``start`` (4,) xywh crop px and ``params.num_random_proposals`` jittered copies
        (:func:`~ebmtrack.tracking.box_refine.jitter_proposals`), on the device; one random
        stream per frame, so that a sequence replays identically."""
        generator = torch.Generator().manual_seed(params.seed * 100_003 + frame_index)
        return jitter_proposals(
            start,
            params.num_random_proposals,
            params.proposal_center_jitter,
            params.proposal_size_jitter,
            generator,
        ).to(self.device)

    def window(
        self, feats: dict[str, Tensor], proposals: Tensor, margin: float
    ) -> tuple[list[Tensor], Tensor]:
        """The folded head's test features of the window of ``feats`` (batch 1) around
        ``proposals`` grown by ``margin`` px, and the window's (4,) offset
        (:func:`~ebmtrack.tracking.box_refine.window_test_features`)."""
        return window_test_features(
            self.folded, [feats[layer] for layer in self.layers], proposals, margin
        )
