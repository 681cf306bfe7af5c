"""Training modules for the target-estimation network (ATOM's IoU-Net) with any box loss.

Two ways to train the same :class:`~ebmtrack.models.iou_net.AtomIoUNet`:

- ``"mse"`` (ATOM, section 3.1): regress ``2 * IoU - 1`` of the proposals the data processing drew
  around the test box.
- any loss of :data:`ebmtrack.ebm.LOSSES` (BMVC 2020, section 5 and appendix D): the network's raw
  output is the energy-based model's ``f(x, y)``. ``x`` is everything that does not depend on the
  box (the reference frame's modulation vectors and the test frame's features, bundled as
  :class:`BoxConditioning`); ``y`` is a box in the parametrisation
  ``(cx / w0, cy / h0, log w, log h)`` of crop pixels, with ``(w0, h0)`` the size of the test
  frame's ground-truth box, so that the losses' noise is relative to the target's size. The loss
  draws its own noise samples around the ground truth.

The backbone is frozen (its features are computed under ``no_grad``, in eval mode) and left out
of checkpoints; only the IoU-Net is trained.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ebmtrack.ebm import get_loss
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.ops.boxes import box_convert
from ebmtrack.ops.windows import box_cells, crop_windows

# The tracking recipes of the paper's appendix D.2 for the box head: M = 128 samples, proposal /
# noise mixture with standard deviations 0.05 and 0.5 on every coordinate (DiMP-KLD-IS, after
# PrDiMP; ML-IS uses the same proposal), KLD-IS label sigma 0.05, NCE+ beta 0.1. D.2 has no DSM or
# ML-MCMC: DSM's sigma is set to the label noise (0.05) and ML-MCMC takes the 1-D experiments'
# step length 0.05 (appendix B.4) with 16 steps; appendix C.2's detection values (DSM 0.075,
# alpha 1e-5) belong to another head and box parametrisation. The losses' own defaults are those of
# the paper's 1-D experiments, so the box head starts from these instead.
EBM_RECIPES: dict[str, dict[str, Any]] = {
    "ml-is": {"num_samples": 128, "proposal_sigmas": (0.05, 0.5)},
    "kld-is": {"num_samples": 128, "proposal_sigmas": (0.05, 0.5), "label_sigma": 0.05},
    "nce": {"num_samples": 128, "noise_sigmas": (0.05, 0.5)},
    "nce+": {"num_samples": 128, "noise_sigmas": (0.05, 0.5), "beta": 0.1},
    "dsm": {"num_samples": 128, "sigma": 0.05},
    "ml-mcmc": {"num_samples": 128, "num_steps": 16, "step_length": 0.05},
    "sm": {},
}
INPUT_GRADIENT_LOSSES = ("sm", "dsm", "ml-mcmc")
"""Losses that differentiate f with respect to y (so validation must run with autograd)."""


@dataclass
class BoxLossConfig:
    """Which loss trains the box head.

    Attributes:
        name: ``"mse"`` (ATOM) or a name of :data:`ebmtrack.ebm.LOSSES`.
        params: keyword arguments of the EBM loss; missing ones come from :data:`EBM_RECIPES`.
    """

    name: str = "mse"
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name == "mse":
            if self.params:
                raise ValueError(f"the mse loss takes no params, got {sorted(self.params)}")
            return
        if self.name not in EBM_RECIPES:
            raise ValueError(
                f"unknown box loss {self.name!r}; choose from mse, {', '.join(EBM_RECIPES)}"
            )
        accepted = list(inspect.signature(get_loss(self.name)).parameters)[3:]  # after model, x, y
        unknown = sorted(set(self.params) - set(accepted))
        if unknown:
            raise ValueError(
                f"unknown param(s) {', '.join(unknown)} of loss {self.name}; valid: "
                f"{', '.join(accepted) or 'none'}"
            )

    def entry(self) -> dict[str, str]:
        """The ``loss`` header entry of a head this trained
        (:func:`~ebmtrack.models.serialization.head_loss`)."""
        return {"loss": self.name}

    def resolved_params(self) -> dict[str, Any]:
        """The recipe's hyper-parameters updated with ``params``."""
        return {**EBM_RECIPES.get(self.name, {}), **self.params}


