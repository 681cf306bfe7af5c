"""Where the generated sequences' pixels come from: textures and targets cut from real images.

- a *texture source* (:data:`TextureSource`) paints the background, the targets, distractors and
  occluders: :func:`procedural_texture` (random patterns in random colours, no data needed) or
  :class:`ImageTextures` (random crops of real images);
- an *object source* (:data:`ObjectSource`) gives a target cut from a real image with its own
  surroundings: :class:`ObjectPatches`.

:mod:`ebmtrack.data.synthetic` renders sequences from them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import cv2
import numpy as np

from ebmtrack.data.io import read_image

TextureSource = Callable[[np.random.Generator, int, int], np.ndarray]
"""``source(rng, height, width)`` returns a uint8 RGB texture (height, width, 3)."""


def _smooth_noise(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    cell = rng.uniform(2.0, max(3.0, 0.3 * min(height, width)))
    grid = rng.standard_normal((max(2, round(height / cell)), max(2, round(width / cell))))
    field = cv2.resize(grid.astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)
    return (field - field.min()) / max(float(np.ptp(field)), 1e-6)


def _stripes(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    angle, period = rng.uniform(0, math.pi), rng.uniform(4.0, max(5.0, 0.5 * min(height, width)))
    phase = xs * math.cos(angle) + ys * math.sin(angle)
    return 0.5 + 0.5 * np.sin(2 * math.pi * phase / period + rng.uniform(0, 2 * math.pi))


def _checker(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    ys, xs = np.mgrid[0:height, 0:width]
    cell = int(rng.integers(3, max(4, min(height, width) // 3)))
    return ((xs // cell + ys // cell) % 2).astype(np.float32)


def _blobs(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    canvas = np.zeros((height, width), np.float32)
    for _ in range(int(rng.integers(3, 12))):
        center = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        radius = int(rng.integers(2, max(3, min(height, width) // 3)))
        cv2.circle(canvas, center, radius, float(rng.uniform(0.3, 1.0)), -1, cv2.LINE_AA)
    return canvas


_PATTERNS = (_smooth_noise, _stripes, _checker, _blobs)


def procedural_texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A random texture (height, width, 3) uint8: one or two patterns painted in random colours."""
    if height < 1 or width < 1:
        raise ValueError(f"texture size must be positive, got {height}x{width}")
    count = int(rng.integers(1, 3))
    kinds = rng.choice(len(_PATTERNS), size=count, replace=False)
    pattern = sum(_PATTERNS[k](rng, height, width) for k in kinds) / count
    colors = rng.uniform(0, 255, size=(2, 3)).astype(np.float32)
    image = colors[0] + (colors[1] - colors[0]) * pattern[..., None]
    image += rng.standard_normal(image.shape, dtype=np.float32) * np.float32(rng.uniform(0, 8))
    return np.clip(image, 0, 255).astype(np.uint8)


class ImageTextures:
    """Textures cut from real images: a random crop of a random image, resized.

    Args:
        images: uint8 images (H, W, 3) or (H, W); grayscale ones get three equal channels.
    """

    def __init__(self, images: Sequence[np.ndarray]):
        if len(images) == 0:
            raise ValueError("images must hold at least one image")
        self.images = []
        for index, image in enumerate(images):
            image = np.asarray(image)
            if image.dtype != np.uint8 or image.ndim not in (2, 3) or min(image.shape[:2]) < 8:
                raise ValueError(
                    f"images[{index}] must be uint8 (H, W[, 3]) with H, W >= 8, "
                    f"got {image.dtype} {image.shape}"
                )
            self.images.append(np.repeat(image[..., None], 3, 2) if image.ndim == 2 else image)

    @classmethod
    def from_files(cls, paths: Sequence[str | Path]) -> ImageTextures:
        """Read the images at ``paths`` (see :func:`ebmtrack.data.io.read_image`)."""
        return cls([read_image(p) for p in paths])

    def __call__(self, rng: np.random.Generator, height: int, width: int) -> np.ndarray:
        image = self.images[int(rng.integers(len(self.images)))]
        rows, cols = image.shape[:2]
        # The largest window of the requested aspect ratio, then a random share of it.
        scale = min(rows / height, cols / width) * rng.uniform(0.3, 1.0)
        crop_h, crop_w = max(1, round(height * scale)), max(1, round(width * scale))
        y0 = int(rng.integers(0, rows - crop_h + 1))
        x0 = int(rng.integers(0, cols - crop_w + 1))
        window = image[y0 : y0 + crop_h, x0 : x0 + crop_w]
        return cv2.resize(window, (width, height), interpolation=cv2.INTER_AREA)


