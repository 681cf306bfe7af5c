"""Every parameter of the DiMP-NCE+ tracker in one dataclass, with the reference's values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ebmtrack.tracking.dimp.box import BOX_ESTIMATORS, BOX_MODES
from ebmtrack.tracking.ebm_refine import STEP_RULES
from ebmtrack.tracking.params import SearchRegionParams, mode_fields
from ebmtrack.values import OptionError

__all__ = ["BOX_MODES", "STEP_RULES", "DiMPParams"]


@dataclass(frozen=True)
class DiMPParams(SearchRegionParams):
    """Parameters of :class:`~ebmtrack.tracking.dimp.DiMPTracker`: the shared ones of
    :class:`~ebmtrack.tracking.params.SearchRegionParams` and these.

    Defaults are pytracking's ``parameter/dimp/dimp50.py`` for the classifier side and
    ``super_dimp.py`` (the DiMP-KLD-IS / DiMP-NCE+ recipe, reference C.5) for the box refinement,
    except where noted; docs/dimp.md lists every difference and why.

    Shared parameters with other defaults than ATOM's:
        train_skipping: 20; memory_size: 50.
        aug_blur_sigmas, aug_rotations, aug_dropout: 3 blurs, 4 rotations and 2 dropout copies
            (15 first-frame samples: 1 + 4 shifts + flip + 3 blurs + 4 rotations + 2 dropouts).
        size_update_rate: 0.4, the best of 1, 0.6, 0.4, 0.2 on a validation fold with a head
            trained without it (docs/results/tracking.md), and pysot's default for Siamese
            trackers (1 is the paper's tracker).
        (search_area_scale stays ATOM's 5: dimp50 uses 5, super_dimp 6, and the shipped heads
        were trained on 5x crops.)

    Classifier (DiMP's model optimizer, run online):
        init_iters: optimizer steps on the first frame's samples (``net_opt_iter`` 10).
        update_iters: steps of a scheduled update (``net_opt_update_iter`` 2).
        hard_negative_iters: steps right after a hard-negative frame (``net_opt_hn_iter`` 1).

    Box refinement (the EBM head, gradient ascent on f(x, y) in y = (cx / w0, cy / h0, log w,
    log h) with (w0, h0) the classifier box's size, :mod:`ebmtrack.tracking.ebm_refine`):
        box_mode: ``refine`` (the box head refines the box) or ``position`` (only the position
            moves and the size is kept; the box fields below then keep their defaults).
        box_steps: iterations T (reference 10; 5 here: the same tracking AUC on the training
            sequences at about 1.3x the frame rate, docs/dimp.md).
        box_step_length: lambda for the centre and the log-size coordinates alike (2.5e-3, the
            reference's ``box_refinement_step_length``).
        box_step_rule: ``s1``: Algorithm S1 of the paper's appendix, a step is kept only where f
            increases, otherwise that box's lambda is multiplied by ``box_step_decay``; ``fixed``:
            the reference tracker's rule, every step taken (``box_refinement_step_decay`` 1).
        box_step_decay: eta of S1 (0.5, the paper's value for detection, appendix C.1).
        box_top_k: boxes averaged at the end, by f (3).
    """

    train_skipping: int = 20
    memory_size: int = 50
    aug_blur_sigmas: tuple[tuple[float, float], ...] = ((3, 1), (1, 3), (2, 2))
    aug_rotations: tuple[float, ...] = (10, -10, 45, -45)
    aug_dropout: tuple[int, float] = (2, 0.2)
    size_update_rate: float = 0.4

    init_iters: int = 10
    update_iters: int = 2
    hard_negative_iters: int = 1

    box_mode: str = "refine"
    box_steps: int = 5
    box_step_length: float = 2.5e-3
    box_step_rule: str = "s1"
    box_step_decay: float = 0.5
    box_top_k: int = 3

    box_modes: ClassVar[tuple[str, ...]] = BOX_MODES
    head_modes: ClassVar[tuple[str, ...]] = tuple(
        mode for mode, kind in BOX_ESTIMATORS.items() if kind.needs_head
    )
    mode_fields: ClassVar[dict[str, tuple[str, ...]]] = mode_fields(BOX_ESTIMATORS)
    renamed: ClassVar[dict[str, str]] = {
        "use_box_head": "box_mode ('refine' with the box head, 'position' without)"
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_box_mode()
        if self.box_step_rule not in STEP_RULES:
            raise OptionError(
                f"box_step_rule must be one of {', '.join(STEP_RULES)}, got {self.box_step_rule!r}",
                "box_step_rule",
            )