class BoxConditioning(NamedTuple):
    """The ``x`` of the box EBM: what ``f(x, y)`` needs besides the box ``y``.

    Attributes:
        modulation: [(B, D1), (B, D2)] reference-frame channel weights.
        test_features: [(B, D1, H1, W1), (B, D2, H2, W2)] test-branch feature maps.
        size_norm: (B, 2) ``(w0, h0)`` that makes the centre coordinates of ``y`` relative.
    """

    modulation: list[Tensor]
    test_features: list[Tensor]
    size_norm: Tensor

    @property
    def shape(self) -> torch.Size:
        """``(B,)``: the EBM losses read the batch size of ``x`` from ``x.shape[0]``."""
        return self.size_norm.shape[:1]


class BoxEnergy(nn.Module):
    """The IoU-Net as an energy-based model: ``forward(x, y) -> f(x, y)`` of shape (B, M).

    ``x`` is a :class:`BoxConditioning`, ``y`` (B, M, 4) boxes in its parametrisation; ``f`` is
    the network's raw output for the box (no activation).
    """

    def __init__(self, iou_net: AtomIoUNet):
        super().__init__()
        self.iou_net = iou_net

    def forward(self, x: BoxConditioning, y: Tensor) -> Tensor:
        boxes = box_convert(y, "ebm", "xywh", x.size_norm)
        return self.iou_net.predict_iou(x.modulation, x.test_features, boxes)


def proposal_ranking_stats(scores: Tensor, proposal_iou: Tensor) -> dict[str, Tensor]:
    """How well ``scores`` (B, N) order proposals whose overlap is ``proposal_iou`` (B, N).

    Comparable across losses, since only the order of the scores matters.

    Returns:
        ``rank_corr``: mean over the batch of the Spearman correlation of scores and IoU (0 for
        constant scores); ``top1_iou``: mean IoU of each pair's highest-scored proposal.
        ``proposal_iou`` is ``2 * IoU - 1``, as the data processing writes it.
    """

    def centred_ranks(values: Tensor) -> Tensor:
        ranks = values.argsort(dim=-1).argsort(dim=-1).to(torch.float32)
        return ranks - ranks.mean(dim=-1, keepdim=True)

    score_ranks, iou_ranks = centred_ranks(scores), centred_ranks(proposal_iou)
    norms = (score_ranks.norm(dim=-1) * iou_ranks.norm(dim=-1)).clamp_min(1e-12)
    best = proposal_iou.gather(1, scores.argmax(dim=1, keepdim=True))[:, 0]
    return {
        "rank_corr": ((score_ranks * iou_ranks).sum(dim=-1) / norms).mean(),
        "top1_iou": ((best + 1) / 2).mean(),
    }


