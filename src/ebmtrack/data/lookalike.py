"""Look-alike sequences: ordinary sequences turned into tests of tracking among similar objects.

In a flock of similar animals a tracker's box can grow over a neighbour and then jump to it; an
ordinary clip with one such target cannot show it. A look-alike sequence keeps the host's frames
and ground truth and pastes ``copies`` look-alikes near the target in every frame:

- **appearance**: each copy is the target itself, cut from the host's frame a few frames earlier
  or later (``lag``: the frame index reflected at the ends), so it moves like the target without
  being pixel-identical, resized by a per-copy factor (``scale``). It is blended with a feathered
  elliptical mask (opacity 1 inside, falling smoothly to 0 at an ellipse a little larger than
  its box), so no rectangle edge marks it.
- **trajectory**, relative to the target and measured in target sizes (the offset of the copy's
  centre from the target's, divided by the target's width and height: a distance under 1 means
  the boxes overlap for copies of the target's size): it starts ``distance`` (1-2.5) sizes away
  at a random angle, waits there a while, then passes across the target to the far side (within
  0.5 sizes of the target's centre on the way), waits, passes back, and so on; every copy crosses
  the target at least once. A small smooth random walk (:func:`~ebmtrack.data.sprites.
  random_walk`) is added throughout, and the copy's box is kept inside the frame.
- **target on top**: copies pass *behind* the target: after they are pasted, the target's own
  pixels are pasted back inside a feathered ellipse around its box, so the target's middle keeps
  the host's pixels exactly.

Everything is drawn from ``numpy.random.default_rng(seed)`` when the sequence is built; frames
are composed when read (:meth:`LookalikeSequence.frame`), nothing is written to disk. A
:class:`LookalikeSequence` is a :class:`Sequence` (picklable, so the evaluation runner's workers
take it) over the host's frame files; ``distractors`` lists the copies' boxes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import cv2
import numpy as np

from ebmtrack.data.datasets.sequence import Sequence
from ebmtrack.data.io import read_image
from ebmtrack.data.sprites import random_walk

__all__ = ["LookalikeSequence", "lookalike", "lookalike_set", "target_distance"]

# The copies' mask: an ellipse of semi-axes COPY_OUTER / 2 times their box's sides, opaque within
# COPY_INNER of that, so it reaches a little past the box's sides and cuts its corners.
COPY_OUTER, COPY_INNER = 1.3, 0.75
# The target's mask, pasted back over the copies: just past its box, opaque over most of it.
TARGET_OUTER, TARGET_INNER = 1.1, 0.85
# A pass's path misses the target's centre by at most this many target sizes (angle between the
# two sides: pi +- _MAX_TURN) before the random walk is added.
_MAX_TURN = math.radians(20.0)
# Smooth random walk added to every path: within +-WOBBLE target sizes on each axis.
WOBBLE, _WOBBLE_STEP = 0.15, 0.03


@dataclass(frozen=True, eq=False)
class LookalikeSequence(Sequence):
    """A sequence with look-alikes of its target pasted near it (see the module docstring).

    Attributes (besides :class:`Sequence`'s, which are the host's):
        host: name of the sequence it was built from.
        frame_size: (W, H) of the host's frames.
        sources: (N, C) int64: the host frame each copy is cut from in each frame.
        scales: (C,) each copy's size over the target's in its source frame.
        distractors: (N, C, 4) float64 boxes (x, y, w, h) of the copies' targets in each frame.
    """

    host: str = ""
    frame_size: tuple[int, int] = (0, 0)
    sources: np.ndarray | None = None
    scales: np.ndarray | None = None
    distractors: np.ndarray | None = None

    def frame(self, index: int, keep_gray: bool = False) -> np.ndarray:
        """Frame ``index`` as uint8 RGB (H, W, 3), copies pasted (``keep_gray`` is ignored)."""
        host = read_image(self.frames[index]).astype(np.float32)
        canvas = host.copy()
        for copy, source in enumerate(self.sources[index]):
            image = read_image(self.frames[source])
            _paste_copy(canvas, image, self.ground_truth[source], self.distractors[index, copy])
        # The target passes in front: its own pixels back inside its ellipse.
        window = _window(self.ground_truth[index], TARGET_OUTER, canvas.shape)
        if window is not None:
            x0, y0, x1, y1 = window
            alpha = _ellipse_alpha(self.ground_truth[index], TARGET_OUTER, TARGET_INNER, window)[
                ..., None
            ]
            region = canvas[y0:y1, x0:x1]
            region[:] = region * (1 - alpha) + host[y0:y1, x0:x1] * alpha
        return np.clip(np.rint(canvas), 0, 255).astype(np.uint8)


def target_distance(boxes: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Distance from the target's centre to the centres of ``boxes`` (..., 4), in target sizes:
    the norm of the centre offset divided by the target's (w, h); ``target`` (4,) or broadcast
    against ``boxes``. Returns (...,)."""
    boxes, target = np.asarray(boxes, np.float64), np.asarray(target, np.float64)
    offset = boxes[..., :2] + boxes[..., 2:] / 2 - target[..., :2] - target[..., 2:] / 2
    return np.linalg.norm(offset / target[..., 2:], axis=-1)


