"""The long-term mode's decisions, NumPy only, one definition for the torch trackers' mode
(:class:`~ebmtrack.tracking.longterm.LongTermMode`) and the torch-free runtime
(:class:`~ebmtrack.lite.tracker.LiteTracker`): when a tracked target is lost (:func:`is_lost`,
:func:`review`), which search regions a lost tracker looks at (:func:`tile_centers`,
:class:`LostSearch`), and when a candidate is the target again (:func:`reacquire`:
:func:`is_found`, :func:`confirmed`); the parameters (:class:`LongTermParams`) and a target's
long-term state (:class:`LostState`).

Two experts judge the target: ATOM's classifier (its score map's peak) and, with one backbone
pass, the siamese head (:mod:`ebmtrack.lite.siamese`: its target probability at the box it
decodes, from the same features). A tracked frame is a miss when the classifier does not find
the target (its peak below ``target_not_found_threshold``) **or** the head's probability at its
box is below ``lost_siamese_threshold``; ``lost_after`` misses in a row and the target is lost.
While lost, each frame searches at most ``lost_crops`` regions (the last position and whole-frame
tiles, :class:`LostSearch`), each through the backbone once; a region's classifier peak is a
candidate when it passes :func:`is_found`, and a candidate is the target when the head, decoding
that region's features with its window on the peak, confirms it (:func:`confirmed`). A
``lost_siamese_threshold`` of 0 leaves the classifier alone to decide both (as with two backbone
passes, where the lost regions have no siamese features).

The runtime runs the mode when its export's parameters hold every field of
:class:`LongTermParams` (:func:`long_term_params`; the export of ``atom-lt`` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from ebmtrack.lite.crop import apply_matrix, invert_affine
from ebmtrack.lite.localize import upsample_scores
from ebmtrack.lite.position import ClassifierEvidence, classifier_prior
from ebmtrack.lite.result import TrackResult, TrackStatus
from ebmtrack.lite.siamese import SiameseBoxEstimator, SiameseFrame

__all__ = [
    "LONG_TERM",
    "LOST_CONFIDENCE",
    "LongTermParams",
    "LostSearch",
    "LostState",
    "Reacquired",
    "confirmed",
    "head_decoder",
    "is_found",
    "is_lost",
    "long_term_params",
    "lost_candidates",
    "lost_frame_result",
    "lost_result",
    "reacquire",
    "review",
    "siamese_threshold_error",
    "tile_centers",
]


@dataclass(frozen=True)
class LongTermParams:
    """The long-term mode's parameters (mixed into a tracker's parameter dataclass, whose check
    takes their ranges from :mod:`ebmtrack.lite.option_checks`).

    Attributes:
        lost_after: frames in a row for which :func:`is_lost` holds before the tracker turns lost.
        redetect_threshold: while lost, the classifier's best peak over the searched crops must
            reach this to re-acquire the target (the short-term test is
            ``target_not_found_threshold``).
        redetect_near_threshold: a lower bar for a peak in the search region at the last position
            (where the target was lost): it re-acquires there when it reaches this; None: the
            same ``redetect_threshold`` everywhere.
        lost_crops: search regions per lost frame (the cost bound: one backbone batch of this
            many crops), the one at the last position included; >= 2.
        tile_overlap: overlap of neighbouring whole-frame tiles, as a fraction of their side.
        lost_siamese_threshold: the siamese head's bound (with one backbone pass): a tracked
            frame whose head's target probability at its box is below this is a miss, and a
            lost tracker's candidate is taken only where the head's probability there reaches
            it; 0: the classifier alone decides.
    """

    lost_after: int = 1
    redetect_threshold: float = 0.4
    redetect_near_threshold: float | None = None
    lost_crops: int = 4
    tile_overlap: float = 0.25
    lost_siamese_threshold: float = 0.0


LOST_CONFIDENCE = 0.008
"""``TrackResult.confidence`` of a lost frame: the probability that a lost frame's box overlaps
the target with IoU > 0.5 (the calibrators' event), measured on the spliced training clips
(``atom-lt``, tracker seeds 0-2: 22 of 2,850 lost frames; docs/results/long-term.md), never on
the test sequences."""


def lost_result(box, score: float) -> TrackResult:
    """A lost frame's result: ``box`` (the last one), ``score`` (the best candidate's peak),
    status ``lost`` and confidence :data:`LOST_CONFIDENCE`."""
    return TrackResult(box, score, TrackStatus.LOST, LOST_CONFIDENCE)


LONG_TERM = tuple(field.name for field in fields(LongTermParams))
"""The long-term mode's parameters: an export whose ``params.json`` holds them runs the mode."""


def long_term_params(params: Mapping) -> LongTermParams | None:
    """The long-term mode's parameters of an export's ``params`` (options applied), None where
    it holds none of them (a short-term tracker); ValueError where it holds some only."""
    present = [name for name in LONG_TERM if name in params]
    if not present:
        return None
    missing = [name for name in LONG_TERM if name not in params]
    if missing:
        raise ValueError(
            f"params.json holds the long-term mode's {', '.join(present)} but lacks "
            f"{', '.join(missing)}: export the tracker again (ebmtrack export)"
        )
    return LongTermParams(**{name: params[name] for name in LONG_TERM})