class BoxRegressionModule(nn.Module):
    """Training module (see :mod:`ebmtrack.training.trainer`): frozen backbone + IoU-Net + loss.

    ``forward(batch)`` takes a collated batch of :class:`~ebmtrack.data.processing.AtomProcessing`
    samples (``ref_image``, ``ref_box``, ``test_image``, ``test_box``, ``proposals``,
    ``proposal_iou``) and returns ``(loss, stats)``. For ``"mse"`` ``stats`` holds the mean
    absolute IoU error; in eval mode (validation), for every loss, also
    :func:`proposal_ranking_stats` of the head's output on the proposals, which compares runs
    trained with different losses.

    Args:
        backbone: an :class:`~ebmtrack.models.backbones.Backbone`; it is frozen here.
        iou_net: the head to train; its ``input_channels`` must match the backbone's layers.
        loss: the loss to train with.
        layers: the two backbone layers (default: the backbone's ``default_layers``).
        windows: run the head's branches on the windows of the feature maps that the boxes it
            scores read (:meth:`window`): the reference box's always, the proposals' with
            ``"mse"`` (an EBM loss draws its own boxes anywhere in the crop). The same outputs
            and gradients as the whole maps in eval mode; in train mode BatchNorm's batch
            statistics then come from the windows, around the target, as the trackers read it.
    """

    frozen_submodules = ("backbone",)

    def __init__(
        self,
        backbone: nn.Module,
        iou_net: AtomIoUNet,
        loss: BoxLossConfig | None = None,
        layers: tuple[str, str] | None = None,
        windows: bool = False,
    ) -> None:
        super().__init__()
        self.windows = windows
        self.backbone = backbone.eval().requires_grad_(False)
        self.iou_net = iou_net
        self.loss = loss or BoxLossConfig()
        # Both levels may read the same layer (a one-level backbone such as nanotrack's).
        self.layers = tuple(layers) if layers is not None else tuple(backbone.default_layers)
        backbone.check_layers(self.layers)
        channels = tuple(backbone.feature_info[name].channels for name in self.layers)
        if channels != tuple(iou_net.config.input_channels):
            raise ValueError(
                f"iou_net input_channels {iou_net.config.input_channels} do not match the "
                f"backbone layers {self.layers} with {channels} channels"
            )
        self.loss_fn = None if self.loss.name == "mse" else get_loss(self.loss.name)
        self.loss_params = self.loss.resolved_params()
        self.needs_input_grad = self.loss.name in INPUT_GRADIENT_LOSSES

    def train(self, mode: bool = True) -> BoxRegressionModule:
        super().train(mode)
        self.backbone.eval()  # frozen: never batch statistics
        return self

    def features(self, images: Tensor) -> list[Tensor]:
        """The backbone's two feature maps of ``images`` (B, 3, S, S), without gradients."""
        with torch.no_grad():
            feats = self.backbone(images, self.layers)
        return [feats[name] for name in self.layers]

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        # One backbone call for both crops (its BatchNorm is frozen, so batching changes nothing).
        both = self.features(torch.cat([batch["ref_image"], batch["test_image"]]))
        ref_feats = [feat[: len(feat) // 2] for feat in both]
        test_feats = [feat[len(feat) // 2 :] for feat in both]
        return self.head_loss(ref_feats, test_feats, batch)

    def head_loss(
        self, ref_feats: list[Tensor], test_feats: list[Tensor], batch: dict[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The loss and stats of :meth:`forward` from the backbone's features of both crops
        (lets a module that reads cached features share everything after the backbone)."""
        ref_window, ref_box = self.window(ref_feats, batch["ref_box"][:, None], border=1)
        modulation = self.iou_net.modulation(ref_window, ref_box[:, 0])
        proposals = batch["proposals"]
        stats = {}
        if self.loss_fn is None:
            # MSE scores only the proposals: the test branch runs on their window.
            test_window, proposals = self.window(test_feats, proposals, border=2)
            test_features = self.iou_net.test_features(test_window)
            predicted = self.iou_net.predict_iou(modulation, test_features, proposals)
            error = predicted.float() - batch["proposal_iou"]
            loss = error.square().mean()
            stats["iou_abs_error"] = error.detach().abs().mean() / 2
        else:  # the loss draws its own boxes, anywhere in the crop: the whole map
            test_features = self.iou_net.test_features(test_feats)
            size_norm = batch["test_box"][:, 2:]
            x = BoxConditioning(modulation, test_features, size_norm)
            y = box_convert(batch["test_box"][:, None, :], "xywh", "ebm", size_norm)[:, 0]
            # A fresh wrapper, not a sub-module: registering it would store the head twice.
            loss = self.loss_fn(BoxEnergy(self.iou_net), x, y, **self.loss_params)
        if not self.training:  # in train mode an extra pass would move BatchNorm statistics
            with torch.no_grad():
                scores = self.iou_net.predict_iou(modulation, test_features, proposals)
            stats.update(proposal_ranking_stats(scores.float(), batch["proposal_iou"]))
        return loss, stats

    def window(
        self, feats: list[Tensor], boxes: Tensor, border: int
    ) -> tuple[list[Tensor], Tensor]:
        """The windows of the [fine, coarse] ``feats`` (B, C, H, W) that pooling ``boxes``
        (B, N, 4, xywh px) reads after ``border`` 3x3 convolutions (:mod:`ebmtrack.ops.windows`),
        and the boxes in the windows' pixels: the head's outputs for those boxes are the whole
        maps' (up to float rounding) at a fraction of the cost. Without ``windows``: the whole
        maps and the boxes unmoved."""
        if not self.windows:
            return feats, boxes
        fine_stride, coarse_stride = self.iou_net.config.strides
        cells = box_cells(boxes.detach(), coarse_stride, tuple(feats[1].shape[-2:]), border)
        windows, origins = crop_windows(feats, cells, (coarse_stride // fine_stride, 1))
        shift = (origins.flip(1) * coarse_stride).to(boxes.dtype)  # (B, 2) x, y px
        return windows, torch.cat([boxes[..., :2] - shift[:, None], boxes[..., 2:]], dim=-1)
