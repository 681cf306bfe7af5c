"""The refinement test of a box head: perturb ground-truth boxes, let the head refine them, score.

On frames of held-out sequences a ground-truth box is perturbed, the tracker's search region is
cut around the perturbed box (as the tracker cuts it around its previous estimate) and the head,
conditioned on the sequence's first frame, refines the box. Two ways to perturb
(:class:`RefinementConfig`): a Gaussian shift and scale (:func:`perturb_box`), or a random
direction scaled to an IoU with the truth drawn uniformly from a range, like a detector's errors
(:func:`perturb_box_to_iou`). Two ways to refine: the tracker's box estimation (:func:`refine`:
random proposals, ATOM's gradient ascent, mean of the best three) and the BMVC 2020 paper's
prediction (:func:`ebm_refine`: Algorithm S1 from the box alone, in the EBM's box
parametrisation). Used by ``default_model.py`` and
``box_regression.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from ebmtrack.data.datasets.sequence import Sequence
from ebmtrack.ebm.sampling import gradient_ascent
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.ops.boxes import box_convert, iou_xywh
from ebmtrack.ops.crop import box_to_crop, crop_search_region
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.atom.refine import ascend_iou
from ebmtrack.tracking.box_refine import jitter_proposals, select_box
from ebmtrack.training.box_regression import BoxConditioning, BoxEnergy


@dataclass(frozen=True)
class RefinementConfig:
    """How the refinement test picks frames and perturbs boxes.

    Attributes:
        frames_per_sequence: test frames per held-out sequence, evenly spaced after the first.
        center_sigma: std of the centre shift, in units of sqrt(w h) of the true box.
        scale_sigma: std of the log of each side's scale factor.
        seed: seed of the perturbations (and of the random proposals of the studies that use it).
        start_iou: when set, ``(low, high)``: each start box has an IoU with the truth drawn
            uniformly from this range (:func:`perturb_box_to_iou`) instead of the Gaussian
            perturbation of ``center_sigma`` and ``scale_sigma``.
        frame_offset: shifts the frames by this fraction of their spacing (0.5 picks the frames
            half-way between those of offset 0, e.g. a tuning set disjoint from the test set);
            frames beyond the sequence's end are dropped.
    """

    frames_per_sequence: int = 40
    center_sigma: float = 0.1
    scale_sigma: float = 0.15
    seed: int = 0
    start_iou: tuple[float, float] | None = None
    frame_offset: float = 0.0

    def __post_init__(self) -> None:
        if self.start_iou is not None and not 0 < self.start_iou[0] <= self.start_iou[1] < 1:
            raise ValueError(
                f"start_iou must be (low, high) with 0 < low <= high < 1, got {self.start_iou}"
            )
        if not 0 <= self.frame_offset < 1:
            raise ValueError(f"frame_offset must be in [0, 1), got {self.frame_offset}")


@dataclass
class RefinementSamples:
    """One held-out sequence prepared for the refinement test (everything in crop pixels).

    Attributes:
        name: the sequence.
        ref_feats: backbone features of the first frame's crop, [(1, C1, H1, W1), (1, C2, ...)].
        ref_box: (1, 4) the first frame's box in its crop.
        test_feats: features of the N test crops, [(N, C1, H1, W1), (N, C2, H2, W2)].
        start_boxes: (N, 4) the perturbed boxes, where refinement starts.
        true_boxes: (N, 4) the ground truth.
    """

    name: str
    ref_feats: list[Tensor]
    ref_box: Tensor
    test_feats: list[Tensor]
    start_boxes: Tensor
    true_boxes: Tensor


def perturb_box(
    box: np.ndarray, center_sigma: float, scale_sigma: float, rng: np.random.Generator
) -> np.ndarray:
    """``box`` (4,) xywh with its centre moved by N(0, center_sigma sqrt(w h)) per axis and each
    side scaled by exp(N(0, scale_sigma))."""
    box = np.asarray(box, dtype=np.float64)
    center = (
        box[:2] + box[2:] / 2 + rng.standard_normal(2) * center_sigma * math.sqrt(box[2] * box[3])
    )
    size = box[2:] * np.exp(rng.standard_normal(2) * scale_sigma)
    return np.concatenate([center - size / 2, size])


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two xywh boxes (float64)."""
    width = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    height = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    inter = max(width, 0.0) * max(height, 0.0)
    return float(inter / (a[2] * a[3] + b[2] * b[3] - inter))


