"""From a frame pair to a training sample of the target-estimation network (ATOM, BMVC 2020).

Both frames are cut into square crops of ``search_area_factor`` times the target's size (side
``factor * sqrt(w * h)`` of the jittered box, the function the trackers crop with:
:func:`~ebmtrack.ops.crop.search_region_side`; replicate padding), resized to ``output_size``.
The reference crop is centred on the target; the test crop's box is jittered in
centre and scale first, so that the target is off-centre and of varying size, as in tracking.
Candidate boxes are then drawn around the test box:

- ``"iou"`` (ATOM): Gaussian perturbations with IoU above ``proposal_min_iou``, the network's
  regression target being IoU mapped to [-1, 1];
- ``"gmm"`` (EBM losses, PrDiMP / DiMP-KLD-IS / NCE): samples of a Gaussian-mixture noise
  distribution over offsets in the parametrisation (cx / w0, cy / h0, log w, log h), where
  (w0, h0) is the test box's size, with their log-densities under the noise (proposal)
  distribution q and under the label-noise model p.

Output of :meth:`AtomProcessing.__call__`, a dict of tensors that PyTorch's default collate
stacks into a batch (S = output_size, M = num_proposals; boxes are x, y, w, h in crop pixels):

- ``ref_image``, ``test_image`` (3, S, S): float32 RGB in [0, 255] (not normalised);
- ``ref_box``, ``test_box`` (4,): the target in each crop;
- ``proposals`` (M, 4): candidate boxes in the test crop;
- ``proposal_iou`` (M,): 2 * IoU(proposal, test_box) - 1, in [-1, 1];
- ``proposal_log_density`` (M,), "gmm" only: log q(offset) under the noise mixture;
- ``gt_log_density`` (M,), "gmm" only: log p(offset) under the label noise N(0, gt_sigma^2).

:class:`DiMPProcessing` does the same cropping for the several training and test frames of a
:class:`~ebmtrack.data.sampler.FrameSet` (DiMP's target classifier).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import torch
from torch import Tensor

from ebmtrack.data.sampler import FramePair, FrameSet
from ebmtrack.ebm.noise import GaussianMixtureNoise
from ebmtrack.ops.boxes import box_convert, iou_xywh, perturb_boxes
from ebmtrack.ops.crop import box_to_crop, crop_search_region

PROPOSAL_MODES = ("iou", "gmm")


def jitter_box(
    box: np.ndarray, center_factor: float, scale_factor: float, rng: np.random.Generator
) -> np.ndarray:
    """ATOM's box jitter: size times exp(scale_factor * N(0, 1)) per side, then the centre moved
    by U(-1/2, 1/2) * center_factor * sqrt(new w * new h) per axis. Returns (4,) xywh."""
    box = np.asarray(box, dtype=np.float64)
    size = box[2:] * np.exp(rng.standard_normal(2) * scale_factor)
    max_offset = math.sqrt(float(np.prod(size))) * center_factor
    center = box[:2] + 0.5 * box[2:] + max_offset * (rng.random(2) - 0.5)
    return np.concatenate([center - 0.5 * size, size])


def gmm_box_samples(
    box: Tensor,
    num: int,
    noise: GaussianMixtureNoise,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Boxes around ``box`` (4,) xywh drawn from ``noise`` (D = 4) over offsets
    (d cx / w0, d cy / h0, d log w, d log h), (w0, h0) the size of ``box``.

    Returns (num, 4) xywh boxes and the (num, 4) offsets they were made from.
    """
    offsets = noise.sample((num,), generator=generator).to(box.dtype)
    center_size = box_convert(box, "xywh", "cxcywh")
    size = center_size[2:]
    centers = center_size[:2] + offsets[:, :2] * size
    sizes = size * offsets[:, 2:].exp()
    return box_convert(torch.cat([centers, sizes], dim=-1), "cxcywh", "xywh"), offsets


