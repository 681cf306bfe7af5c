"""Every parameter of the DiMP-NCE+ tracker in one dataclass, with the reference's values."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ebmtrack.tracking.atom.augment import num_augmented_crops
from ebmtrack.tracking.atom.params import check_tracker_params

__all__ = ["STEP_RULES", "DiMPParams"]

STEP_RULES = ("s1", "fixed")
"""Box-refinement step rules: ``s1`` (the paper's Algorithm S1) and ``fixed`` (the reference
tracker's plain steps)."""


@dataclass(frozen=True)
class DiMPParams:
    """Parameters of :class:`~ebmtrack.tracking.dimp.DiMPTracker`.

    Defaults are pytracking's ``parameter/dimp/dimp50.py`` for the classifier side and
    ``super_dimp.py`` (the DiMP-KLD-IS / DiMP-NCE+ recipe, reference C.5) for the box refinement,
    except where noted; docs/dimp.md lists every difference and why.

    Search region and features:
        backbone: backbone name (MobileNetV2 on the CPU; the paper uses ResNet-50).
        backbone_runtime: ``torch`` (eager) or ``onnx`` (ONNX Runtime on the CPU).
        device: torch device, ``cpu`` or ``cuda[:N]``.
        search_area_scale: side of the square search region / sqrt(target area) (dimp50: 5;
            super_dimp: 6; 5 here because the shipped heads were trained on 5x crops).
        search_size: side in pixels the region is resized to (18 * 16 = 288).
        score_upsample: bicubic upsampling of the score map before taking its peak (ours: the
            reference takes the peak of the raw 16-pixel cells; upsampling costs < 1 ms).

    Classifier (DiMP's model optimizer, run online):
        init_iters: optimizer steps on the first frame's samples (``net_opt_iter`` 10).
        update_iters: steps of a scheduled update (``net_opt_update_iter`` 2).
        hard_negative_iters: steps right after a hard-negative frame (``net_opt_hn_iter`` 1).
        train_skipping: a scheduled update every this many frames (20).
        memory_size: capacity of the sample memory (50).
        learning_rate, hard_negative_learning_rate: weight of a new sample (0.01, 0.02).
        init_samples_minimum_weight: the first-frame samples never weigh less in total (0.25).

    First-frame augmentation (15 samples: 1 + 4 shifts + flip + 3 blurs + 4 rotations + 2
    dropouts), the same transforms as ATOM's (:mod:`ebmtrack.tracking.atom.augment`):
        aug_relative_shift: the four shifts are (+-s, +-s) * search_size / 2.
        aug_random_shift_factor: flip, blur and rotation samples are shifted by U(+-f/2) *
            search_size.
        aug_blur_sigmas: (sigma_y, sigma_x) pairs in crop pixels.
        aug_rotations: angles in degrees.
        aug_flip: add the horizontally flipped sample.
        aug_dropout: (copies, probability) of channel dropout on the first sample's
            classification features.

    Localisation (as ATOM, reference B.1):
        target_not_found_threshold: below this max score the target is lost (no update).
        distractor_threshold, hard_negative_threshold: second peak / first peak ratios.
        target_neighborhood_scale: area around the first peak masked before the second search,
            in target sizes.
        displacement_scale: peaks farther than this * search_size / 2 from the centre are far.
        update_scale_when_uncertain: refine the box in ``uncertain`` frames too.
        size_update_rate: fraction of a refined size change taken per frame, in log space
            (:func:`~ebmtrack.tracking.atom.refine.blend_size`; 1 is the paper's tracker). 0.4
            here: the best of 1, 0.6, 0.4, 0.2 on a validation fold with a head trained without
            it (docs/results/tracking.md), and pysot's default for Siamese trackers.

    Box refinement (the EBM head, gradient ascent on f(x, y) in y = (cx / w0, cy / h0, log w,
    log h) with (w0, h0) the classifier box's size, :mod:`ebmtrack.tracking.dimp.refine`):
        use_box_head: refine the box; if False only the position moves and the size is kept.
        num_random_proposals: random boxes added to the classifier's box (9).
        proposal_center_jitter, proposal_size_jitter: uniform noise widths in sqrt(w h)
            (0.1, 0.5).
        box_steps: iterations T (reference 10; 5 here: the same tracking AUC on the training
            sequences at about 1.3x the frame rate, docs/dimp.md).
        box_step_length: lambda for (centre, log-size) coordinates (2.5e-3 each, the reference's
            ``box_refinement_step_length``).
        box_step_rule: ``s1``: Algorithm S1 of the paper's appendix, a step is kept only where f
            increases, otherwise that box's lambda is multiplied by ``box_step_decay``; ``fixed``:
            the reference tracker's rule, every step taken (``box_refinement_step_decay`` 1).
        box_step_decay: eta of S1 (0.5, the paper's value for detection, appendix C.1).
        box_top_k: boxes averaged at the end, by f (3).
        max_aspect_ratio: boxes with w/h or h/w above are discarded (6).
        min_target_size: w and h never go below this (or the initial size if smaller), px.

    Other:
        seed: seed of the tracker's random generators (augmentation, dropout, proposals).
    """

    backbone: str = "mobilenetv2"
    backbone_runtime: str = "torch"
    device: str = "cpu"
    search_area_scale: float = 5.0
    search_size: int = 288
    score_upsample: int = 4

    init_iters: int = 10
    update_iters: int = 2
    hard_negative_iters: int = 1
    train_skipping: int = 20
    memory_size: int = 50
    learning_rate: float = 0.01
    hard_negative_learning_rate: float = 0.02
    init_samples_minimum_weight: float = 0.25

    aug_relative_shift: float = 0.6
    aug_random_shift_factor: float = 1.0 / 3.0
    aug_blur_sigmas: tuple[tuple[float, float], ...] = ((3, 1), (1, 3), (2, 2))
    aug_rotations: tuple[float, ...] = (10, -10, 45, -45)
    aug_flip: bool = True
    aug_dropout: tuple[int, float] = (2, 0.2)

    target_not_found_threshold: float = 0.25
    distractor_threshold: float = 0.8
    hard_negative_threshold: float = 0.5
    target_neighborhood_scale: float = 2.2
    displacement_scale: float = 0.8
    update_scale_when_uncertain: bool = True
    size_update_rate: float = 0.4

    use_box_head: bool = True
    num_random_proposals: int = 9
    proposal_center_jitter: float = 0.1
    proposal_size_jitter: float = 0.5
    box_steps: int = 5
    box_step_length: tuple[float, float] = (2.5e-3, 2.5e-3)
    box_step_rule: str = "s1"
    box_step_decay: float = 0.5
    box_top_k: int = 3
    max_aspect_ratio: float = 6.0
    min_target_size: float = 10.0

    seed: int = 0

    def __post_init__(self) -> None:
        check_tracker_params(
            self,
            positive_ints=("score_upsample", "train_skipping", "box_top_k"),
            non_negative_ints=(
                "init_iters",
                "update_iters",
                "hard_negative_iters",
                "num_random_proposals",
                "box_steps",
            ),
            positive=("search_area_scale", "max_aspect_ratio", "min_target_size"),
        )
        if self.box_step_rule not in STEP_RULES:
            raise ValueError(
                f"box_step_rule must be one of {', '.join(STEP_RULES)}, got {self.box_step_rule!r}"
            )
        if len(self.box_step_length) != 2 or not all(v > 0 for v in self.box_step_length):
            raise ValueError(
                f"box_step_length must be two positive numbers (centre, size), "
                f"got {self.box_step_length!r}"
            )
        if not 0 < self.box_step_decay <= 1:
            raise ValueError(f"box_step_decay must be in (0, 1], got {self.box_step_decay!r}")
        copies, probability = self.aug_dropout
        if copies < 0 or not 0 <= probability < 1:
            raise ValueError(
                f"aug_dropout must be (copies >= 0, p in [0, 1)), got {self.aug_dropout}"
            )
        first_frame = num_augmented_crops(self) + copies
        if self.memory_size <= first_frame:
            raise ValueError(
                f"memory_size must exceed the {first_frame} first-frame samples, "
                f"got {self.memory_size}"
            )

    @classmethod
    def names(cls) -> list[str]:
        """The parameter names, for option checking."""
        return [f.name for f in fields(cls)]