def perturb_box_to_iou(
    box: np.ndarray, target_iou: float, rng: np.random.Generator, tolerance: float = 1e-6
) -> np.ndarray:
    """A box whose IoU with ``box`` (4,) xywh is ``target_iou`` (to ``tolerance``).

    A random unit direction ``d`` in (centre shift in units of sqrt(w h), log w, log h) is drawn;
    the box moved by ``t d`` has IoU 1 at ``t = 0`` and tends to 0 as ``t`` grows, so ``t`` is
    bracketed by doubling and found by bisection (continuity guarantees a crossing).
    """
    if not 0 < target_iou < 1:
        raise ValueError(f"target_iou must be in (0, 1), got {target_iou}")
    box = np.asarray(box, dtype=np.float64)
    direction = rng.standard_normal(4)
    direction /= np.linalg.norm(direction)
    scale = math.sqrt(box[2] * box[3])

    def moved(t: float) -> np.ndarray:
        center = box[:2] + box[2:] / 2 + t * direction[:2] * scale
        size = box[2:] * np.exp(t * direction[2:])
        return np.concatenate([center - size / 2, size])

    low, high = 0.0, 0.1
    while _iou(box, moved(high)) > target_iou:
        low, high = high, 2 * high
    while True:
        mid = (low + high) / 2
        overlap = _iou(box, moved(mid))
        if abs(overlap - target_iou) <= tolerance:
            return moved(mid)
        low, high = (mid, high) if overlap > target_iou else (low, mid)


def _search_crop(
    frame: np.ndarray, around: np.ndarray, boxes: list[np.ndarray], params: AtomParams
) -> tuple[Tensor, list[np.ndarray]]:
    """The tracker's search region centred on ``around`` (xywh) and ``boxes`` mapped into it."""
    patch, matrix = crop_search_region(frame, around, params.search_area_scale, params.search_size)
    image = torch.from_numpy(np.ascontiguousarray(patch)).permute(2, 0, 1).float()
    return image, [box_to_crop(box, matrix) for box in boxes]


def refinement_frames(num_frames: int, config: RefinementConfig) -> np.ndarray:
    """Indices into ``num_frames`` candidate frames: ``config.frames_per_sequence`` evenly spaced,
    shifted by ``config.frame_offset`` spacings (those past the end dropped)."""
    count = min(config.frames_per_sequence, num_frames)
    positions = np.linspace(0, num_frames - 1, count)
    if config.frame_offset:
        positions = positions + config.frame_offset * (num_frames - 1) / max(count - 1, 1)
        positions = positions[positions <= num_frames - 1]
    return positions.astype(int)


@torch.no_grad()
def refinement_samples(
    sequence: Sequence,
    backbone,
    layers: tuple[str, str],
    config: RefinementConfig,
    params: AtomParams,
) -> RefinementSamples:
    """Crops and features of ``sequence`` for the refinement test (see the module docstring)."""
    rng = np.random.default_rng([config.seed, *map(ord, sequence.name)])
    usable = np.flatnonzero(sequence.annotated())
    first, rest = int(usable[0]), usable[1:]
    picks = rest[refinement_frames(len(rest), config)]
    init = sequence.ground_truth[first]
    ref_image, (ref_box,) = _search_crop(sequence.frame(first), init, [init], params)
    images, starts, truths = [], [], []
    for index in picks:
        truth = sequence.ground_truth[index]
        if config.start_iou is None:
            start = perturb_box(truth, config.center_sigma, config.scale_sigma, rng)
        else:
            start = perturb_box_to_iou(truth, rng.uniform(*config.start_iou), rng)
        image, (start_crop, truth_crop) = _search_crop(
            sequence.frame(int(index)), start, [start, truth], params
        )
        images.append(image)
        starts.append(start_crop)
        truths.append(truth_crop)
    feats = backbone(torch.stack([ref_image, *images]), layers)
    feats = [feats[name] for name in layers]
    return RefinementSamples(
        sequence.name,
        [f[:1] for f in feats],
        torch.as_tensor(ref_box, dtype=torch.float32)[None],
        [f[1:] for f in feats],
        torch.as_tensor(np.stack(starts), dtype=torch.float32),
        torch.as_tensor(np.stack(truths), dtype=torch.float32),
    )


def refine(
    iou_net: AtomIoUNet, samples: RefinementSamples, params: AtomParams, seed: int = 0
) -> Tensor:
    """The tracker's box estimation from each start box: (N, 4) refined boxes (the start box
    where no candidate has an acceptable aspect ratio)."""
    iou_net = iou_net.eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        modulation = iou_net.modulation(samples.ref_feats, samples.ref_box)
    refined = []
    for k, start in enumerate(samples.start_boxes):
        with torch.no_grad():
            test = iou_net.test_features([f[k : k + 1] for f in samples.test_feats])
        proposals = jitter_proposals(
            start,
            params.num_random_proposals,
            params.proposal_center_jitter,
            params.proposal_size_jitter,
            generator,
        )
        boxes, scores = ascend_iou(
            iou_net, modulation, test, proposals, params.box_steps, params.box_step_length
        )
        box = select_box(boxes, scores, params.box_top_k, params.max_aspect_ratio)
        refined.append(start if box is None else box)
    return torch.stack(refined)


