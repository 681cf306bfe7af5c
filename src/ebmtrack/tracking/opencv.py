"""OpenCV's single-object trackers behind ebmtrack's :class:`~ebmtrack.tracking.base.Tracker`.

Peers for benchmarks: CSRT, KCF, MIL (``cv2``), MOSSE, MedianFlow, TLD, Boosting
(``cv2.legacy``), and the DNN trackers NanoTrack and ViT, whose ONNX files are given by path or
looked up by their usual names in ``model_dir``. OpenCV is imported when a tracker is made, so
that the registry lists the names (and ``ebmtrack --help`` runs) where it is missing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ebmtrack.tracking.base import TrackResult, TrackStatus, check_frame_size
from ebmtrack.tracking.init_box import clip_init_box
from ebmtrack.values import OptionError

# kind -> (module attribute path, is legacy API)
_FACTORIES: dict[str, tuple[str, bool]] = {
    "csrt": ("TrackerCSRT", False),
    "kcf": ("TrackerKCF", False),
    "mil": ("TrackerMIL", False),
    "mosse": ("legacy.TrackerMOSSE", True),
    "medianflow": ("legacy.TrackerMedianFlow", True),
    "tld": ("legacy.TrackerTLD", True),
    "boosting": ("legacy.TrackerBoosting", True),
    "nanotrack": ("TrackerNano", False),
    "vit": ("TrackerVit", False),
}
OPENCV_TRACKERS: tuple[str, ...] = tuple(_FACTORIES)

# DNN trackers: kind -> {parameter name: (default file name, sha256 of the known-good file)}.
MODEL_FILES: dict[str, dict[str, tuple[str, str]]] = {
    "nanotrack": {
        "backbone": (
            "nanotrack_backbone_sim.onnx",
            "530bdd0cd00f19afab79a863e71ba71e3312395a5dc9151af675082bdaaa2fc4",
        ),
        "neckhead": (
            "nanotrack_head_sim.onnx",
            "0d8c0637be849f092cc7236cae02e55c8b9455ebe37ba50601d6115db4247cd9",
        ),
    },
    "vit": {
        "net": (
            "vitTracker.onnx",
            "ac1418b43519a5118dba03e1db181b5ca83f3a61b76582841ce8a725d8bfa249",
        )
    },
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def resolve_model_files(
    kind: str, model_dir: str | Path | None = None, **paths: str | Path | None
) -> dict[str, str]:
    """Paths of the ONNX files of DNN tracker ``kind`` (nanotrack or vit).

    A path given as keyword (``backbone``/``neckhead`` for nanotrack, ``net`` for vit) is used as
    is; otherwise the file's usual name is looked up in ``model_dir`` and its sha256 checked
    against the known file. Raises FileNotFoundError naming each missing file.
    """
    specs = MODEL_FILES[kind]
    unknown = set(paths) - set(specs)
    if unknown:
        raise OptionError(
            f"{kind}: unknown model file option(s) {sorted(unknown)}; valid: {sorted(specs)}",
            *sorted(unknown),
        )
    resolved, missing = {}, []
    for param, (file_name, digest) in specs.items():
        given = paths.get(param)
        if given is None and model_dir is None:
            missing.append(f"{param} ({file_name}: pass model_dir= or {param}=)")
            continue
        path = Path(given) if given is not None else Path(model_dir) / file_name
        if not path.is_file():
            missing.append(f"{param}: {path}")
            continue
        if given is None and _sha256(path) != digest:
            raise OptionError(
                f"{kind}: {path} is not the known {file_name} (sha256 differs); give its path "
                f"as the {param!r} option to use another export",
                "model_dir",
            )
        resolved[param] = str(path)
    if missing:
        raise FileNotFoundError(f"{kind} model file(s) not found: {'; '.join(missing)}")
    return resolved


def _create(kind: str, model_files: dict[str, str]):
    import cv2

    attr_path, _ = _FACTORIES[kind]
    owner = cv2
    for part in attr_path.split("."):
        owner = getattr(owner, part)
    if kind == "nanotrack":
        params = cv2.TrackerNano_Params()
        params.backbone, params.neckhead = model_files["backbone"], model_files["neckhead"]
        return owner.create(params)
    if kind == "vit":
        params = cv2.TrackerVit_Params()
        params.net = model_files["net"]
        return owner.create(params)
    return owner.create()


class OpenCVTracker:
    """An OpenCV tracker as a :class:`~ebmtrack.tracking.base.Tracker`.

    Frames come in as RGB or grayscale uint8 and are converted to BGR for OpenCV. The init box is
    clipped to the frame (:func:`~ebmtrack.tracking.init_box.clip_init_box`) and rounded to whole
    pixels (OpenCV's Rect; legacy Boosting crashes on fractional sizes). When OpenCV reports a
    failure the last box is kept and the status is ``not_found``.

    Args:
        kind: one of :data:`OPENCV_TRACKERS`.
        model_dir: folder holding the ONNX files of nanotrack / vit under their usual names.
        **model_paths: explicit ONNX paths (``backbone``, ``neckhead`` for nanotrack; ``net``
            for vit).
    """

    def __init__(
        self, kind: str, model_dir: str | Path | None = None, **model_paths: str | Path | None
    ) -> None:
        if kind not in _FACTORIES:
            raise ValueError(
                f"unknown OpenCV tracker {kind!r}; valid: {', '.join(OPENCV_TRACKERS)}"
            )
        if kind in MODEL_FILES:
            self._model_files = resolve_model_files(kind, model_dir, **model_paths)
        elif model_paths:
            raise OptionError(
                f"{kind} takes no model files, got {sorted(model_paths)}", *sorted(model_paths)
            )
        else:
            self._model_files = {}
        self.name = kind
        self._legacy = _FACTORIES[kind][1]
        self._tracker = None
        self._box = np.zeros(4)
        self._frame_size: tuple[int, ...] = ()

    @staticmethod
    def _to_bgr(frame: np.ndarray) -> np.ndarray:
        import cv2

        if frame.ndim == 2:
            return cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
        return cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)

    def initialize(self, frame: np.ndarray, box: np.ndarray) -> None:
        import cv2

        box = clip_init_box(box, frame.shape, "init box")
        # Whole pixels inside the frame: OpenCV's trackers fail on a Rect that leaves it.
        height, width = frame.shape[:2]
        x, y = min(round(box[0]), width - 1), min(round(box[1]), height - 1)
        w = max(1, min(round(box[0] + box[2]), width) - x)
        h = max(1, min(round(box[1] + box[3]), height) - y)
        self._tracker = _create(self.name, self._model_files)
        try:
            ok = self._tracker.init(self._to_bgr(frame), (x, y, w, h))
        except cv2.error as err:  # e.g. MIL on a box that leaves no room for negative samples
            raise ValueError(
                f"OpenCV's {self.name} cannot start on the box {x},{y},{w},{h} in a "
                f"{frame.shape[1]}x{frame.shape[0]} frame ({err.err} in {err.func})"
            ) from None
        if self._legacy and ok is False:
            raise RuntimeError(f"OpenCV {self.name} could not initialise on box {box.tolist()}")
        self._box = box.copy()
        self._frame_size = frame.shape[:2]

    def track(self, frame: np.ndarray) -> TrackResult:
        if self._tracker is None:
            raise RuntimeError(f"{self.name}: call initialize() before track()")
        check_frame_size(self._frame_size, frame)
        ok, box = self._tracker.update(self._to_bgr(frame))
        score = float("nan")
        if hasattr(self._tracker, "getTrackingScore"):
            # OpenCV answers -1 for the trackers that compute no score (CSRT, KCF, ...): none.
            found = float(self._tracker.getTrackingScore())
            score = found if found >= 0 else float("nan")
        box = np.asarray(box, dtype=np.float64)
        if not ok or box[2] <= 0 or box[3] <= 0:
            return TrackResult(self._box.copy(), score, TrackStatus.NOT_FOUND)
        self._box = box
        return TrackResult(box.copy(), score, TrackStatus.NORMAL)
