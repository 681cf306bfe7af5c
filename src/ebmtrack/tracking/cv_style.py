"""Our trackers behind OpenCV's tracker interface, for code written for ``cv2.TrackerNano`` or
``cv2.TrackerCSRT``:

>>> tracker = ebmtrack.TrackerATOM.create()          # options as in load_tracker
>>> tracker.init(frame, (x, y, w, h))                  # frame: BGR, as cv2 reads it
>>> ok, (x, y, w, h) = tracker.update(frame)           # ints; ok False when the target is lost
>>> tracker.getTrackingScore()                         # the tracker's score of that frame

The colour rule: OpenCV-style trackers take **BGR** frames (what ``cv2.imread`` and
``cv2.VideoCapture`` give) unless created with ``color="rgb"``; the native API
(:func:`ebmtrack.load_tracker`) takes RGB. Grayscale (H, W) frames need no order.
"""

from __future__ import annotations

import math

import numpy as np

from ebmtrack.tracking.base import Tracker, TrackResult, TrackStatus

__all__ = ["OpenCVStyleTracker", "opencv_style_classes"]

COLORS = ("bgr", "rgb")


class OpenCVStyleTracker:
    """A tracker with OpenCV's ``init`` / ``update`` / ``getTrackingScore`` methods.

    Args:
        tracker: the native tracker (:func:`ebmtrack.load_tracker`), which takes RGB frames.
        color: the channel order of the frames given to :meth:`init` and :meth:`update`:
            ``"bgr"`` (OpenCV's, the default) or ``"rgb"``.

    Attributes:
        result: the native :class:`~ebmtrack.tracking.base.TrackResult` of the last update
            (the box in float pixels, the score, the status), None before.
    """

    tracker_name = ""  # the registered name :meth:`create` builds

    def __init__(self, tracker: Tracker, color: str = "bgr") -> None:
        if color not in COLORS:
            raise ValueError(f"color must be one of {', '.join(COLORS)}, got {color!r}")
        self.tracker, self.color = tracker, color
        self.result: TrackResult | None = None
        self._started = False  # init() was called: update() is refused before it

    @classmethod
    def create(
        cls, color: str = "bgr", threads: int | None = None, runtime: str | None = None, **options
    ):
        """A new tracker of this class's registered name, built with ``runtime`` and ``options``
        (the same as :func:`ebmtrack.load_tracker`'s: the torch-free runtime where the tracker
        ships an export, ``runtime="torch"`` for the torch tracker)."""
        from ebmtrack.process import configure_threads
        from ebmtrack.tracking.runtime import build_tracker

        if color not in COLORS:  # before the networks load
            raise ValueError(f"color must be one of {', '.join(COLORS)}, got {color!r}")
        threads = configure_threads(threads)
        tracker = build_tracker(cls.tracker_name, runtime, threads=threads, **options)
        return cls(tracker, color=color)

    def _rgb(self, image: np.ndarray) -> np.ndarray:
        image = np.asarray(image)
        if self.color == "rgb" or image.ndim != 3 or image.shape[2] == 1:
            return image
        return np.ascontiguousarray(image[:, :, 2::-1])  # BGR(A) -> RGB

    def init(self, image: np.ndarray, boundingBox) -> None:  # noqa: N803 (OpenCV's name)
        """Start on ``image`` with the target at ``boundingBox`` (x, y, w, h)."""
        self.tracker.initialize(self._rgb(image), np.asarray(boundingBox, dtype=np.float64))
        self.result, self._started = None, True

    def update(self, image: np.ndarray) -> tuple[bool, tuple[int, int, int, int]]:
        """``(ok, (x, y, w, h))`` on the next frame: the box rounded to whole pixels, as
        OpenCV's trackers give it; ``ok`` False when the tracker reports the target not found
        (the box is then where it was last seen) or lost (``atom-lt``: the box is its best
        candidate, below the re-acquisition test). ValueError before :meth:`init`."""
        if not self._started:
            raise ValueError("update(image) called before init(image, boundingBox)")
        self.result = self.tracker.track(self._rgb(image))
        box = tuple(int(round(float(v))) for v in self.result.box)
        return self.result.status not in (TrackStatus.NOT_FOUND, TrackStatus.LOST), box

    def getTrackingScore(self) -> float:  # noqa: N802 (OpenCV's name)
        """The last update's score (NaN before the first update or for a tracker without)."""
        return math.nan if self.result is None else float(self.result.score)


def _style_class(class_name: str, tracker_name: str) -> type[OpenCVStyleTracker]:
    doc = (
        f"ebmtrack's ``{tracker_name}`` with OpenCV's tracker interface: ``{class_name}.create"
        "(**options)``, ``init(frame, box)``, ``ok, box = update(frame)`` on BGR frames "
        "(:class:`OpenCVStyleTracker`)."
    )
    namespace = {"tracker_name": tracker_name, "__doc__": doc, "__module__": __name__}
    return type(class_name, (OpenCVStyleTracker,), namespace)


_CLASSES: dict[tuple[str, str], type[OpenCVStyleTracker]] = {}


def opencv_style_classes() -> dict[str, type[OpenCVStyleTracker]]:
    """``ebmtrack.<class name>`` -> the class, one per registered variant that names one
    (:attr:`~ebmtrack.tracking.registry.TrackerVariant.opencv_class`), e.g. ``TrackerATOM``
    for ``atom``; each class made once."""
    from ebmtrack.tracking.registry import TrackerVariant, get_factory, tracker_names

    classes = {}
    for name in tracker_names():
        variant = get_factory(name)
        class_name = variant.opencv_class if isinstance(variant, TrackerVariant) else ""
        if class_name:
            key = (class_name, name)
            if key not in _CLASSES:
                _CLASSES[key] = _style_class(class_name, name)
            classes[class_name] = _CLASSES[key]
    return classes
