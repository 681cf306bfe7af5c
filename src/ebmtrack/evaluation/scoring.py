"""Score result boxes against a data set's ground truth, with each benchmark's conventions.

Per sequence we keep the IoU of every scored frame and the success / precision curves; a tracker's
overall numbers average the curves over sequences (OTB / pytracking: "mean per sequence") and pool
the IoUs over all frames (GOT-10k's AO and SR). Runs are averaged: curves are averaged over runs,
and the pooled IoUs of all runs are concatenated (each run has the same frames, so pooled AO is
the mean of the runs' AOs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ebmtrack.data.datasets import Sequence
from ebmtrack.data.io import read_image
from ebmtrack.evaluation import metrics as M


@dataclass(frozen=True)
class Protocol:
    """How a benchmark scores a sequence.

    Attributes:
        name: the benchmark convention.
        skip_first_frame: exclude frame 1 (GOT-10k) instead of counting it with the prediction
            replaced by the ground truth (OTB, NFS, UAV123, LaSOT, VOT, TrackingNet).
        clip_to_image: cut both boxes to the image before the IoU (GOT-10k's ``bound``).
    """

    name: str
    skip_first_frame: bool = False
    clip_to_image: bool = False


OTB_PROTOCOL = Protocol("otb")
GOT10K_PROTOCOL = Protocol("got10k", skip_first_frame=True, clip_to_image=True)


def protocol_for(dataset: str) -> Protocol:
    """The scoring convention of a data-set layout name (see ``ebmtrack.data.datasets.LAYOUTS``)."""
    return GOT10K_PROTOCOL if dataset == "got10k" else OTB_PROTOCOL


@dataclass(frozen=True)
class Score:
    """Scores of one tracker on one sequence (or a pool of sequences), averaged over runs.

    Attributes:
        ious: IoUs of every scored frame of every run (pooled), for AO and SR.
        success: (21,) success curve at :data:`metrics.SUCCESS_THRESHOLDS`.
        precision: (51,) precision curve at :data:`metrics.PRECISION_THRESHOLDS` px.
        norm_precision: (51,) at :data:`metrics.NORM_PRECISION_THRESHOLDS`.
        frames: number of frames timed, over all runs.
        seconds: total time of those frames.
    """

    ious: np.ndarray
    success: np.ndarray
    precision: np.ndarray
    norm_precision: np.ndarray
    frames: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, float]:
        """The table numbers: AUC, OP50, OP75, precision at 20 px, normalised precision at 0.2,
        AO / SR0.5 / SR0.75 over the pooled frames, FPS (frames over total time)."""
        return {
            "auc": M.area_under_curve(self.success),
            "op50": M.curve_at(self.success, M.SUCCESS_THRESHOLDS, 0.5),
            "op75": M.curve_at(self.success, M.SUCCESS_THRESHOLDS, 0.75),
            "precision": M.curve_at(self.precision, M.PRECISION_THRESHOLDS, M.PRECISION_AT_PX),
            "norm_precision": M.curve_at(
                self.norm_precision, M.NORM_PRECISION_THRESHOLDS, M.NORM_PRECISION_AT
            ),
            "ao": M.average_overlap(self.ious),
            "sr50": M.success_rate(self.ious, 0.5),
            "sr75": M.success_rate(self.ious, 0.75),
            "fps": self.frames / self.seconds if self.seconds > 0 else float("nan"),
        }


def score_run(
    boxes: np.ndarray,
    sequence: Sequence,
    protocol: Protocol = OTB_PROTOCOL,
    times: np.ndarray | None = None,
    image_size: tuple[int, int] | None = None,
) -> Score:
    """Score one run's boxes (N, 4) on ``sequence``.

    Only annotated frames with the target present count (:meth:`Sequence.annotated`). Row 0 is
    replaced by the ground truth, or excluded under ``protocol.skip_first_frame``.
    ``image_size`` (width, height) is read from the first frame when clipping needs it.
    Raises ValueError when the number of boxes differs from the number of frames.
    """
    boxes = np.array(boxes, dtype=np.float64).reshape(-1, 4)
    if len(boxes) != len(sequence):
        raise ValueError(f"{sequence.name}: {len(boxes)} result boxes for {len(sequence)} frames")
    gt = sequence.ground_truth
    mask = sequence.annotated()
    if protocol.skip_first_frame:
        mask[0] = False
    else:
        boxes[0] = gt[0]
    pred, truth = boxes[mask], gt[mask]
    if protocol.clip_to_image:
        if image_size is None:
            height, width = read_image(sequence.frames[0], keep_gray=True).shape[:2]
        else:
            width, height = image_size
        pred, truth = M.clip_to_image(pred, width, height), M.clip_to_image(truth, width, height)
    ious = M.box_iou(pred, truth)
    return Score(
        ious=ious,
        success=M.success_curve(ious),
        precision=M.precision_curve(M.center_error(pred, truth)),
        norm_precision=M.precision_curve(
            M.normalized_center_error(pred, truth), M.NORM_PRECISION_THRESHOLDS
        ),
        frames=0 if times is None else len(times),
        seconds=0.0 if times is None else float(np.sum(times)),
    )


def average(scores: list[Score]) -> Score:
    """Average runs (or sequences): mean curves, pooled IoUs, summed frames and seconds."""
    if not scores:
        raise ValueError("average needs at least one score")
    return Score(
        ious=np.concatenate([s.ious for s in scores]),
        success=np.mean([s.success for s in scores], axis=0),
        precision=np.mean([s.precision for s in scores], axis=0),
        norm_precision=np.mean([s.norm_precision for s in scores], axis=0),
        frames=sum(s.frames for s in scores),
        seconds=sum(s.seconds for s in scores),
    )
