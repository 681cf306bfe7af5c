"""The drawing pieces of :mod:`ebmtrack.data.synthetic`: random outlines, smooth random walks,
polygons clipped and rasterised with anti-aliasing, and :class:`Sprite`, a textured shape on its
trajectory pasted into frames."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import cv2
import numpy as np

__all__ = [
    "Sprite",
    "ar1_filter",
    "clip_polygon",
    "coverage",
    "polygon_area",
    "random_walk",
    "unit_outline",
]

_SUBPIXEL_BITS = 4  # fixed-point precision of cv2.fillPoly vertices


# ------------------------------------------------------------------------------------ geometry
def unit_outline(rng: np.random.Generator) -> np.ndarray:
    """A random shape outline (P, 2) whose bounding box is exactly [-1, 1]^2."""
    kind = int(rng.integers(3))
    if kind == 0:  # rectangle
        return np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
    if kind == 1:  # ellipse
        angles = np.linspace(0, 2 * math.pi, 48, endpoint=False)
    else:  # star-shaped polygon
        angles = np.sort(rng.uniform(0, 2 * math.pi, size=int(rng.integers(5, 10))))
    radii = np.ones_like(angles) if kind == 1 else rng.uniform(0.55, 1.0, size=angles.shape)
    points = np.stack([radii * np.cos(angles), radii * np.sin(angles)], axis=1)
    low, high = points.min(axis=0), points.max(axis=0)
    return 2.0 * (points - low) / (high - low) - 1.0


def ar1_filter(noise: np.ndarray, smoothness: float, previous: np.ndarray) -> np.ndarray:
    """(T, D) AR(1) sequence ``v[t] = noise[t] + smoothness * v[t - 1]`` from ``v[-1] =
    previous`` (D,): the same numbers, to the bit, as ``scipy.signal.lfilter([1], [1,
    -smoothness], noise, axis=0, zi=smoothness * previous[None])``."""
    out = np.empty_like(noise, dtype=np.float64)
    state = np.asarray(previous, dtype=np.float64)
    for t in range(len(noise)):
        state = noise[t] + smoothness * state
        out[t] = state
    return out


def random_walk(
    rng: np.random.Generator,
    num_steps: int,
    start: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    step_std: float,
    smoothness: float = 0.9,
) -> np.ndarray:
    """(num_steps, D) smooth walk from ``start``: AR(1) velocities of stationary std ``step_std``,
    bouncing off the walls of the box [low, high].

    A walk that bounces is the free walk folded into the box (each wall a mirror), which is how it
    is computed, without a loop.
    """
    start = np.asarray(start, dtype=np.float64)
    first = rng.normal(0.0, step_std, size=start.shape)
    noise = rng.normal(
        0.0, step_std * math.sqrt(1 - smoothness**2), size=(num_steps - 1, start.size)
    )
    velocity = ar1_filter(noise, smoothness, first)
    free = start + np.concatenate([np.zeros((1, start.size)), np.cumsum(velocity, axis=0)])
    span = np.maximum(np.asarray(high, dtype=np.float64) - low, 1e-12)
    folded = np.mod(free - low, 2 * span)
    return low + span - np.abs(folded - span)


def clip_polygon(points: np.ndarray, width: float, height: float) -> np.ndarray:
    """The part (P', 2) of a polygon inside [0, width] x [0, height] (Sutherland-Hodgman)."""
    for axis, limit, keep_below in (
        (0, 0.0, False),
        (0, width, True),
        (1, 0.0, False),
        (1, height, True),
    ):
        if len(points) == 0:
            break
        inside = points[:, axis] <= limit if keep_below else points[:, axis] >= limit
        clipped = []
        for k in range(len(points)):
            current, previous = points[k], points[k - 1]
            if inside[k] != inside[k - 1]:  # the edge crosses the line: keep the crossing
                share = (limit - previous[axis]) / (current[axis] - previous[axis])
                clipped.append(previous + share * (current - previous))
            if inside[k]:
                clipped.append(current)
        points = np.array(clipped).reshape(-1, 2)
    return points


def polygon_area(points: np.ndarray) -> float:
    return float(cv2.contourArea(points.astype(np.float32))) if len(points) >= 3 else 0.0


def _to_opencv(matrix: np.ndarray) -> np.ndarray:
    """Our continuous coordinates put pixel centres at +0.5, OpenCV's at integers."""
    shift_in = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    return (np.vstack([matrix, [0.0, 0.0, 1.0]]) @ shift_in)[:2] - np.array([[0, 0, 0.5]] * 2)


def coverage(polygon: np.ndarray, origin: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    """Anti-aliased share of each pixel of the window at ``origin`` (x, y) of ``size`` (w, h)
    inside ``polygon`` (P, 2) frame coordinates; float32 (h, w) in [0, 1]."""
    canvas = np.zeros((size[1], size[0]), np.uint8)
    local = (polygon - np.asarray(origin) - 0.5) * (1 << _SUBPIXEL_BITS)
    cv2.fillPoly(canvas, [np.round(local).astype(np.int32)], 255, cv2.LINE_AA, _SUBPIXEL_BITS)
    return canvas.astype(np.float32) / 255.0


@dataclass(frozen=True)
class Sprite:
    """A textured shape and its trajectory: per-frame centre (N, 2), scale (N,), angle (N,) deg.

    At scale 1 the shape's bounding box, before rotation, is ``size`` (w, h) pixels. A sprite cut
    from a real image (:class:`ObjectPatches`) carries its opacity ``alpha`` (texture pixels) and
    ``box_outline``, the object's box within the texture in the outline's [-1, 1] coordinates; the
    target's box follows that outline instead of the shape's.
    """

    texture: np.ndarray
    outline: np.ndarray
    size: tuple[float, float]
    centers: np.ndarray
    scales: np.ndarray
    angles: np.ndarray
    alpha: np.ndarray | None = None
    box_outline: np.ndarray | None = None

    def _place(self, outline: np.ndarray) -> np.ndarray:
        """``outline`` (P, 2) in frame coordinates in every frame (N, P, 2)."""
        angle = np.radians(self.angles)[:, None]
        half = 0.5 * np.asarray(self.size) * self.scales[:, None]  # (N, 2)
        local = outline[None] * half[:, None, :]  # (N, P, 2)
        x = local[..., 0] * np.cos(angle) - local[..., 1] * np.sin(angle)
        y = local[..., 0] * np.sin(angle) + local[..., 1] * np.cos(angle)
        return np.stack([x, y], axis=-1) + self.centers[:, None, :]

    @cached_property
    def polygons(self) -> np.ndarray:
        """The outline in frame coordinates in every frame (N, P, 2)."""
        return self._place(self.outline)

    @cached_property
    def box_polygons(self) -> np.ndarray:
        """What the target's box is the box of, in every frame (N, P, 2): the object's box for a
        real-image sprite, else the outline."""
        return self.polygons if self.box_outline is None else self._place(self.box_outline)

    def polygon(self, index: int) -> np.ndarray:
        """The outline in frame coordinates in frame ``index`` (P, 2)."""
        return self.polygons[index]

    def matrix(self, index: int) -> np.ndarray:
        """Affine (2, 3) from continuous texture coordinates to frame coordinates."""
        angle = math.radians(self.angles[index])
        tex_h, tex_w = self.texture.shape[:2]
        scale = np.array([self.size[0] / tex_w, self.size[1] / tex_h]) * self.scales[index]
        rotation = np.array(
            [[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]]
        )
        linear = rotation * scale  # rotation @ diag(scale)
        offset = self.centers[index] - linear @ np.array([tex_w / 2.0, tex_h / 2.0])
        return np.concatenate([linear, offset[:, None]], axis=1)

    def window(self, index: int, frame_size: tuple[int, int]) -> tuple[int, int, int, int] | None:
        """Integer pixel window (x0, y0, x1, y1) of the frame that the sprite touches, or None."""
        polygon = self.polygon(index)
        height, width = frame_size
        x0, y0 = np.floor(polygon.min(axis=0)).astype(int) - 1
        x1, y1 = np.ceil(polygon.max(axis=0)).astype(int) + 1
        x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, width), min(y1, height)
        return (int(x0), int(y0), int(x1), int(y1)) if x1 > x0 and y1 > y0 else None

    def draw(self, canvas: np.ndarray, index: int) -> None:
        """Alpha-composite the sprite onto ``canvas`` (H, W, 3) float32, in place."""
        window = self.window(index, canvas.shape[:2])
        if window is None:
            return
        x0, y0, x1, y1 = window
        matrix = _to_opencv(self.matrix(index) - np.array([[0, 0, x0], [0, 0, y0]]))
        size = (x1 - x0, y1 - y0)

        def warp(image: np.ndarray, border: int) -> np.ndarray:
            return cv2.warpAffine(image, matrix, size, flags=cv2.INTER_LINEAR, borderMode=border)

        patch = warp(self.texture, cv2.BORDER_REPLICATE).astype(np.float32)
        if self.alpha is None:
            alpha = coverage(self.polygon(index), (x0, y0), size)[..., None]
        else:  # outside the texture nothing is pasted (BORDER_CONSTANT is 0)
            alpha = warp(self.alpha, cv2.BORDER_CONSTANT)[..., None]
        region = canvas[y0:y1, x0:x1]
        region += alpha * (patch - region)
