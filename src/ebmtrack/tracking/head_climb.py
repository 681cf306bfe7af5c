"""A box head is climbed as what it was trained to score: a head trained with MSE predicts the
IoU of a box (ATOM's ascent, ``box_climb="iou"``), one trained with an EBM loss (NCE+, KL-IS,
...) scores an energy f(x, y) (DiMP-NCE+'s Algorithm S1, ``box_climb="ebm"``, ``dimp-nce+``'s
only climb). The head file records its loss (:func:`~ebmtrack.models.serialization.head_loss`);
:func:`check_head_climb` refuses a pairing that does not fit, in one line.

The one pairing across kinds that is taken: an EBM head under the IoU climb in the box modes
where the scale search tracks and the head's box is only reported (``polished``:
``atom-polished``'s shipped NCE+ head, climbed at the IoU step chosen with it) or taken behind a
margin (``gated``, measured so with that head). In ``refine`` the head's box is fed back as the
state every frame (``atom-iounet``): there an EBM head takes the EBM climb. A head that records
no loss (written before heads recorded it, and not a shipped file) is climbed as the tracker
says, with one warning.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ebmtrack.values import OptionError

__all__ = ["EBM_CLIMB_ONLY", "check_head_climb", "head_kind"]

logger = logging.getLogger(__name__)

EBM_CLIMB_ONLY = ("dimp-nce+",)  # trackers whose only climb is the EBM one
# The box modes that may climb an EBM head with the IoU climb: the scale search tracks.
IOU_CLIMB_OF_EBM_HEADS = ("polished", "gated")


def head_kind(loss: str | None) -> str | None:
    """``iou`` for a head trained with ``mse``, ``ebm`` for any other (EBM) loss, None when
    the loss is unknown."""
    if not loss:
        return None
    return "iou" if loss == "mse" else "ebm"


def check_head_climb(weights: str | Path, climb: str, box_mode: str, tracker: str) -> None:
    """Refuse (:class:`~ebmtrack.values.OptionError` on ``weights``, one line) the box head at
    ``weights`` when ``tracker`` would climb it as another kind of score than it was trained
    to give: ``climb`` is ``iou`` or ``ebm``, ``box_mode`` the tracker's."""
    from ebmtrack.models.serialization import head_loss

    loss = head_loss(weights)
    kind = head_kind(loss)
    fixed = tracker in EBM_CLIMB_ONLY
    if kind is None:
        what = "an energy (the EBM climb)" if climb == "ebm" else "a predicted IoU (the IoU climb)"
        logger.warning(
            "%s records no training loss (written before box heads recorded it): %s climbs it "
            "as %s; a head trained with mse takes box_climb=iou, one trained with an EBM loss "
            "box_climb=ebm",
            weights, tracker, what,
        )
        return
    if kind == "iou" and climb == "ebm":
        way = "" if fixed else " (or --option box_climb=iou)"
        raise OptionError(
            f"{weights} is a box head trained with {loss}: it predicts IoU, and {tracker} climbs "
            f"an energy f(x, y) (box_climb=ebm); give a head trained with an EBM loss (nce+, "
            f"kld-is, ...){way}",
            "weights",
        )
    if kind == "ebm" and climb == "iou" and box_mode not in IOU_CLIMB_OF_EBM_HEADS:
        raise OptionError(
            f"{weights} is a box head trained with {loss}: it scores an energy f(x, y), not "
            f"IoU, and {tracker} climbs a predicted IoU (box_climb=iou) in box_mode "
            f"{box_mode!r}; climb it as an energy with --option box_climb=ebm, or give a head "
            "trained with mse",
            "weights",
            "box_climb",
        )