ObjectSource = Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""``source(rng)`` returns ``(patch, alpha, box)``: a uint8 RGB patch (h, w, 3) holding one
object and its surroundings, its float32 opacity (h, w) and the object's box (x, y, w, h) in patch
pixels, strictly inside the patch."""


class ObjectPatches:
    """Targets cut from real images: one annotated object with its own surroundings.

    The patch is the object's box widened on every side by a random share ``context`` of the box's
    side (mirrored image content where that runs past the image border), and its opacity falls
    smoothly to 0 over the outer half of that margin. So the box lies inside the patch and no
    pasted edge coincides with it: a head cannot find the box by finding the paste.

    Args:
        collections: data sets of one-frame sequences (``len()``, ``[k]`` with ``frame(0)`` and
            ``ground_truth[0]``), e.g. :class:`~ebmtrack.data.datasets.stills.BoxListSequences`.
            An object is drawn uniformly over all of them.
        context: range of the margin, a share of the box's width (height) on each side.
        min_side: objects smaller than this (pixels, either side) are redrawn.
    """

    def __init__(
        self,
        collections: Sequence,
        context: tuple[float, float] = (0.2, 0.5),
        min_side: float = 12.0,
    ):
        self.collections = [c for c in collections if len(c) > 0]
        if not self.collections:
            raise ValueError("collections must hold at least one object")
        if not 0 < context[0] <= context[1]:
            raise ValueError(f"context must be a range 0 < low <= high, got {context}")
        self.sizes = np.cumsum([len(c) for c in self.collections])
        self.context = context
        self.min_side = min_side

    def __len__(self) -> int:
        return int(self.sizes[-1])

    def object(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(image, box) of object ``index`` over all collections."""
        which = int(np.searchsorted(self.sizes, index, side="right"))
        start = 0 if which == 0 else int(self.sizes[which - 1])
        sequence = self.collections[which][index - start]
        return sequence.frame(0), np.asarray(sequence.ground_truth[0], dtype=np.float64)

    def __call__(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        for _ in range(100):
            image, box = self.object(int(rng.integers(len(self))))
            if min(box[2], box[3]) >= self.min_side:
                break
        margin = rng.uniform(*self.context, size=2) * box[2:]
        x0, y0 = np.floor(box[:2] - margin).astype(int)
        x1, y1 = np.ceil(box[:2] + box[2:] + margin).astype(int)
        rows, cols = image.shape[:2]
        pad = max(0, -x0, -y0, x1 - cols, y1 - rows)
        if pad:
            image = cv2.copyMakeBorder(image, pad, pad, pad, pad, cv2.BORDER_REFLECT_101)
        patch = np.ascontiguousarray(image[y0 + pad : y1 + pad, x0 + pad : x1 + pad])
        inner = np.array([box[0] - x0, box[1] - y0, box[2], box[3]])
        return patch, _feather(patch.shape[:2], inner), inner


def _feather(size: tuple[int, int], box: np.ndarray) -> np.ndarray:
    """Opacity (h, w) float32: 1 over ``box`` and the inner half of the margin around it, falling
    linearly to 0 at the patch border."""
    height, width = size

    def ramp(n: int, low: float, high: float) -> np.ndarray:
        centres = np.arange(n) + 0.5
        rise = np.clip(centres / max(low / 2, 1e-6), 0, 1)
        fall = np.clip((n - centres) / max((n - high) / 2, 1e-6), 0, 1)
        return np.minimum(rise, fall).astype(np.float32)

    x, y, w, h = box
    return ramp(height, y, y + h)[:, None] * ramp(width, x, x + w)[None, :]
