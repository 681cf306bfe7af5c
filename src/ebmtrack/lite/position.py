"""Where the target is and how big: the one rule by which ATOM's classifier and the siamese head
(:mod:`ebmtrack.lite.siamese`) decide a frame's box together, for the torch-free runtime and the
torch trackers alike.

The siamese head alone (the defaults: ``classifier_weight`` 0, ``distractor_growth`` True) takes
the box of its best cell in a crop centred on the classifier's peak; in a scene of look-alikes it
can take a neighbour's cell, or a box that grows over a neighbour, and the tracker's size, search
region and classifier follow it. Three checks against that, from the classifier's evidence
(measured on held-out and look-alike clips, none beat the head alone there:
docs/results/position-rule.md):

- **a product of experts over the cells** (``classifier_weight`` a > 0): each cell's target
  probability from the head is multiplied by ``exp(a (s - s_max))``, ``s`` the classifier's score
  at the cell's point (bilinear on its score map), ``s_max`` the map's peak: both scores read as
  unnormalised log densities of where the target is (the EBM view); the product, scaled to the
  head's peak probability, is ranked by NanoTrack's window and penalties as before;
- **no growth beside a look-alike** (``distractor_growth`` False): where the classifier's
  localisation found a second peak (status ``hard_negative`` or ``uncertain``), the size may
  shrink but not grow: a box that covers the target and a neighbour only ever grows;
- **the classifier's scale evidence** (box mode ``siamese-scale``, which crops the classifier's
  regions at ``scale_factors`` too): the head's change of scale (the geometric mean of its sides'
  ratios) is kept only as far as it goes the way the classifier's best scale goes, and no
  further: clipped to the interval between 1 and that scale, the aspect ratio the head's.

The classifier's training samples and the next search region follow the box this rule keeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ebmtrack.lite.result import TrackStatus

__all__ = ["ClassifierEvidence", "PositionRuleConfig", "bounded_size", "classifier_prior"]

DISTRACTED = (TrackStatus.HARD_NEGATIVE, TrackStatus.UNCERTAIN)
"""The statuses of a frame whose classifier saw a second, target-like peak."""


@dataclass(frozen=True)
class PositionRuleConfig:
    """How the classifier's evidence bounds the siamese head's box (module docstring).

    Attributes:
        classifier_weight: ``a`` of the product of experts, the classifier's score's weight as a
            log density on the siamese cells (>= 0; 0, the default: the head alone picks its
            cell; no weight beat it on held-out and look-alike clips,
            docs/results/position-rule.md).
        distractor_growth: whether the size may grow in a frame where the classifier saw a
            second peak.
    """

    classifier_weight: float = 0.0
    distractor_growth: bool = True

    def __post_init__(self) -> None:
        weight = self.classifier_weight
        if isinstance(weight, bool) or not (
            isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0
        ):
            raise ValueError(f"classifier_weight must be a number >= 0, got {weight!r}")
        if not isinstance(self.distractor_growth, bool):
            raise ValueError(
                f"distractor_growth must be true or false, got {self.distractor_growth!r}"
            )


@dataclass(frozen=True)
class ClassifierEvidence:
    """What the classifier said of a frame, for the box rule: its raw ``scores`` (H, W) on the
    search region whose cell (i, j) sits at crop px (j, i) * ``stride``, the region's 2x3 frame
    -> crop ``matrix``, the localisation's ``status``, and ``scale``, the size factor at which
    the classifier fits best where the frame searched scale (else None)."""

    scores: np.ndarray
    matrix: np.ndarray
    stride: float
    status: TrackStatus
    scale: float | None = None


def sample_bilinear(scores: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Bilinear values of ``scores`` (H, W) at map coordinates ``u`` (columns), ``v`` (rows),
    both (N,), clamped to the map."""
    height, width = scores.shape
    u = np.clip(u, 0.0, width - 1.0)
    v = np.clip(v, 0.0, height - 1.0)
    u0 = np.minimum(np.floor(u).astype(np.int64), max(width - 2, 0))
    v0 = np.minimum(np.floor(v).astype(np.int64), max(height - 2, 0))
    du, dv = u - u0, v - v0
    u1, v1 = np.minimum(u0 + 1, width - 1), np.minimum(v0 + 1, height - 1)
    top = scores[v0, u0] * (1 - du) + scores[v0, u1] * du
    bottom = scores[v1, u0] * (1 - du) + scores[v1, u1] * du
    return top * (1 - dv) + bottom * dv


def classifier_prior(
    evidence: ClassifierEvidence, weight: float
) -> Callable[[np.ndarray], np.ndarray] | None:
    """The classifier's factor on the siamese cells: frame points (N, 2) -> (N,)
    ``exp(weight (s - s_max))``; None for ``weight`` 0 (the head alone)."""
    if weight == 0:
        return None
    scores = np.asarray(evidence.scores, dtype=np.float64)
    peak = float(scores.max())
    matrix = np.asarray(evidence.matrix, dtype=np.float64)

    def prior(points: np.ndarray) -> np.ndarray:
        crop = points @ matrix[:, :2].T + matrix[:, 2]
        values = sample_bilinear(scores, crop[:, 0] / evidence.stride, crop[:, 1] / evidence.stride)
        return np.exp(weight * (values - peak))

    return prior


def bounded_size(
    size: np.ndarray, last: np.ndarray, evidence: ClassifierEvidence, config: PositionRuleConfig
) -> np.ndarray:
    """The size (2,) the rule keeps of the head's ``size`` (2,) after ``last`` (2,): its change
    of scale within the classifier's (where ``evidence.scale`` says one), and no side grown in a
    distracted frame unless ``distractor_growth``."""
    if evidence.scale is not None:
        change = math.sqrt(float(size[0] * size[1]) / float(last[0] * last[1]))
        kept = min(max(change, min(1.0, evidence.scale)), max(1.0, evidence.scale))
        size = size * (kept / change)
    if config.distractor_growth or evidence.status not in DISTRACTED:
        return size
    return np.minimum(size, last)
