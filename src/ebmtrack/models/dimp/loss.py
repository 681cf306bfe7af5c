"""DiMP's offline classification loss: a hinge on the background, squared error on the target.

The test-frame label is a Gaussian of standard deviation ``sigma`` cells centred on the target
(DiMP: ``sigma = output_sigma_factor / search_area_factor * feature_size`` = 1/4 / 5 * 18 = 0.9).
Cells whose label is below ``threshold`` (0.05) are background: their predicted score is passed
through a ReLU and compared with 0, so any negative score costs nothing; the other cells are
compared with the label as they are. The loss is the mean squared error over all cells.

During offline training the test scores of every filter iterate are scored: the initial filter
with weight 100, the last with 100 and the intermediate ones share 400 (``dimp50.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ebmtrack.models.atom_classifier import gaussian_labels
from ebmtrack.models.dimp.layers import box_centers_in_cells

__all__ = ["classification_loss", "hinge_mse", "score_labels"]


def score_labels(
    boxes: Tensor, size: tuple[int, int], sigma: float, stride: int, filter_size: int
) -> Tensor:
    """Gaussian labels (..., H', W') with peak 1 at the target centre of each (..., 4) box.

    Args:
        boxes: (..., 4) xywh in pixels.
        size: (H', W') score-map size (see :func:`~ebmtrack.models.dimp.layers.score_map_size`).
        sigma: standard deviation in cells.
        stride: feature stride in pixels.
        filter_size: k (fixes where score cells sit).
    """
    centers = box_centers_in_cells(boxes, stride, filter_size)
    labels = gaussian_labels(centers.reshape(-1, 2), sigma, size)
    return labels.reshape(*boxes.shape[:-1], *size)


def hinge_mse(scores: Tensor, labels: Tensor, threshold: float = 0.05) -> Tensor:
    """Mean over all cells of ``(relu(s) - 0)^2`` where ``label < threshold``, ``(s - label)^2``
    elsewhere (DiMP's ``LBHinge``). ``scores`` and ``labels`` have the same shape."""
    if scores.shape != labels.shape:
        raise ValueError(
            f"scores and labels must have the same shape, got {tuple(scores.shape)} and "
            f"{tuple(labels.shape)}"
        )
    background = labels < threshold
    prediction = torch.where(background, torch.relu(scores), scores)
    target = torch.where(background, torch.zeros_like(labels), labels)
    return ((prediction - target) ** 2).mean()


def classification_loss(
    score_iterates: Sequence[Tensor],
    labels: Tensor,
    threshold: float = 0.05,
    weights: tuple[float, float, float] = (100.0, 100.0, 400.0),
) -> Tensor:
    """DiMP's weighted classification loss over the filter iterates.

    Args:
        score_iterates: test scores of each filter iterate, initial filter first.
        labels: Gaussian labels of the test frames (:func:`score_labels`).
        threshold: background threshold of :func:`hinge_mse`.
        weights: (initial, final, intermediate) weights; the intermediate weight is shared
            equally by the iterates strictly between the first and the last (none when there
            are fewer than 3 iterates).

    Returns:
        The scalar loss ``w_init L_0 + w_final L_last + w_iter mean(L_1 .. L_{last-1})``.
    """
    if not score_iterates:
        raise ValueError("score_iterates must hold at least one score map")
    w_init, w_final, w_iter = weights
    losses = [hinge_mse(scores, labels, threshold) for scores in score_iterates]
    total = w_init * losses[0] + w_final * losses[-1]
    if len(losses) > 2:
        total = total + w_iter * torch.stack(losses[1:-1]).mean()
    return total