def is_lost(result: TrackResult, siamese_score: float = math.nan, threshold: float = 0.0) -> bool:
    """Whether a tracked frame's result says the target is gone: the short-term tracker's own
    not-found test (its classifier's peak below ``target_not_found_threshold``), or the siamese
    head's target probability ``siamese_score`` at the frame's box below ``threshold`` (> 0;
    NaN: no head decoded a box, no evidence)."""
    if result.status == TrackStatus.NOT_FOUND:
        return True
    return threshold > 0 and siamese_score < threshold


def confirmed(siamese_score: float, params: LongTermParams) -> bool:
    """Whether the siamese head confirms a lost tracker's candidate: its target probability
    reaches ``lost_siamese_threshold`` (always where that is 0)."""
    return params.lost_siamese_threshold <= 0 or siamese_score >= params.lost_siamese_threshold


def is_found(score: float, params: LongTermParams, near: bool = False) -> bool:
    """Whether a lost tracker's candidate, of peak ``score``, is taken as the target; ``near``:
    a candidate in the search region at the last position."""
    if near and params.redetect_near_threshold is not None:
        return score >= min(params.redetect_near_threshold, params.redetect_threshold)
    return score >= params.redetect_threshold


def _axis_centers(length: float, side: float, overlap: float) -> np.ndarray:
    if side >= length:
        return np.array([length / 2.0])
    count = math.ceil((length - side) / (side * (1.0 - overlap))) + 1
    return np.linspace(side / 2.0, length - side / 2.0, count)


def tile_centers(frame_size: tuple[int, int], side: float, overlap: float = 0.25) -> np.ndarray:
    """Centres (T, 2) in frame px of square tiles of ``side`` px covering a (W, H) frame, with
    neighbours overlapping by at least ``overlap * side`` (one tile along an axis shorter than
    ``side``, centred on it). Row-major, top-left first."""
    width, height = frame_size
    xs = _axis_centers(float(width), side, overlap)
    ys = _axis_centers(float(height), side, overlap)
    return np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)


class LostSearch:
    """Which search regions a lost tracker looks at, frame after frame.

    Frame ``n`` of being lost (0-based) searches the last position and tiles
    ``n * (B - 1) ... (n + 1) * (B - 1) - 1`` (mod T) of the frame's tiles sorted by distance
    from the last position, B = ``crops``, T the number of tiles; every tile at most once per
    frame, so the whole frame is covered every ``ceil(T / (B - 1))`` frames.
    """

    def __init__(self, crops: int, overlap: float) -> None:
        self.crops = crops
        self.overlap = overlap
        self.frames = 0
        self.last = np.zeros((0, 2))  # the centres of the last call

    def reset(self) -> None:
        """Start a new loss: the next frame searches the nearest tiles first."""
        self.frames = 0

    def centers(self, frame_size: tuple[int, int], center: np.ndarray, side: float) -> np.ndarray:
        """The (B', 2) centres to search in this frame, B' <= ``crops``; the last position
        ``center`` first. Advances to the next frame."""
        tiles = tile_centers(frame_size, side, self.overlap)
        order = np.argsort(np.linalg.norm(tiles - center, axis=1), kind="stable")
        per_frame = min(self.crops - 1, len(tiles))
        first = self.frames * per_frame
        picked = tiles[order[(first + np.arange(per_frame)) % len(tiles)]]
        self.frames += 1
        self.last = np.concatenate([np.asarray(center, dtype=np.float64)[None], picked])
        return self.last


@dataclass
class LostState:
    """One target's long-term state (the runtime's, and the torch trackers'
    :attr:`~ebmtrack.tracking.composition.TargetState.mode`).

    Attributes:
        search: which regions the next lost frame looks at.
        lost: whether the target is lost (the mode takes its frames).
        misses: frames in a row for which :func:`is_lost` held.
    """

    search: LostSearch
    lost: bool = False
    misses: int = 0

    @classmethod
    def of(cls, params: LongTermParams) -> LostState:
        """A new target's long-term state (tracking, not lost)."""
        return cls(LostSearch(params.lost_crops, params.tile_overlap))


def review(
    lost: LostState, params: LongTermParams, result: TrackResult, siamese_score: float = math.nan
) -> TrackResult:
    """A tracked frame's ``result`` as the long-term mode reports it: counted a miss where
    :func:`is_lost` holds (``siamese_score``: the head's target probability at the frame's box,
    NaN where none was decoded); ``lost_after`` misses in a row and the target is lost (the
    result ``lost``, the next frame searches the nearest tiles first)."""
    miss = is_lost(result, siamese_score, params.lost_siamese_threshold)
    lost.misses = lost.misses + 1 if miss else 0
    if lost.misses < params.lost_after:
        return result
    lost.lost = True
    lost.search.reset()
    return lost_result(result.box, result.score)