def _window(box: np.ndarray, outer: float, shape: tuple) -> tuple[int, int, int, int] | None:
    """Integer pixel window (x0, y0, x1, y1) of a frame of ``shape`` (H, W, ...) holding the
    ellipse of semi-axes ``outer`` / 2 times the sides of ``box`` (4,), or None outside."""
    centre, half = box[:2] + box[2:] / 2, outer * box[2:] / 2
    x0, y0 = np.floor(centre - half).astype(int) - 1
    x1, y1 = np.ceil(centre + half).astype(int) + 1
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, shape[1]), min(y1, shape[0])
    return (int(x0), int(y0), int(x1), int(y1)) if x1 > x0 and y1 > y0 else None


def _ellipse_alpha(
    box: np.ndarray, outer: float, inner: float, window: tuple[int, int, int, int]
) -> np.ndarray:
    """Feathered elliptical opacity over ``window`` (h, w) float32: 1 within ``inner`` of the
    ellipse of semi-axes ``outer`` / 2 times the sides of ``box`` (4,), falling smoothly
    (smoothstep) to 0 at that ellipse."""
    x0, y0, x1, y1 = window
    centre, half = box[:2] + box[2:] / 2, np.maximum(outer * box[2:] / 2, 1e-6)
    xs = (np.arange(x0, x1) + 0.5 - centre[0]) / half[0]
    ys = (np.arange(y0, y1) + 0.5 - centre[1]) / half[1]
    radius = np.sqrt(xs[None, :] ** 2 + ys[:, None] ** 2)
    share = np.clip((1.0 - radius) / (1.0 - inner), 0.0, 1.0)
    return (share * share * (3.0 - 2.0 * share)).astype(np.float32)


def _paste_copy(canvas: np.ndarray, image: np.ndarray, source: np.ndarray, box: np.ndarray) -> None:
    """Blend the target of ``image`` (its box ``source`` (4,)) into ``canvas`` (H, W, 3) float32
    at ``box`` (4,), resized to it, with the copies' feathered elliptical mask; in place."""
    window = _window(box, COPY_OUTER, canvas.shape)
    if window is None:
        return
    x0, y0, x1, y1 = window
    scale = box[2:] / source[2:]
    source_centre, centre = source[:2] + source[2:] / 2, box[:2] + box[2:] / 2
    # Window pixel (i, j) -> image pixel: continuous coordinates put pixel centres at +0.5.
    shift = source_centre + (np.array([x0, y0]) + 0.5 - centre) / scale - 0.5
    matrix = np.array([[1 / scale[0], 0.0, shift[0]], [0.0, 1 / scale[1], shift[1]]])
    patch = cv2.warpAffine(
        image,
        matrix,
        (x1 - x0, y1 - y0),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_REFLECT_101,
    ).astype(np.float32)
    alpha = _ellipse_alpha(box, COPY_OUTER, COPY_INNER, window)[..., None]
    region = canvas[y0:y1, x0:x1]
    region[:] = region * (1 - alpha) + patch * alpha


def _reflect(index: np.ndarray, length: int) -> np.ndarray:
    """Indices (...,) reflected into [0, length): ..., 2, 1, 0, 1, 2, ..., n-1, n-2, ..."""
    if length == 1:
        return np.zeros_like(index)
    period = 2 * (length - 1)
    folded = np.mod(index, period)
    return np.where(folded < length, folded, period - folded)


def _path(
    rng: np.random.Generator,
    num_frames: int,
    distance: tuple[float, float],
    pass_frames: tuple[int, int],
    hold_frames: tuple[int, int],
) -> np.ndarray:
    """(num_frames, 2) offsets from the target's centre in target sizes: wait at a point
    ``distance`` away, pass across the target to a point on the far side, wait, pass back, ...,
    the first pass always inside the sequence; plus a smooth random walk within +-``WOBBLE``."""
    angle = rng.uniform(0, 2 * math.pi)
    radius = rng.uniform(*distance)
    point = radius * np.array([math.cos(angle), math.sin(angle)])
    first_pass = int(rng.integers(pass_frames[0], pass_frames[1] + 1))
    first_pass = min(first_pass, max(num_frames - 1, 1))
    hold = int(rng.integers(hold_frames[0], hold_frames[1] + 1))
    hold = min(hold, max(num_frames - 1 - first_pass, 0))
    path = [np.repeat(point[None], hold + 1, axis=0)]
    length, frames = hold + 1, first_pass
    while length < num_frames:
        angle += math.pi + rng.uniform(-_MAX_TURN, _MAX_TURN)
        radius = rng.uniform(*distance)
        target = radius * np.array([math.cos(angle), math.sin(angle)])
        ease = (1 - np.cos(math.pi * np.arange(1, frames + 1) / frames)) / 2  # smooth start, stop
        hold = int(rng.integers(hold_frames[0], hold_frames[1] + 1))
        path += [point + ease[:, None] * (target - point), np.repeat(target[None], hold, axis=0)]
        length += frames + hold
        point, frames = target, int(rng.integers(pass_frames[0], pass_frames[1] + 1))
    wobble = random_walk(
        rng, num_frames, np.zeros(2), np.full(2, -WOBBLE), np.full(2, WOBBLE), _WOBBLE_STEP
    )
    return np.concatenate(path)[:num_frames] + wobble


