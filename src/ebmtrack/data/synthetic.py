"""Procedurally generated tracking sequences: training and tests without a data set on disk.

Each sequence shows one textured target that moves, scales and rotates over a textured, slowly
panning background, with look-alike distractors passing behind it and occluders passing in front
of it. Everything random is drawn when the sequence is built, from its seed; frames are rendered
only when asked for, so a data set of any size costs no disk and little memory, and the same seed
always gives the same pixels.

A sequence offers the interface of :class:`ebmtrack.data.datasets.sequence.Sequence` that
training uses: ``name``, ``dataset``, ``ground_truth`` (N, 4), ``visible`` (N,), ``len()``,
``frame(i)``, ``init_box`` and ``annotated()``. Boxes follow the package convention (x, y, w, h,
pixel (0, 0) covers [0, 1) x [0, 1)); a box is the tightest box around the target's outline,
clipped to the frame, whether or not an occluder hides it. A frame counts as visible when at least
``min_visible_fraction`` of the target's area is in the frame and not covered by occluders.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from ebmtrack.data.sprites import (
    Sprite,
    ar1_filter,
    clip_polygon,
    coverage,
    polygon_area,
    random_walk,
    unit_outline,
)
from ebmtrack.data.textures import ObjectSource, TextureSource, procedural_texture

__all__ = [
    "SyntheticConfig",
    "SyntheticSequence",
    "SyntheticSequences",
    "ar1_filter",
]



@dataclass(frozen=True)
class SyntheticConfig:
    """Parameters of the generated sequences.

    Attributes:
        num_frames: frames per sequence.
        frame_size: (height, width) of the frames.
        target_scale: range of the target's sqrt(area) in the first frame, as a fraction of the
            frame's shorter side.
        max_aspect_ratio: the target's width/height lies in [1/r, r].
        speed: typical speed of targets and distractors, fraction of the shorter side per frame.
        scale_rate: typical per-frame change of log(scale).
        rotation_rate: largest rotation speed of the target, degrees per frame.
        num_distractors: inclusive range of look-alike objects that pass behind the target.
        num_occluders: inclusive range of objects that cross in front of the target.
        camera_speed: typical background pan, pixels per frame.
        min_visible_fraction: smallest visible share of the target's area for a visible frame.
        object_rotation: largest angle (degrees) of a target cut from a real image.
    """

    num_frames: int = 100
    frame_size: tuple[int, int] = (240, 320)
    target_scale: tuple[float, float] = (0.12, 0.4)
    max_aspect_ratio: float = 2.5
    speed: float = 0.015
    scale_rate: float = 0.01
    rotation_rate: float = 1.5
    num_distractors: tuple[int, int] = (0, 2)
    num_occluders: tuple[int, int] = (0, 2)
    camera_speed: float = 1.0
    min_visible_fraction: float = 0.3
    object_rotation: float = 5.0

    def __post_init__(self) -> None:
        if self.num_frames < 1:
            raise ValueError(f"num_frames must be >= 1, got {self.num_frames}")
        if len(self.frame_size) != 2 or min(self.frame_size) < 16:
            raise ValueError(
                f"frame_size must be (height, width), both >= 16, got {self.frame_size}"
            )
        low, high = self.target_scale
        if not 0 < low <= high <= 0.8:
            raise ValueError(f"target_scale must satisfy 0 < low <= high <= 0.8, got {low, high}")
        if self.max_aspect_ratio < 1:
            raise ValueError(f"max_aspect_ratio must be >= 1, got {self.max_aspect_ratio}")
        for name in ("num_distractors", "num_occluders"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(f"{name} must be a range 0 <= low <= high, got {low, high}")
        rates = ("speed", "scale_rate", "rotation_rate", "camera_speed", "object_rotation")
        for name in rates:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.min_visible_fraction <= 1:
            raise ValueError(
                f"min_visible_fraction must be in [0, 1], got {self.min_visible_fraction}"
            )


# ------------------------------------------------------------------------------------ sequences
class SyntheticSequence:
    """One generated sequence; see the module docstring.

    Args:
        name: the sequence name.
        config: generation parameters.
        seed: anything :func:`numpy.random.default_rng` accepts (e.g. ``(seed, index)``).
        textures: where textures come from (default :func:`procedural_texture`).
        objects: where real-image targets come from (:class:`ObjectPatches`); None: the target is
            a textured shape. A real-image target keeps its own aspect ratio (within
            ``max_aspect_ratio``, stretched by at most 15 %), turns by at most
            ``config.object_rotation`` degrees, and its box is the box of the object, not of the
            patch around it.
    """

    dataset = "synthetic"

    def __init__(
        self,
        name: str,
        config: SyntheticConfig = SyntheticConfig(),
        seed: int | Sequence[int] = 0,
        textures: TextureSource = procedural_texture,
        objects: ObjectSource | None = None,
    ):
        self.name = name
        self.config = config
        rng = np.random.default_rng(seed)
        height, width = config.frame_size
        short = min(height, width)
        n = config.num_frames

        if objects is None:
            self.target = self._make_target(rng, textures)
        else:
            self.target = self._make_object_target(rng, objects)
        self.distractors = [
            self._make_distractor(rng, self.target)
            for _ in range(
                int(rng.integers(config.num_distractors[0], config.num_distractors[1] + 1))
            )
        ]
        self.occluders = [
            self._make_occluder(rng, textures)
            for _ in range(int(rng.integers(config.num_occluders[0], config.num_occluders[1] + 1)))
        ]
        margin = max(1, math.ceil(0.1 * short))
        self._background = textures(rng, height + 2 * margin, width + 2 * margin)
        self._camera = np.rint(
            random_walk(
                rng, n, np.full(2, margin), np.zeros(2), np.full(2, 2 * margin), config.camera_speed
            )
        ).astype(int)

        polygons = self.target.box_polygons
        inside = np.all((polygons >= 0) & (polygons <= [width, height]), axis=(1, 2))
        # The box of the part inside the frame (the target's centre never leaves the frame).
        seen = [
            p if whole else clip_polygon(p, width, height) for p, whole in zip(polygons, inside)
        ]
        corners = np.array(
            [[p.min(axis=0), p.max(axis=0)] if len(p) else np.full((2, 2), np.nan) for p in seen]
        )  # (N, 2, 2)
        self.ground_truth = np.concatenate([corners[:, 0], corners[:, 1] - corners[:, 0]], axis=1)
        self.visible_fraction = np.array(
            [self._visible_fraction(i, polygons[i], seen[i]) for i in range(n)]
        )
        self.visible = (self.visible_fraction >= config.min_visible_fraction) & np.isfinite(
            self.ground_truth[:, 0]
        )

    # -- building -----------------------------------------------------------------------------
    def _trajectory(
        self,
        rng: np.random.Generator,
        size: np.ndarray,
        rotation_rate: float,
        max_angle: float = 20.0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cfg = self.config
        height, width = cfg.frame_size
        frame = np.array([width, height], dtype=np.float64)
        low, high = 0.1 * frame, 0.9 * frame
        centers = random_walk(
            rng, cfg.num_frames, rng.uniform(low, high), low, high, cfg.speed * min(frame)
        )
        # Scale wanders within [1/2, 2] of the start and keeps the shape within the frame.
        largest = math.log(0.8 * min(frame) / max(size))
        log_range = np.array([-math.log(2.0)]), np.array([min(math.log(2.0), largest)])
        log_scale = random_walk(rng, cfg.num_frames, np.zeros(1), *log_range, cfg.scale_rate)[:, 0]
        spin = rng.uniform(-rotation_rate, rotation_rate)
        angles = rng.uniform(-max_angle, max_angle) + spin * np.arange(cfg.num_frames)
        if max_angle < 20.0:  # real objects: the angle stays within +-max_angle
            angles = np.clip(angles, -max_angle, max_angle)
        return centers, np.exp(log_scale), angles

    def _make_object_target(self, rng: np.random.Generator, objects: ObjectSource) -> Sprite:
        cfg = self.config
        patch, alpha, box = objects(rng)
        side = rng.uniform(*cfg.target_scale) * min(cfg.frame_size)
        log_limit = math.log(cfg.max_aspect_ratio)
        aspect = math.exp(
            np.clip(math.log(box[2] / box[3]) + rng.uniform(-0.15, 0.15), -log_limit, log_limit)
        )
        object_size = np.array([side * math.sqrt(aspect), side / math.sqrt(aspect)])
        patch_size = np.array(patch.shape[1::-1], dtype=np.float64)
        size = object_size * patch_size / box[2:]  # the whole patch at scale 1
        angle = cfg.object_rotation
        centers, scales, angles = self._trajectory(rng, object_size, angle / 10, angle)
        # In the outline's [-1, 1] coordinates of the patch: the object's box.
        low = 2 * box[:2] / patch_size - 1
        high = 2 * (box[:2] + box[2:]) / patch_size - 1
        box_outline = np.array([[low[0], low[1]], [high[0], low[1]], high, [low[0], high[1]]])
        # Texture resolution for the largest scale (upsampled once, not per frame).
        scale = max(1.0, float(np.max(size * scales.max() / patch_size)))
        if scale > 1.0:
            shape = tuple(np.ceil(patch_size * scale).astype(int))
            patch = cv2.resize(patch, shape, interpolation=cv2.INTER_LINEAR)
            alpha = cv2.resize(alpha, shape, interpolation=cv2.INTER_LINEAR)
        rectangle = np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
        return Sprite(patch, rectangle, tuple(size), centers, scales, angles, alpha, box_outline)

    def _make_target(self, rng: np.random.Generator, textures: TextureSource) -> Sprite:
        cfg = self.config
        side = rng.uniform(*cfg.target_scale) * min(cfg.frame_size)
        aspect = math.exp(rng.uniform(-1, 1) * math.log(cfg.max_aspect_ratio))
        size = np.array([side * math.sqrt(aspect), side / math.sqrt(aspect)])
        centers, scales, angles = self._trajectory(rng, size, cfg.rotation_rate)
        # Enough texture resolution for the largest scale, so sprites are never blurred up.
        tex_w, tex_h = np.maximum(np.ceil(size * scales.max()), 4).astype(int)
        return Sprite(
            textures(rng, int(tex_h), int(tex_w)),
            unit_outline(rng),
            tuple(size),
            centers,
            scales,
            angles,
        )

    def _make_distractor(self, rng: np.random.Generator, target: Sprite) -> Sprite:
        """A look-alike: the target's texture, recoloured, on another shape and path."""
        size = np.asarray(target.size) * rng.uniform(0.7, 1.3, size=2)
        centers, scales, angles = self._trajectory(rng, size, self.config.rotation_rate)
        tint = rng.uniform(0.8, 1.2, size=3)
        texture = np.clip(target.texture.astype(np.float32) * tint, 0, 255).astype(np.uint8)
        if target.alpha is not None:  # a real object: the same patch, its opacity, recoloured
            return Sprite(
                texture, target.outline, tuple(size), centers, scales, angles, target.alpha
            )
        return Sprite(texture, unit_outline(rng), tuple(size), centers, scales, angles)

    def _make_occluder(self, rng: np.random.Generator, textures: TextureSource) -> Sprite:
        """An object crossing the frame in a straight line, meeting the target at a random time."""
        cfg = self.config
        n = cfg.num_frames
        size = np.asarray(self.target.size) * rng.uniform(0.5, 1.2, size=2)
        meet = int(rng.integers(n))
        target_size = np.asarray(self.target.size) * self.target.scales[meet]
        meeting_point = self.target.centers[meet] + rng.uniform(-0.5, 0.5, size=2) * target_size
        heading = rng.uniform(0, 2 * math.pi)
        speed = rng.uniform(1.0, 2.0) * max(cfg.speed, 1e-3) * min(cfg.frame_size)
        velocity = speed * np.array([math.cos(heading), math.sin(heading)])
        centers = meeting_point + velocity * (np.arange(n) - meet)[:, None]
        tex_w, tex_h = np.maximum(np.ceil(size), 4).astype(int)
        return Sprite(
            textures(rng, int(tex_h), int(tex_w)),
            unit_outline(rng),
            tuple(size),
            centers,
            np.ones(n),
            np.full(n, rng.uniform(0, 180)),
        )

    def _visible_fraction(self, index: int, polygon: np.ndarray, in_frame: np.ndarray) -> float:
        """Share of the target's area inside the frame and not under an occluder."""
        area = polygon_area(polygon)
        window = self.target.window(index, self.config.frame_size)
        if window is None or area <= 0 or len(in_frame) == 0:
            return 0.0
        x0, y0, x1, y1 = window
        occluding = [o.polygon(index) for o in self.occluders]
        occluding = [
            p
            for p in occluding
            if p[:, 0].max() > x0
            and p[:, 0].min() < x1
            and p[:, 1].max() > y0
            and p[:, 1].min() < y1
        ]
        if not occluding:  # exact, no rasterisation needed
            return min(polygon_area(in_frame) / area, 1.0)
        size = (x1 - x0, y1 - y0)
        seen = coverage(polygon, (x0, y0), size)
        for occluder in occluding:
            seen *= 1.0 - coverage(occluder, (x0, y0), size)
        return min(float(seen.sum()) / area, 1.0)

    # -- the sequence interface ---------------------------------------------------------------
    def __len__(self) -> int:
        return self.config.num_frames

    def background(self, index: int) -> np.ndarray:
        """Frame ``index`` without any object, uint8 (H, W, 3)."""
        height, width = self.config.frame_size
        x, y = self._camera[index]
        return self._background[y : y + height, x : x + width].copy()

    def frame(self, index: int, keep_gray: bool = False) -> np.ndarray:
        """Render frame ``index`` as uint8 RGB (H, W, 3). ``keep_gray`` has no effect (frames are
        in colour); it is accepted for the interface of real sequences."""
        if not -len(self) <= index < len(self):
            raise IndexError(f"frame index {index} out of range for {len(self)} frames")
        index %= len(self)
        canvas = self.background(index).astype(np.float32)
        for sprite in (*self.distractors, self.target, *self.occluders):
            sprite.draw(canvas, index)
        return np.clip(np.rint(canvas), 0, 255).astype(np.uint8)

    @property
    def init_box(self) -> np.ndarray:
        """The first frame's box (4,)."""
        return self.ground_truth[0].copy()

    def annotated(self) -> np.ndarray:
        """(N,) bool: frames whose target is visible (every box is known)."""
        return self.visible.copy()


class SyntheticSequences:
    """A data set of ``num_sequences`` generated sequences, built on access.

    Sequence ``i`` depends only on ``(seed, i)``, the config and the texture and object sources.
    """

    def __init__(
        self,
        num_sequences: int = 1000,
        config: SyntheticConfig = SyntheticConfig(),
        seed: int = 0,
        textures: TextureSource = procedural_texture,
        objects: ObjectSource | None = None,
    ):
        if num_sequences < 1:
            raise ValueError(f"num_sequences must be >= 1, got {num_sequences}")
        self.num_sequences = int(num_sequences)
        self.config = config
        self.seed = int(seed)
        self.textures = textures
        self.objects = objects

    def __len__(self) -> int:
        return self.num_sequences

    def __getitem__(self, index: int) -> SyntheticSequence:
        if not 0 <= index < self.num_sequences:
            raise IndexError(f"sequence index {index} out of range for {self.num_sequences}")
        return SyntheticSequence(
            f"synthetic-{self.seed}-{index:06d}",
            self.config,
            (self.seed, int(index)),
            self.textures,
            self.objects,
        )
