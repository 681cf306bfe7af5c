"""NanoTrack with its authors' own tracker logic on the networks shipped in :mod:`ebmtrack.weights`
(the ``nanotrack-v3`` peer: NanoTrack v3, HonglinChu/SiamTrackers @ 4dbbbbc), run by ONNX Runtime
and NumPy: no PyTorch, no OpenCV tracker, no model files to give.

The tracker is NanoTrack's own loop around the one siamese box estimator of the package
(:class:`~ebmtrack.lite.siamese.SiameseBoxEstimator`, the one ``atom`` decodes its box with):
the template from the first frame's box; each frame the search crop centred on the last centre
and scaled from the last size, decoded with the Hanning window and the scale / aspect penalty,
the size smoothed at penalty x score x the size rate, all with the model's own values
(:data:`~ebmtrack.lite.siamese.SIAMESE_MODELS`: v3's window 0.455, penalty 0.138, size rate
0.348, context 0.5); then, as NanoTrack clips its state, the centre kept inside the frame and
the width and height between 10 px and the frame's. Crops repeat the frame's border where
NanoTrack pads with the mean colour (:mod:`ebmtrack.lite.siamese`). NanoTrack reports no
failure: every frame's status is ``normal``, its score the best cell's target probability.
"""

from __future__ import annotations

import functools

import numpy as np

from ebmtrack.lite.frames import as_rgb, clip_init_box
from ebmtrack.lite.result import TrackResult, TrackStatus, check_frame_size
from ebmtrack.lite.siamese import SiameseBoxConfig, SiameseBoxEstimator
from ebmtrack.weights import siamese_networks

__all__ = ["MIN_SIZE", "NanoTrackTracker", "create_nanotrack_v3"]

MIN_SIZE = 10.0
"""The least width and height NanoTrack's state takes, in frame px."""


@functools.lru_cache(maxsize=4)
def _estimator(model: str, threads: int) -> SiameseBoxEstimator:
    """The shipped networks of ``model`` with their own decoding values, once per process:
    the sessions hold no per-target state, so trackers share them."""
    backbone, head = siamese_networks(model)
    return SiameseBoxEstimator(backbone, head, SiameseBoxConfig(siamese_model=model), threads)


def clip_state(
    center: np.ndarray, size: np.ndarray, frame_shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """NanoTrack's clip of its state: the centre inside the frame, the width and height between
    :data:`MIN_SIZE` and the frame's."""
    limit = np.array([frame_shape[1], frame_shape[0]], dtype=np.float64)
    return np.clip(center, 0.0, limit), np.clip(size, MIN_SIZE, np.maximum(limit, MIN_SIZE))


class NanoTrackTracker:
    """NanoTrack ``model`` with its authors' tracker logic (module docstring), the package's
    :class:`~ebmtrack.tracking.base.Tracker` interface: ``initialize(frame, box)``, then
    ``track(frame)`` per frame; frames RGB uint8 (H, W, 3) or grayscale (H, W).

    Args:
        model: the NanoTrack version whose shipped networks it runs (``v2``, ``v3``).
        threads: ONNX Runtime intra-op threads; None: the process's
            (:func:`ebmtrack.process.configured_threads`).
    """

    def __init__(self, model: str = "v3", threads: int | None = None) -> None:
        SiameseBoxConfig(siamese_model=model)  # an unknown model: one line naming the known
        if threads is None:
            from ebmtrack.process import configured_threads

            threads = configured_threads()
        self.name = f"nanotrack-{model}"
        self.estimator = _estimator(model, threads)
        self._template: np.ndarray | None = None
        self._center = np.zeros(2)
        self._size = np.ones(2)
        self._frame_size: tuple[int, ...] = ()

    def initialize(self, frame: np.ndarray, box) -> None:
        """The target's template features from ``frame`` at ``box`` (x, y, w, h)."""
        frame = as_rgb(frame)
        box = clip_init_box(box, frame.shape, "init box")
        self._center, self._size = box[:2] + box[2:] / 2, box[2:].copy()
        self._template = self.estimator.template(frame, self._center, self._size)
        self._frame_size = frame.shape[:2]

    def track(self, frame: np.ndarray) -> TrackResult:
        """The target's box in the next ``frame``."""
        if self._template is None:
            raise ValueError("track() called before initialize(frame, box)")
        frame = as_rgb(frame)
        check_frame_size(self._frame_size, frame)
        found = self.estimator.locate(frame, self._center, self._size, self._template)
        self._center, self._size = clip_state(found.center, found.size, frame.shape)
        box = np.concatenate([self._center - self._size / 2, self._size])
        return TrackResult(box, found.score, TrackStatus.NORMAL)


def create_nanotrack_v3() -> NanoTrackTracker:
    """NanoTrack v3 with its authors' tracker logic and values (the ``nanotrack-v3`` tracker;
    no options: a peer runs as its authors set it)."""
    return NanoTrackTracker("v3")