def _noise_table(sigmas: tuple[tuple[float, float], ...]) -> list[list[float]]:
    """(centre, log-size) standard deviations per component -> a (K, 4) table."""
    return [[c, c, s, s] for c, s in sigmas]


def _to_tensor(patch: np.ndarray) -> Tensor:
    return torch.from_numpy(np.ascontiguousarray(patch)).permute(2, 0, 1).float()


def jittered_crop(
    frame: np.ndarray,
    box: np.ndarray,
    search_area_factor: float,
    output_size: int,
    center_jitter_factor: float,
    scale_jitter_factor: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Jitter ``box`` (:func:`jitter_box`) and cut a square of ``search_area_factor`` times the
    jittered box's size around its centre, resized to ``output_size`` (replicate padding).

    ``frame`` is RGB (H, W, 3) or grayscale (H, W) uint8. Returns the patch (S, S, 3) uint8, the
    (unjittered) target box in it (4,) and the (2, 3) map from frame to crop coordinates.
    """
    if frame.ndim == 2:
        frame = np.repeat(frame[:, :, None], 3, axis=2)
    jittered = jitter_box(box, center_jitter_factor, scale_jitter_factor, rng)
    patch, matrix = crop_search_region(frame, jittered, search_area_factor, output_size)
    return patch, box_to_crop(box, matrix), matrix


def color_jitter(
    patches: list[np.ndarray],
    grayscale_probability: float,
    brightness_jitter: float,
    rng: np.random.Generator,
) -> list[Tensor]:
    """All ``patches`` (S, S, 3) uint8 turned grayscale together with ``grayscale_probability``,
    then each multiplied by its own U(1 - b, 1 + b) and clamped: (3, S, S) float32 in [0, 255]."""
    if rng.random() < grayscale_probability:
        gray = [cv2.cvtColor(p, cv2.COLOR_RGB2GRAY) for p in patches]
        patches = [np.repeat(g[..., None], 3, axis=2) for g in gray]
    return [
        (_to_tensor(p) * float(rng.uniform(1 - brightness_jitter, 1 + brightness_jitter))).clamp(
            0, 255
        )
        for p in patches
    ]


@dataclass(frozen=True)
class JitteredCrops:
    """What both processings share: jittered crops of the frames and their colour jitter.

    Attributes:
        search_area_factor: crop side / sqrt(target area).
        output_size: side of the crops in pixels.
        center_jitter_factor: (reference or train, test) centre jitter, in units of
            sqrt(jittered area).
        scale_jitter_factor: (reference or train, test) std of the log-size jitter.
        grayscale_probability: all crops of a sample turn grayscale together with this
            probability.
        brightness_jitter: each crop is multiplied by U(1 - b, 1 + b) and clamped to [0, 255].
    """

    search_area_factor: float = 5.0
    output_size: int = 288
    center_jitter_factor: tuple[float, float] = (0.0, 4.5)
    scale_jitter_factor: tuple[float, float] = (0.0, 0.5)
    grayscale_probability: float = 0.05
    brightness_jitter: float = 0.2

    def __post_init__(self) -> None:
        if not self.search_area_factor > 0 or self.output_size < 1:
            raise ValueError(
                "search_area_factor and output_size must be positive, got "
                f"{self.search_area_factor}, {self.output_size}"
            )
        for name in ("grayscale_probability", "brightness_jitter"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("center_jitter_factor", "scale_jitter_factor"):
            if len(getattr(self, name)) != 2 or min(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be two numbers >= 0 (reference or train, test)")

    def crop(
        self, frame: np.ndarray, box: np.ndarray, which: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`jittered_crop` of ``box`` with the jitter of frame kind ``which`` (0 reference
        or train, 1 test): the patch (S, S, 3) uint8, the target's box in it (4,) and the (2, 3)
        map from frame to crop coordinates."""
        return jittered_crop(
            frame,
            box,
            self.search_area_factor,
            self.output_size,
            self.center_jitter_factor[which],
            self.scale_jitter_factor[which],
            rng,
        )

    def _color(self, patches: list[np.ndarray], rng: np.random.Generator) -> list[Tensor]:
        return color_jitter(patches, self.grayscale_probability, self.brightness_jitter, rng)


@dataclass(frozen=True)
class AtomProcessing(JitteredCrops):
    """Parameters of the pair processing; defaults are the ATOM training recipe (B.3).

    Attributes (besides those of :class:`JitteredCrops`):
        proposals: "iou" (ATOM, MSE on IoU) or "gmm" (EBM losses); see the module docstring.
        num_proposals: M; 16 for ATOM, 128 for the EBM losses (C.2, see :meth:`for_ebm`).
        proposal_min_iou: "iou": the least IoU of a proposal with the test box.
        proposal_sigma_factors: "iou": noise levels relative to sqrt(w * h), one drawn per box.
        gmm_sigmas: "gmm": per mixture component, the std of the (centre, log-size) offsets.
        gt_sigma: "gmm": the label-noise std of p, (centre, log-size).
        flip_probability: both crops are mirrored left-right together with this probability
            (0 in the reference ATOM code, 0.5 in the BMVC recipe).
    """

    proposals: str = "iou"
    num_proposals: int = 16
    proposal_min_iou: float = 0.1
    proposal_sigma_factors: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2, 0.3)
    gmm_sigmas: tuple[tuple[float, float], ...] = ((0.05, 0.05), (0.5, 0.5))
    gt_sigma: tuple[float, float] = (0.05, 0.05)
    flip_probability: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.proposals not in PROPOSAL_MODES:
            raise ValueError(f"proposals must be one of {PROPOSAL_MODES}, got {self.proposals!r}")
        if self.num_proposals < 1:
            raise ValueError(f"num_proposals must be positive, got {self.num_proposals}")
        if not 0 <= self.flip_probability <= 1:
            raise ValueError(f"flip_probability must be in [0, 1], got {self.flip_probability}")
        if not 0 <= self.proposal_min_iou < 1:
            raise ValueError(f"proposal_min_iou must be in [0, 1), got {self.proposal_min_iou}")

    @classmethod
    def for_ebm(cls, **changes) -> AtomProcessing:
        """The box-regression sampling of the EBM losses (C.2): 128 Gaussian-mixture samples."""
        return cls(**{"proposals": "gmm", "num_proposals": 128, **changes})

    def _candidates(self, box: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        if self.proposals == "iou":
            proposals, iou = perturb_boxes(
                box,
                self.num_proposals,
                self.proposal_min_iou,
                self.proposal_sigma_factors,
                generator=generator,
            )
            return {"proposals": proposals, "proposal_iou": 2 * iou - 1}
        noise = GaussianMixtureNoise(_noise_table(self.gmm_sigmas), dim=4)
        label_noise = GaussianMixtureNoise(_noise_table((self.gt_sigma,)), dim=4)
        proposals, offsets = gmm_box_samples(box, self.num_proposals, noise, generator)
        return {
            "proposals": proposals,
            "proposal_iou": 2 * iou_xywh(proposals, box) - 1,
            "proposal_log_density": noise.log_prob(offsets),
            "gt_log_density": label_noise.log_prob(offsets),
        }

    def __call__(self, pair: FramePair, rng: np.random.Generator) -> dict[str, Tensor]:
        """Process ``pair`` drawing every random choice from ``rng``; see the module docstring."""
        return self.group(pair.ref_frame, pair.ref_box, [(pair.test_frame, pair.test_box)], rng)[0]

    def group(
        self,
        ref_frame: np.ndarray,
        ref_box: np.ndarray,
        tests: list[tuple[np.ndarray, np.ndarray]],
        rng: np.random.Generator,
    ) -> list[dict[str, Tensor]]:
        """One sample per (test frame, box) of ``tests``, all with the same reference crop: its
        jitter, the flip and the grayscale choice are drawn once, each test crop's jitter,
        brightness and proposals of its own. With one test, exactly :meth:`__call__`'s draws."""
        ref_patch, ref_crop_box, _ = self.crop(ref_frame, ref_box, 0, rng)
        crops = [self.crop(frame, box, 1, rng)[:2] for frame, box in tests]
        patches, boxes = [c[0] for c in crops], [c[1] for c in crops]
        if rng.random() < self.flip_probability:
            ref_patch, patches = ref_patch[:, ::-1], [p[:, ::-1] for p in patches]
            for box in (ref_crop_box, *boxes):
                box[0] = self.output_size - box[0] - box[2]
        ref_image, *test_images = self._color([ref_patch, *patches], rng)
        ref_box_t = torch.as_tensor(ref_crop_box, dtype=torch.float32)
        samples = []
        for test_image, box in zip(test_images, boxes, strict=True):
            generator = torch.Generator().manual_seed(int(rng.integers(2**63)))
            test_box_t = torch.as_tensor(box, dtype=torch.float32)
            samples.append(
                {
                    "ref_image": ref_image,
                    "ref_box": ref_box_t,
                    "test_image": test_image,
                    "test_box": test_box_t,
                    **self._candidates(test_box_t, generator),
                }
            )
        return samples


@dataclass(frozen=True)
class DiMPProcessing(JitteredCrops):
    """From a :class:`~ebmtrack.data.sampler.FrameSet` to a training sample of DiMP's target
    classifier; defaults are DiMP-18/50's (``ltr/train_settings/dimp/dimp18.py``,
    ``DiMPProcessing`` in ``ltr/data/processing.py``, mode ``sequence``).

    Every frame gets its own jittered crop (:func:`jittered_crop`) with the training or the test
    frames' jitter, so the target is off-centre and rescaled, more so in the test frames. All
    crops of a sample turn grayscale together (probability ``grayscale_probability``), each is
    scaled by its own brightness factor. The Gaussian score labels are not made here: the
    training module makes them from the boxes at the score map's size
    (:func:`~ebmtrack.models.dimp.score_labels`).

    Output, a dict of tensors that PyTorch's default collate stacks into a batch (N training and
    M test frames, S = output_size; boxes are x, y, w, h in crop pixels):
    ``train_images`` (N, 3, S, S) and ``test_images`` (M, 3, S, S) float32 RGB in [0, 255],
    ``train_boxes`` (N, 4) and ``test_boxes`` (M, 4) float32.

    The attributes are those of :class:`JitteredCrops` (search area 5: an 18 x 18 stride-16
    map at 288 = 18 * 16), with DiMP's jitter of the training frames.
    """

    center_jitter_factor: tuple[float, float] = (3.0, 4.5)
    scale_jitter_factor: tuple[float, float] = (0.25, 0.5)

    def __call__(self, frame_set: FrameSet, rng: np.random.Generator) -> dict[str, Tensor]:
        """Process ``frame_set`` drawing every random choice from ``rng``."""
        patches, boxes = [], []
        for which, frames, frame_boxes in (
            (0, frame_set.train_frames, frame_set.train_boxes),
            (1, frame_set.test_frames, frame_set.test_boxes),
        ):
            for frame, box in zip(frames, frame_boxes, strict=True):
                patch, crop_box, _ = self.crop(frame, box, which, rng)
                patches.append(patch)
                boxes.append(crop_box)
        images = torch.stack(self._color(patches, rng))
        boxes_t = torch.as_tensor(np.stack(boxes), dtype=torch.float32)
        num_train = len(frame_set.train_frames)
        return {
            "train_images": images[:num_train],
            "train_boxes": boxes_t[:num_train],
            "test_images": images[num_train:],
            "test_boxes": boxes_t[num_train:],
        }