def lost_candidates(peaks: Sequence[float], params: LongTermParams) -> list[int]:
    """The regions of a lost frame whose classifier peak passes :func:`is_found` (region 0, at
    the last position, with the lower bar near it), highest peak first (ties: the first)."""
    passing = [i for i, peak in enumerate(peaks) if is_found(peak, params, near=i == 0)]
    return sorted(passing, key=lambda i: -peaks[i])


@dataclass(frozen=True)
class Reacquired:
    """A lost target found again: its ``center`` (2,) in frame px, its ``size`` (2,) (the
    siamese head's box; None: the classifier alone, the last size kept) and ``score``, the
    classifier's peak there."""

    center: np.ndarray
    size: np.ndarray | None
    score: float

    def target(self, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The state's ``(center, size)`` once re-acquired, the last ``size`` kept where the
        head gave none."""
        return self.center, size if self.size is None else self.size


def lost_frame_result(found: Reacquired | None, box, score: float) -> TrackResult:
    """A lost target's frame as reported: :func:`lost_result` while not ``found``, else the
    re-acquired ``box`` (the state's, after :meth:`Reacquired.target`), status ``normal``."""
    if found is None:
        return lost_result(box, score)
    return TrackResult(box, score, TrackStatus.NORMAL)


Decoder = Callable[[int, np.ndarray], SiameseFrame]
"""The siamese head on a lost frame's region ``i``, its window on a frame point (2,)."""


def head_decoder(
    siamese: SiameseBoxEstimator,
    search: np.ndarray,
    template: np.ndarray,
    centers: np.ndarray,
    size: np.ndarray,
    scale: float,
    scores: np.ndarray,
    matrices: Sequence[np.ndarray],
    stride: float,
    classifier_weight: float,
) -> Decoder:
    """The siamese head on a lost frame's regions, as a tracked frame's one-pass box is decoded
    (:meth:`~ebmtrack.lite.siamese.SiameseBoxEstimator.decode`): region ``i``'s ``search``
    features (N, C, 16, 16), the target's ``template``, the region cropped around ``centers[i]``
    (frame px) at ``scale`` crop px per frame px for a target of the last ``size``, the
    classifier's raw ``scores[i]`` (H, W) on it (frame -> crop ``matrices[i]``, ``stride``) as
    its prior with ``classifier_weight``, the window on the given frame point."""

    def decode(index: int, point: np.ndarray) -> SiameseFrame:
        evidence = ClassifierEvidence(scores[index], matrices[index], stride, TrackStatus.NORMAL)
        return siamese.decode(
            search[index : index + 1],
            template,
            centers[index],
            size,
            scale,
            classifier_prior(evidence, classifier_weight),
            window_center=point,
        )

    return decode


def reacquire(
    lost: LostState,
    params: LongTermParams,
    scores: np.ndarray,
    upsample: int,
    stride: float,
    matrices: Sequence[np.ndarray],
    decode: Decoder | None = None,
) -> tuple[float, Reacquired | None]:
    """A lost frame's verdict from the classifier's score maps ``scores`` (N, H, W) of its N
    regions (region 0 at the last position; cell (i, j) at crop px (j, i) x ``stride``; frame ->
    crop ``matrices``), upsampled ``upsample`` times as a tracked frame's, and, with ``decode``,
    the siamese head's: the candidates of :func:`lost_candidates` in turn, the first one
    :func:`confirmed` by the head re-acquired (``lost`` back to tracking). Returns
    ``(score, found)``: the classifier's peak of the re-acquired region (else its best over all),
    and the target (None: still lost)."""
    fine = np.stack([upsample_scores(np.asarray(map_, np.float32), upsample) for map_ in scores])
    cell = stride / upsample
    peaks = fine.reshape(len(fine), -1).max(axis=1)
    for index in lost_candidates(peaks.tolist(), params):
        row, col = divmod(int(np.argmax(fine[index])), fine.shape[2])
        point = apply_matrix(invert_affine(matrices[index]), np.array([col * cell, row * cell]))
        size = None
        if decode is not None:
            head = decode(index, point)
            if not confirmed(head.score, params):
                continue
            point, size = head.center, head.size
        lost.lost, lost.misses = False, 0
        return float(peaks[index]), Reacquired(point, size, float(peaks[index]))
    return float(peaks.max()), None


def siamese_threshold_error(params: LongTermParams, one_pass: bool) -> str | None:
    """Why ``lost_siamese_threshold`` cannot be set (one line, both runtimes' refusal), None
    where it can: the head's evidence on lost regions needs their siamese features, one
    backbone pass."""
    if params.lost_siamese_threshold == 0 or one_pass:
        return None
    return (
        f"lost_siamese_threshold {params.lost_siamese_threshold!r} reads the siamese head on the "
        "classifier's features: it needs one backbone pass (box_mode 'siamese', "
        "classifier_features auto or siamese); 0 leaves the classifier alone"
    )
