"""A tracking-trained box estimator: NanoTrack's backbone, neck and head (v2 or v3,
``siamese_model``; Apache-2.0, trained on large tracking data sets by their authors) decoding the
target's box in a crop centred where the classifier puts the target (NumPy and ONNX Runtime; the
torch trackers, the torch-free runtime and the ``nanotrack-v3`` tracker run this one module).

Per target, :meth:`SiameseBoxEstimator.template` reads the first frame's box once: a crop of
side ``sqrt((w + c(w + h)) (h + c(w + h)))`` (``c`` = ``siamese_context``) around it, resized to
127 px, through the backbone: (1, C, 8, 8) template features (C = 48 for v2, 96 for v3). Per
frame, :meth:`SiameseBoxEstimator.locate` cuts a crop 255/127 times that side (from the last
size) around the given centre, resized to 255 px; the backbone gives (1, C, 16, 16) search
features; the neck correlates them with the template's and the head gives, on a G x G grid of
stride 16 (G = 16 for v2, 15 for v3; read from the head's output), a target score and the
distances of the box's four sides, the cells at ``(i - G // 2) * 16`` px from the crop's centre.
The box is decoded as SiamRPN++-style trackers decode it (NanoTrack's own rule): the score times
a penalty on a change of scale and aspect ratio, blended with a Hanning window centred on the
crop, or where another expert puts the target (``siamese_window``, :func:`shifted_window`); the
best cell's box; its size smoothed with the last one at a rate of penalty x score x
``siamese_size_rate``. Each version decodes with its own authors' values (:data:`SIAMESE_MODELS`)
unless the config sets them. :meth:`~SiameseBoxEstimator.locate` is the crop
(:meth:`~SiameseBoxEstimator.search`), the backbone and :meth:`~SiameseBoxEstimator.decode` in
turn; with one backbone pass the trackers run them apart (the backbone:
:meth:`~SiameseBoxEstimator.features`), so that ATOM's classifier reads the same search features.

Input convention of the network: RGB, raw 0-255 values, no mean or std (OpenCV's ``TrackerNano``
swaps its BGR frames to RGB). Crops repeat the frame's border (NanoTrack pads with the mean
colour; the difference only touches crops that leave the frame).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ebmtrack.lite.crop import crop_square
from ebmtrack.lite.onnx_session import Session

__all__ = [
    "EXEMPLAR_SIZE",
    "INSTANCE_SIZE",
    "SIAMESE_MODELS",
    "STRIDE",
    "SiameseBoxConfig",
    "SiameseBoxEstimator",
    "SiameseFrame",
    "decode_box",
    "shifted_window",
]

EXEMPLAR_SIZE = 127
"""Side of the template crop in px."""
INSTANCE_SIZE = 255
"""Side of the search crop in px."""
STRIDE = 16
"""The score grid's stride in search-crop px."""


@dataclass(frozen=True)
class SiameseModel:
    """One NanoTrack version's own decoding values (not tuned here).

    Attributes:
        penalty: strength of the penalty on a change of scale and aspect ratio.
        size_rate: how fast the size follows the head's box, times penalty x score.
    """

    penalty: float
    size_rate: float


SIAMESE_MODELS: dict[str, SiameseModel] = {
    # OpenCV's TrackerNano's values for v2's networks
    "v2": SiameseModel(penalty=0.055, size_rate=0.37),
    # the authors' for v3's (NanoTrack/models/config/configv3.yaml)
    "v3": SiameseModel(penalty=0.138, size_rate=0.348),
}
"""The NanoTrack versions whose networks ship (``siamese_model``), with their own decoding
values: the defaults of ``siamese_penalty`` and ``siamese_size_rate``. Both use the window
influence 0.455 and context 0.5."""