class _StepScaledEnergy(nn.Module):
    """``f(x, z * scale)`` with one ``scale`` (M,) per candidate: gradient ascent in ``z`` with
    step length 1 moves ``y = z * scale`` by ``scale^2 * grad_y f``, so the candidates of one
    Algorithm S1 run each follow their own step length ``scale^2`` (accepting and decaying in
    ``z`` is the same as in ``y``)."""

    def __init__(self, energy: nn.Module, scale: Tensor):
        super().__init__()
        self.energy = energy
        self.register_buffer("scale", scale)

    def forward(self, x: BoxConditioning, z: Tensor) -> Tensor:
        return self.energy(x, z * self.scale[None, :, None])


def ebm_refine(
    iou_net: AtomIoUNet,
    samples: RefinementSamples,
    step_lengths: list[float] | tuple[float, ...],
    num_iters: int = 10,
    decay: float = 0.5,
) -> Tensor:
    """The BMVC paper's prediction (appendix C.1): Algorithm S1 on the head's output from each
    start box alone, once per step length, in the box parametrisation of the EBM losses
    (:func:`~ebmtrack.ops.boxes.box_convert`) normalised by the start box's size
    (the truth is unknown at test time). The head's test features are computed once for all step
    lengths. Returns (N, G, 4) refined xywh boxes, G = ``len(step_lengths)``."""
    lengths = torch.as_tensor(step_lengths, dtype=torch.float32)
    if lengths.ndim != 1 or len(lengths) < 1 or bool((lengths <= 0).any()):
        raise ValueError(f"step_lengths must be positive values, got {step_lengths}")
    iou_net = iou_net.eval()
    starts = samples.start_boxes
    with torch.no_grad():
        modulation = iou_net.modulation(samples.ref_feats, samples.ref_box)
        modulation = [m.expand(len(starts), -1) for m in modulation]
        test = iou_net.test_features(samples.test_feats)
    size_norm = starts[:, 2:]
    x = BoxConditioning(modulation, test, size_norm)
    scale = lengths.sqrt()
    y_start = box_convert(starts[:, None], "xywh", "ebm", size_norm)  # (N, 1, 4)
    z_start = y_start.expand(-1, len(lengths), -1) / scale[None, :, None]
    energy = _StepScaledEnergy(BoxEnergy(iou_net), scale)
    z, _ = gradient_ascent(energy, x, z_start, num_iters, 1.0, decay)
    return box_convert(z * scale[None, :, None], "ebm", "xywh", size_norm)


def overlap_scores(start: Tensor, refined: Tensor, truth: Tensor) -> dict[str, float]:
    """How refinement moved (N, 4) ``start`` boxes to ``refined`` ones, against ``truth``.

    Returns mean IoU before and after, the share of boxes improved, the shares above IoU 0.5 and
    0.75 after (``above_50``, ``above_75``: the AP50 / AP75 analogue), ``num_boxes`` and every
    box's IoU after (``ious_after``, for paired comparisons between heads).
    """
    before, after = iou_xywh(start, truth), iou_xywh(refined, truth)
    return {
        "iou_before": float(before.mean()),
        "iou_after": float(after.mean()),
        "improved": float((after > before).float().mean()),
        "above_50": float((after > 0.5).float().mean()),
        "above_75": float((after > 0.75).float().mean()),
        "num_boxes": int(before.numel()),
        "ious_after": [round(float(v), 5) for v in after],
    }


def refinement_scores(
    iou_net: AtomIoUNet, sets: list[RefinementSamples], params: AtomParams, seed: int = 0
) -> dict[str, float]:
    """:func:`overlap_scores` of :func:`refine` over all samples."""
    refined = [refine(iou_net, samples, params, seed) for samples in sets]
    return overlap_scores(
        torch.cat([s.start_boxes for s in sets]),
        torch.cat(refined),
        torch.cat([s.true_boxes for s in sets]),
    )


def paired_difference(first: list[float], second: list[float]) -> tuple[float, float]:
    """Mean and standard error of ``first - second`` over the same boxes."""
    diff = np.asarray(first) - np.asarray(second)
    return float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(len(diff)))
