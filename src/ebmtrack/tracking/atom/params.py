"""Every parameter of the ATOM tracker in one dataclass, with the paper's and reference's values."""

from __future__ import annotations

from dataclasses import dataclass

from ebmtrack.models.precision import PRECISIONS
from ebmtrack.tracking.params import SearchRegionParams, check_ranges

__all__ = ["AtomParams"]


@dataclass(frozen=True)
class AtomParams(SearchRegionParams):
    """Parameters of :class:`~ebmtrack.tracking.atom.AtomTracker`: the shared ones of
    :class:`~ebmtrack.tracking.params.SearchRegionParams` (whose defaults are ATOM's) and these.

    Defaults follow the ATOM paper (section 3.3) and the reference implementation's
    ``parameter/atom/default.py``; docs/atom.md lists where the two disagree and what we chose.

    Features:
        precision: dtype of the backbone (eager runtime) and of the filter update's matrix
            products: ``float32``, ``bfloat16`` (8 significant bits, float32 accumulation; the
            heads and the optimisation stay float32) or ``auto``: bfloat16 exactly on CPUs with
            native bfloat16 instructions, where it is 1.5x (backbone) to 3x (update) faster
            (:func:`~ebmtrack.models.precision.fast_dtype`; docs/atom.md for its accuracy).

    Classifier (eq. 2-3):
        projection_dim, filter_size, pelu_alpha, filter_reg, projection_reg: see
            :class:`~ebmtrack.models.atom_classifier.ClassifierConfig`.
        sigma_factor: label std = sigma_factor * sqrt(target area) in score cells.
        init_gn_iters, init_cg_iters: first-frame Gauss-Newton and CG (per GN) iterations.
        update_cg_iters: CG iterations of each filter update.

    Box estimation (IoU-Net):
        use_iou_net: refine the box with the IoU predictor; if False only the position moves.
        iou_steps, iou_step_length: gradient-ascent steps and their length (times w, h).
        iou_top_k: boxes averaged at the end.
        iou_accept_margin: ``None`` (ATOM): the IoU-Net's box is always taken. A number: the
            scale search below sets the size first, and the IoU-Net's box replaces the scale
            search's only where the mean predicted IoU of its ``iou_top_k`` best boxes exceeds
            the predicted IoU of the scale search's box by at least this margin (the network
            judges whether its refinement is better; needs ``scale_factors``).
        iou_box_feedback: True (ATOM): the IoU-Net's box becomes the tracker's state (the
            next frame's search region and size). False: it is only the box reported for the
            frame; the state follows the classifier and the scale search, so the head's errors
            never carry into the next frame (needs ``scale_factors``, which then size the
            state; ``iou_accept_margin`` may stay None: every refined box is reported).

    Scale search (not in the paper):
        scale_factors: besides the search region itself, crop it this many times wider (e.g.
            ``(1 / 1.05, 1.05)``) and run the classifier on all of them in one batch; the region
            whose score peak is highest gives the position, and the scale interpolated between
            the peaks (:func:`~ebmtrack.tracking.localize.best_scale`) a size change,
            taken at ``size_update_rate`` (the scale search of DSST / SiamFC). Empty: the size
            is kept (and refined by the IoU-Net when there is one). With an IoU-Net only
            together with ``iou_accept_margin``.
        scale_search_interval: search scale on every this many frames, starting with the
            first tracked one; the frames between run the usual search region alone (one
            backbone pass instead of ``1 + len(scale_factors)``). 1: every frame.
    """

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

    use_iou_net: bool = True
    iou_steps: int = 5
    iou_step_length: float = 1.0
    iou_top_k: int = 3
    iou_accept_margin: float | None = None
    iou_box_feedback: bool = True
    scale_factors: tuple[float, ...] = ()
    scale_search_interval: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ranges(
            self,
            positive_ints=(
                "projection_dim",
                "filter_size",
                "init_gn_iters",
                "init_cg_iters",
                "update_cg_iters",
                "iou_top_k",
                "scale_search_interval",
            ),
            non_negative_ints=("iou_steps",),
            positive=("sigma_factor", "pelu_alpha", "filter_reg", "projection_reg"),
        )
        factors = self.scale_factors
        if not all(isinstance(f, int | float) and 0 < f < 10 and f != 1 for f in factors):
            raise ValueError(
                f"scale_factors must be numbers in (0, 10) other than 1, got {factors!r}"
            )
        margin = self.iou_accept_margin
        if not isinstance(self.iou_box_feedback, bool):
            raise ValueError(
                f"iou_box_feedback must be true or false, got {self.iou_box_feedback!r}"
            )
        if not self.iou_box_feedback and not (self.use_iou_net and factors):
            raise ValueError(
                "iou_box_feedback=False needs use_iou_net=True and scale_factors: the scale"
                " search sizes the state, the IoU-Net's box is only reported"
            )
        if margin is not None:
            if not (isinstance(margin, int | float) and not isinstance(margin, bool)):
                raise ValueError(f"iou_accept_margin must be a number or None, got {margin!r}")
            if not (self.use_iou_net and factors):
                raise ValueError(
                    "iou_accept_margin needs use_iou_net=True and scale_factors: it chooses"
                    " between the IoU-Net's box and the scale search's"
                )
        elif factors and self.use_iou_net and self.iou_box_feedback:
            raise ValueError(
                "scale_factors with use_iou_net=True needs iou_accept_margin: without it the"
                " IoU-Net estimates the size"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