@dataclass(frozen=True)
class SiameseBoxConfig:
    """How the siamese head's output becomes a box (NanoTrack's own values; not tuned here).

    Attributes:
        siamese_window: weight of the Hanning window against the penalised score (0-1).
        siamese_penalty: strength of the penalty on a change of scale and aspect ratio (>= 0;
            None: the model's own, v2 0.055, v3 0.138).
        siamese_size_rate: how fast the size follows the head's box, times penalty x score
            (0-1; None: the model's own, v2 0.37, v3 0.348).
        siamese_context: context around the target in the template crop, times (w + h) (>= 0).
        siamese_model: which NanoTrack's shipped networks decode the box: ``v2`` (48 channels,
            a 16 x 16 score map; this config's default) or ``v3`` (96 channels, 15 x 15; its
            authors' later, larger networks; the default of ``AtomParams``, so of ``atom``).
    """

    siamese_window: float = 0.455
    siamese_penalty: float | None = None
    siamese_size_rate: float | None = None
    siamese_context: float = 0.5
    siamese_model: str = "v2"

    def __post_init__(self) -> None:
        if self.siamese_model not in SIAMESE_MODELS:
            raise ValueError(
                f"siamese_model must be one of {', '.join(SIAMESE_MODELS)}, "
                f"got {self.siamese_model!r}"
            )
        for name in ("siamese_window", "siamese_size_rate"):
            value = getattr(self, name)
            if name == "siamese_size_rate" and value is None:
                continue
            if not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        for name in ("siamese_penalty", "siamese_context"):
            value = getattr(self, name)
            if name == "siamese_penalty" and value is None:
                continue
            if not (isinstance(value, int | float) and value >= 0.0):
                raise ValueError(f"{name} must be >= 0, got {value!r}")

    @property
    def penalty(self) -> float:
        """``siamese_penalty``, or the model's own where it is None."""
        own = SIAMESE_MODELS[self.siamese_model].penalty
        return own if self.siamese_penalty is None else self.siamese_penalty

    @property
    def size_rate(self) -> float:
        """``siamese_size_rate``, or the model's own where it is None."""
        own = SIAMESE_MODELS[self.siamese_model].size_rate
        return own if self.siamese_size_rate is None else self.siamese_size_rate


@dataclass
class SiameseFrame:
    """One frame's decoded box: ``center``, ``size`` (2,) in frame px after the size smoothing,
    ``raw_size`` (2,) the best cell's own size, ``score`` its target probability (0-1)."""

    center: np.ndarray
    size: np.ndarray
    raw_size: np.ndarray
    score: float


def template_side(size: np.ndarray, context_amount: float) -> float:
    """Side (frame px) of the template crop of a target of ``size`` (w, h)."""
    pad = context_amount * float(size[0] + size[1])
    return math.sqrt((float(size[0]) + pad) * (float(size[1]) + pad))


def _change(ratio: np.ndarray) -> np.ndarray:
    return np.maximum(ratio, 1.0 / ratio)


def _side(w: np.ndarray, h: np.ndarray) -> np.ndarray:
    pad = (w + h) * 0.5
    return np.sqrt((w + pad) * (h + pad))