def lookalike(
    host: Sequence,
    seed: int,
    copies: int = 2,
    distance: tuple[float, float] = (1.0, 2.5),
    scale: tuple[float, float] = (0.8, 1.25),
    lag: tuple[int, int] = (3, 8),
    pass_frames: tuple[int, int] = (20, 40),
    hold_frames: tuple[int, int] = (0, 15),
) -> LookalikeSequence:
    """Build one look-alike sequence from ``host`` (see the module docstring).

    Args:
        host: the sequence whose target is copied; every frame annotated, frames read from its
            files (``host.frames``), all of one size.
        seed: every draw comes from ``numpy.random.default_rng(seed)``: the same seed builds the
            same sequence.
        copies: look-alikes in every frame (at least 1).
        distance: (low, high) distance of the copies' resting points from the target, in target
            sizes (offset over the target's (w, h)).
        scale: (low, high) of each copy's size over the target's (log-uniform).
        lag: (low, high) frames between a copy's frame and the host frame it is cut from
            (earlier or later, reflected at the ends).
        pass_frames: (low, high) frames a pass across the target takes.
        hold_frames: (low, high) frames a copy waits between passes.

    Returns:
        A :class:`LookalikeSequence` named ``HOST-lookalike`` with the host's frames, ground
        truth and flags; ``distractors`` (N, copies, 4) the copies' boxes.
    """
    if not (isinstance(copies, int) and copies >= 1):
        raise ValueError(f"copies must be a positive int, got {copies!r}")
    if not 0 < distance[0] <= distance[1]:
        raise ValueError(f"distance must be 0 < low <= high, got {distance!r}")
    if not 0 < scale[0] <= scale[1]:
        raise ValueError(f"scale must be 0 < low <= high, got {scale!r}")
    if not (0 <= lag[0] <= lag[1] and 1 <= pass_frames[0] <= pass_frames[1]):
        raise ValueError(f"lag and pass_frames must be ordered ranges, got {lag}, {pass_frames}")
    if not 0 <= hold_frames[0] <= hold_frames[1]:
        raise ValueError(f"hold_frames must be 0 <= low <= high, got {hold_frames!r}")
    if not host.annotated().all():
        raise ValueError(f"{host.name}: every frame of a host must be annotated")
    rng = np.random.default_rng(seed)
    num_frames = len(host)
    height, width = read_image(host.frames[0]).shape[:2]
    truth = host.ground_truth
    frames = np.arange(num_frames)
    sources = np.empty((num_frames, copies), dtype=np.int64)
    scales = np.exp(rng.uniform(np.log(scale[0]), np.log(scale[1]), size=copies))
    boxes = np.empty((num_frames, copies, 4))
    for copy in range(copies):
        shift = int(rng.integers(lag[0], lag[1] + 1)) * (1 if rng.random() < 0.5 else -1)
        sources[:, copy] = _reflect(frames + shift, num_frames)
        size = scales[copy] * truth[sources[:, copy], 2:]
        offset = _path(rng, num_frames, distance, pass_frames, hold_frames)
        centre = truth[:, :2] + truth[:, 2:] / 2 + offset * truth[:, 2:]
        # The copy's box stays inside the frame.
        low, high = size / 2, np.array([width, height]) - size / 2
        centre = np.clip(centre, low, np.maximum(high, low))
        boxes[:, copy] = np.concatenate([centre - size / 2, size], axis=1)
    return LookalikeSequence(
        name=f"{host.name}-lookalike",
        frames=host.frames,
        ground_truth=truth.copy(),
        visible=None if host.visible is None else host.visible.copy(),
        attributes=host.attributes,
        dataset=f"lookalike:{host.dataset}",
        frame_numbers=host.frame_numbers,
        host=host.name,
        frame_size=(width, height),
        sources=sources,
        scales=scales,
        distractors=boxes,
    )


def lookalike_set(
    hosts: Seq[Sequence], seed: int = 0, copies: int = 2, **settings
) -> list[LookalikeSequence]:
    """One look-alike sequence per host; host ``i`` is built with seed ``seed * 1000 + i``
    (``settings``: :func:`lookalike`'s other arguments)."""
    return [lookalike(host, seed * 1000 + i, copies, **settings) for i, host in enumerate(hosts)]
