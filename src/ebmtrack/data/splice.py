"""Spliced sequences: ordinary sequences turned into long-term tracking tests.

Two kinds, both built from any :class:`~ebmtrack.data.datasets.Sequence` (an OTB-layout folder, a
benchmark reader's, the training pack's) and deterministic from a seed:

- ``absent``: ``length`` consecutive frames in the middle of the host are replaced by
  consecutive frames of another video (a *donor*, resized to the host's frame size). The target
  is absent there: its box is NaN and ``visible`` False. After them the host resumes with its own
  frame and box, so the target returns where the host video has it.
- ``occluded``: for ``length`` frames a patch cut from a donor frame is pasted over the target:
  one static rectangle covering every box of the target in those frames (grown by ``margin``),
  as an object passing in front would. Those frames are flagged absent as well (full occlusion
  counts as absence, as in VOT-LT and LaSOT).

The spliced frames are composed when read (:meth:`SplicedSequence.frame`); nothing is written to
disk. A :class:`SplicedSequence` is a :class:`Sequence` (picklable, so the evaluation runner's
workers take it) whose ``frames`` name the file each frame comes from.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass

import cv2
import numpy as np

from ebmtrack.data.datasets.sequence import Sequence
from ebmtrack.data.io import read_image

__all__ = ["SPLICE_KINDS", "SplicedSequence", "splice", "splice_set"]

SPLICE_KINDS = ("absent", "occluded")

# Frames kept before and after the spliced part, at least.
_MIN_BEFORE = 10
_MIN_AFTER = 10


@dataclass(frozen=True, eq=False)
class SplicedSequence(Sequence):
    """A sequence with a spliced part (see the module docstring).

    Attributes (besides :class:`Sequence`'s):
        host: name of the sequence it was built from.
        kind: ``absent`` or ``occluded``.
        span: (start, stop) frame indices of the spliced part, stop exclusive.
        frame_size: (W, H) of the host's frames: frames of other sizes are resized to it.
        occluder: for ``occluded``: (x0, y0, x1, y1) integer pixel rectangle covered in frames
            ``span``, the donor frame the patch is cut from and its (x0, y0, x1, y1) there.
    """

    host: str = ""
    kind: str = "absent"
    span: tuple[int, int] = (0, 0)
    frame_size: tuple[int, int] = (0, 0)
    occluder: tuple | None = None

    def frame(self, index: int, keep_gray: bool = False) -> np.ndarray:
        """Frame ``index`` as uint8 RGB (H, W, 3) at the host's size (``keep_gray`` is ignored:
        spliced frames may mix colour and grayscale sources)."""
        image = read_image(self.frames[index])
        width, height = self.frame_size
        if image.shape[:2] != (height, width):
            image = cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)
        start, stop = self.span
        if self.occluder is not None and start <= index < stop:
            (x0, y0, x1, y1), source, (u0, v0, u1, v1) = self.occluder
            patch = read_image(source)[v0:v1, u0:u1]
            image = image.copy()
            image[y0:y1, x0:x1] = cv2.resize(patch, (x1 - x0, y1 - y0))
        return image


def _size_of(sequence: Sequence) -> tuple[int, int]:
    height, width = read_image(sequence.frames[0]).shape[:2]
    return width, height


def _span(num_frames: int, length: int, rng: np.random.Generator) -> tuple[int, int]:
    """A (start, stop) of ``length`` frames in the middle half of ``num_frames`` when it fits,
    always leaving ``_MIN_BEFORE`` frames before and ``_MIN_AFTER`` after."""
    low = max(_MIN_BEFORE, num_frames // 4)
    high = min(num_frames - _MIN_AFTER, (3 * num_frames) // 4) - length
    if high < low:
        low, high = _MIN_BEFORE, num_frames - _MIN_AFTER - length
    if high < low:
        raise ValueError(
            f"a spliced part of {length} frames needs at least "
            f"{length + _MIN_BEFORE + _MIN_AFTER} frames, the host has {num_frames}"
        )
    start = int(rng.integers(low, high + 1))
    return start, start + length


def _donor_frames(donor: Sequence, length: int, rng: np.random.Generator) -> list:
    """``length`` consecutive frames of ``donor``, back and forth when it is shorter."""
    if len(donor) >= length:
        first = int(rng.integers(0, len(donor) - length + 1))
        return list(donor.frames[first : first + length])
    cycle = list(donor.frames) + list(donor.frames[-2:0:-1])
    return [cycle[i % len(cycle)] for i in range(length)]


def _occluder(
    boxes: np.ndarray, size: tuple[int, int], margin: float, donor: Sequence, rng
) -> tuple:
    """The rectangle covering ``boxes`` (k, 4) grown by ``margin`` of their size, and the patch
    of a random donor frame pasted there (same aspect ratio, at most the donor frame)."""
    width, height = size
    x0, y0 = np.min(boxes[:, :2], axis=0)
    x1, y1 = np.max(boxes[:, :2] + boxes[:, 2:], axis=0)
    grow = margin * np.median(boxes[:, 2:], axis=0)
    x0, x1 = int(np.floor(max(x0 - grow[0], 0))), int(np.ceil(min(x1 + grow[0], width)))
    y0, y1 = int(np.floor(max(y0 - grow[1], 0))), int(np.ceil(min(y1 + grow[1], height)))
    source = donor.frames[int(rng.integers(0, len(donor)))]
    donor_w, donor_h = _size_of(donor)
    scale = min(1.0, donor_w / (x1 - x0), donor_h / (y1 - y0))
    pw, ph = max(1, int((x1 - x0) * scale)), max(1, int((y1 - y0) * scale))
    u0, v0 = int(rng.integers(0, donor_w - pw + 1)), int(rng.integers(0, donor_h - ph + 1))
    return (x0, y0, x1, y1), source, (u0, v0, u0 + pw, v0 + ph)


def splice(
    host: Sequence,
    donors: Seq[Sequence],
    kind: str,
    length: int,
    seed: int,
    margin: float = 0.25,
) -> SplicedSequence:
    """Build one spliced sequence from ``host`` (see the module docstring).

    Args:
        host: the sequence whose target is tracked; all its frames must be annotated.
        donors: sequences to take the absent frames or the occluder from (the host itself is
            skipped); one is drawn.
        kind: ``absent`` or ``occluded``.
        length: frames in the spliced part; it lies in the middle half of the host where it
            fits, with at least 10 frames before and after.
        seed: the draws (part, donor, donor frames, patch) come from ``numpy.random.
            default_rng(seed)``: the same seed builds the same sequence.
        margin: ``occluded``: the rectangle grows by this fraction of the target's size on
            each side.

    Returns:
        A :class:`SplicedSequence` named ``HOST-KIND`` with the host's ground truth, NaN rows
        and ``visible`` False in the spliced part.
    """
    if kind not in SPLICE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(SPLICE_KINDS)}, got {kind!r}")
    if not (isinstance(length, int) and length >= 1):
        raise ValueError(f"length must be a positive int, got {length!r}")
    if not host.annotated().all():
        raise ValueError(f"{host.name}: every frame of a host must be annotated")
    pool = [d for d in donors if d.name != host.name and len(d)]
    if not pool:
        raise ValueError(f"{host.name}: no donor sequence other than the host")
    rng = np.random.default_rng(seed)
    start, stop = _span(len(host), length, rng)
    donor = pool[int(rng.integers(0, len(pool)))]
    size = _size_of(host)
    frames = list(host.frames)
    occluder = None
    if kind == "absent":
        frames[start:stop] = _donor_frames(donor, length, rng)
    else:
        occluder = _occluder(host.ground_truth[start:stop], size, margin, donor, rng)
    truth = host.ground_truth.copy()
    truth[start:stop] = np.nan
    visible = np.ones(len(host), dtype=bool)
    visible[start:stop] = False
    return SplicedSequence(
        name=f"{host.name}-{kind}",
        frames=tuple(frames),
        ground_truth=truth,
        visible=visible,
        dataset=f"spliced:{host.dataset}",
        host=host.name,
        kind=kind,
        span=(start, stop),
        frame_size=size,
        occluder=occluder,
    )


def splice_set(
    hosts: Seq[Sequence],
    length: int | float = 0.3,
    seed: int = 0,
    kinds: Seq[str] = SPLICE_KINDS,
    donors: Seq[Sequence] | None = None,
) -> list[SplicedSequence]:
    """One spliced sequence of each kind per host, the others (or ``donors``) as donors.

    ``length``: frames per spliced part, or a fraction (< 1) of each host's length (at least
    one frame). Host ``i``, kind ``j`` is built with seed ``seed * 1000 + 10 * i + j``.
    """
    pool = list(hosts if donors is None else donors)
    result = []
    for i, host in enumerate(hosts):
        frames = length if isinstance(length, int) else max(1, round(length * len(host)))
        for j, kind in enumerate(kinds):
            result.append(splice(host, pool, kind, frames, seed * 1000 + 10 * i + j))
    return result