@functools.cache
def _grid(cells: int) -> tuple[np.ndarray, np.ndarray]:
    """The score map's fixed geometry, made once per size: the (cells,) offsets of the cells
    from the crop's centre in crop px, and the (cells, cells) Hanning window (read-only)."""
    points = (np.arange(cells) - cells // 2) * float(STRIDE)
    hanning = np.hanning(cells)
    window = np.outer(hanning, hanning)
    points.flags.writeable = window.flags.writeable = False
    return points, window


def shifted_window(cells: int, offset: np.ndarray) -> np.ndarray:
    """The (cells, cells) Hanning window of :func:`decode_box` centred ``offset`` (x, y) crop px
    from where it sits by default, zero beyond its support; ``offset`` (0, 0) gives the default
    window (within float rounding)."""
    points, _ = _grid(cells)
    # a cell's place in the window's own units: the default window's centre is cell (G - 1) / 2
    base = points / STRIDE + cells // 2 - (cells - 1) / 2

    def axis(shift: float) -> np.ndarray:
        phase = (base - shift / STRIDE) / (cells - 1)
        return np.where(np.abs(phase) <= 0.5, 0.5 + 0.5 * np.cos(2 * np.pi * phase), 0.0)

    return np.outer(axis(float(offset[1])), axis(float(offset[0])))


def decode_box(
    logits: np.ndarray,
    sides: np.ndarray,
    last_size_crop: np.ndarray,
    config: SiameseBoxConfig,
    prior: np.ndarray | None = None,
    window_offset: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The best box of one head output.

    Args:
        logits: (2, G, G) background / target logits.
        sides: (4, G, G) distances (left, top, right, bottom) of the box's sides from each cell's
            point, in search-crop px.
        last_size_crop: (2,) the last size (w, h) in search-crop px.
        config: the decoding rule.
        prior: (G, G) factors > 0 on the cells' target scores, another expert's belief that the
            target is there (:mod:`ebmtrack.lite.position`), the product scaled to the head's
            peak score so that the window weighs as much as without; None: the head alone.
        window_offset: (2,) where the window is centred, crop px (x, y) from the crop's centre
            (:func:`shifted_window`): where another expert found the target in this crop; None:
            the crop's centre.

    Returns:
        ``(center offset (2,) from the crop centre, size (2,), rate, score)`` in crop px: the best
        cell's box, the size-smoothing rate (penalty x score x the size rate) and its target
        probability.
    """
    cells = logits.shape[-1]
    shifted = logits - logits.max(axis=0, keepdims=True)
    odds = np.exp(shifted)
    score = odds[1] / odds.sum(axis=0)
    expert = score
    if prior is not None:  # the product, scaled to the head's peak: the window weighs the same
        product = score * prior
        expert = product * (score.max() / max(float(product.max()), 1e-300))
    points, window = _grid(cells)
    if window_offset is not None:
        window = shifted_window(cells, window_offset)
    px, py = points[None, :], points[:, None]
    x1, y1 = px - sides[0], py - sides[1]
    x2, y2 = px + sides[2], py + sides[3]
    w, h = np.maximum(x2 - x1, 1e-6), np.maximum(y2 - y1, 1e-6)
    scale = _change(_side(w, h) / float(_side(last_size_crop[0], last_size_crop[1])))
    aspect = _change((last_size_crop[0] / last_size_crop[1]) / (w / h))
    penalty = np.exp(-(aspect * scale - 1.0) * config.penalty)
    ranked = penalty * expert * (1.0 - config.siamese_window) + window * config.siamese_window
    best = np.unravel_index(int(np.argmax(ranked)), ranked.shape)
    center = np.array([(x1[best] + x2[best]) / 2, (y1[best] + y2[best]) / 2])
    size = np.array([w[best], h[best]])
    rate = float(penalty[best] * score[best] * config.size_rate)
    return center, size, rate, float(score[best])


class SiameseBoxEstimator:
    """NanoTrack's networks (v2 or v3) as a box estimator (module docstring).

    The networks are checked when it is built, on blank crops: the backbone takes a 127 px
    template crop and a 255 px search crop, giving features of one channel count C; the head
    takes them as ``input1`` and ``input2`` and gives ``output1`` (1, 2, G, G) and ``output2``
    (1, 4, G, G). A file that does not is refused in one line (ValueError).

    Args:
        backbone: the backbone's ``.onnx`` (its input's height and width free, as the shipped
            files': ``scripts/ship_nanotrack.py``).
        head: the neck and head's ``.onnx`` (inputs ``input1`` template, ``input2`` search).
        config: the decoding rule (its ``siamese_model`` says whose values it defaults to; the
            files are the caller's).
        threads: ONNX Runtime intra-op threads.

    Attributes:
        channels: C, the features' channels (48 for v2, 96 for v3).
        cells: G, the score map's side (16 for v2, 15 for v3).
    """

    def __init__(
        self,
        backbone: str | Path | bytes,
        head: str | Path | bytes,
        config: SiameseBoxConfig | None = None,
        threads: int = 1,
    ) -> None:
        self.config = config or SiameseBoxConfig()
        self.backbone = Session(backbone, threads)
        self.head = Session(head, threads)
        self.channels, self.cells = self._check(backbone, head)

    def _check(self, backbone, head) -> tuple[int, int]:
        """(C, G) of the networks, run once on blank crops (class docstring)."""
        names = {"backbone": backbone, "head": head}
        what = {k: "the given bytes" if isinstance(v, bytes) else str(v) for k, v in names.items()}
        if set(self.head.inputs) != {"input1", "input2"} or not {"output1", "output2"} <= set(
            self.head.outputs
        ):
            raise ValueError(
                f"{what['head']}: not a NanoTrack head (inputs input1, input2; outputs output1, "
                f"output2), it has inputs {', '.join(self.head.inputs)}"
            )
        try:
            template = self._features(np.zeros((EXEMPLAR_SIZE, EXEMPLAR_SIZE, 3), np.uint8))
            search = self._features(np.zeros((INSTANCE_SIZE, INSTANCE_SIZE, 3), np.uint8))
        except Exception as error:  # ONNX Runtime's own errors are many lines
            first = (str(error).strip() or type(error).__name__).splitlines()[0]
            raise ValueError(
                f"{what['backbone']}: not a NanoTrack backbone that takes {EXEMPLAR_SIZE} and "
                f"{INSTANCE_SIZE} px crops (its input's height and width must be free: "
                f"scripts/ship_nanotrack.py): {first}"
            ) from None
        channels = template.shape[1] if template.ndim == 4 else 0
        if template.ndim != 4 or search.ndim != 4 or search.shape[1] != channels:
            raise ValueError(
                f"{what['backbone']}: not a NanoTrack backbone (features {template.shape} and "
                f"{search.shape})"
            )
        try:
            out = self.head({"input1": template, "input2": search})
        except Exception as error:
            first = (str(error).strip() or type(error).__name__).splitlines()[0]
            raise ValueError(
                f"{what['head']}: does not take the backbone's {channels}-channel features "
                f"({what['backbone']}): {first}"
            ) from None
        logits, sides = out["output1"].shape, out["output2"].shape
        cells = logits[-1]
        if logits != (1, 2, cells, cells) or sides != (1, 4, cells, cells):
            raise ValueError(
                f"{what['head']}: not a NanoTrack head (outputs {logits} and {sides}, expected "
                "(1, 2, G, G) and (1, 4, G, G))"
            )
        return channels, cells

    def _features(self, patch: np.ndarray) -> np.ndarray:
        image = np.ascontiguousarray(patch.transpose(2, 0, 1)[None], dtype=np.float32)
        return self.backbone({self.backbone.inputs[0]: image})[self.backbone.outputs[0]]

    def template(self, frame: np.ndarray, center: np.ndarray, size: np.ndarray) -> np.ndarray:
        """(1, C, 8, 8) template features of the target at ``center``, ``size`` (frame px) of
        ``frame`` (uint8 RGB (H, W, 3))."""
        side = template_side(size, self.config.siamese_context)
        patch, _ = crop_square(frame, tuple(center), side, EXEMPLAR_SIZE)
        return self._features(patch)

    def search_side(self, size: np.ndarray) -> float:
        """Side (frame px) of the search crop of a target of ``size`` (w, h): 255 / 127 times
        the template's (:func:`template_side`); the one-pass trackers crop their search regions
        with it."""
        return template_side(size, self.config.siamese_context) * INSTANCE_SIZE / EXEMPLAR_SIZE

    def search(
        self, frame: np.ndarray, center: np.ndarray, size: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """The search crop of a target last seen at ``center``, ``size`` (frame px) in ``frame``
        (uint8 RGB): ``(patch, matrix, scale)``, the (255, 255, 3) crop, its frame -> crop map
        and crop px per frame px (module docstring)."""
        patch, matrix = crop_square(frame, tuple(center), self.search_side(size), INSTANCE_SIZE)
        return patch, matrix, EXEMPLAR_SIZE / template_side(size, self.config.siamese_context)

    def features(self, images: np.ndarray) -> np.ndarray:
        """The backbone's features (N, C, 16, 16) of search crops ``images`` (N, 3, 255, 255)
        float32 (raw 0-255 RGB), one call."""
        return self.backbone({self.backbone.inputs[0]: images})[self.backbone.outputs[0]]

    def features_each(self, images: np.ndarray) -> np.ndarray:
        """:meth:`features` of ``images`` (N, 3, 255, 255), one image a call (the networks take
        one image): (N, C, 16, 16)."""
        parts = [self.features(image[None]) for image in images]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def decode(
        self,
        search: np.ndarray,
        template: np.ndarray,
        center: np.ndarray,
        size: np.ndarray,
        scale: float,
        prior: Callable[[np.ndarray], np.ndarray] | None = None,
        window_center: np.ndarray | None = None,
    ) -> SiameseFrame:
        """The target's box from the (1, C, 16, 16) ``search`` features of the crop centred on
        ``center`` (frame px) at ``scale`` crop px per frame px (:meth:`search`), the last
        ``size`` (frame px) and the ``template`` (:meth:`template`). ``prior``: another
        expert's factor (> 0) on the target score at frame points (N, 2) -> (N,)
        (:func:`decode_box`), None: the head alone; ``window_center``: the frame point the
        window is centred on (:func:`decode_box`'s ``window_offset``), None: the crop's
        centre."""
        out = self.head({"input1": template, "input2": search})
        logits, sides = out["output1"][0], out["output2"][0]
        factors = None
        if prior is not None:
            points, _ = _grid(logits.shape[-1])
            xs, ys = np.meshgrid(points, points)
            cells = np.stack([xs.ravel(), ys.ravel()], axis=1) / scale + center
            factors = np.asarray(prior(cells), dtype=np.float64).reshape(xs.shape)
        offset_window = None
        if window_center is not None:
            offset_window = (np.asarray(window_center, dtype=np.float64) - center) * scale
        offset, raw, rate, score = decode_box(
            logits, sides, size * scale, self.config, factors, offset_window
        )
        raw_size = raw / scale
        new_size = raw_size * rate + np.asarray(size, dtype=np.float64) * (1.0 - rate)
        return SiameseFrame(center + offset / scale, new_size, raw_size, score)

    def locate(
        self,
        frame: np.ndarray,
        center: np.ndarray,
        size: np.ndarray,
        template: np.ndarray,
        prior: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> SiameseFrame:
        """The target's box in ``frame`` (uint8 RGB), searched in a crop centred on ``center``
        (frame px) and scaled from the last ``size`` (frame px), the target's ``template``
        features (:meth:`template`): :meth:`search`, the backbone, :meth:`decode`."""
        patch, _, scale = self.search(frame, center, size)
        return self.decode(self._features(patch), template, center, size, scale, prior)
