"""Reference/test frame pairs for offline training, drawn reproducibly from weighted data sets.

Pair ``i`` of a :class:`TrackingPairs` depends only on ``(seed, i)``: a random generator seeded by
both picks a data set (by weight), a sequence (uniformly), a visible reference frame (uniformly)
and a visible test frame at most ``max_gap`` frames away from it (uniformly, the reference frame
itself included, as in the reference code's "interval" mode), then drives the processing's random
augmentation. So a pair is the same in any process, worker or epoch, training can resume anywhere,
and distributed training only has to split the indices (any sampler will do).

A data set is any collection with ``len()`` and ``[k]`` returning a sequence that offers the
interface of :class:`ebmtrack.data.datasets.sequence.Sequence`: ``name``, ``len()``,
``frame(i)``, ``ground_truth`` (N, 4) and ``annotated()`` (N,) (boxes known and target visible).
The readers' lists, :class:`~ebmtrack.data.coco.CocoSequences` and
:class:`~ebmtrack.data.synthetic.SyntheticSequences` all qualify.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from torch.utils.data import Dataset


class FrameSequence(Protocol):
    """What pair sampling needs of a sequence."""

    name: str
    ground_truth: np.ndarray

    def __len__(self) -> int: ...

    def frame(self, index: int) -> np.ndarray: ...

    def annotated(self) -> np.ndarray: ...


class SequenceCollection(Protocol):
    """A data set of sequences."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> FrameSequence: ...


@dataclass(frozen=True)
class FramePair:
    """Two frames of one sequence and the target's box (x, y, w, h) in each."""

    ref_frame: np.ndarray
    ref_box: np.ndarray
    test_frame: np.ndarray
    test_box: np.ndarray
    sequence: str
    ref_index: int
    test_index: int


PairProcessing = Callable[[FramePair, np.random.Generator], Any]
"""``processing(pair, rng)``: turns a pair into a training sample, drawing randomness from rng."""


def choose_frames(usable: np.ndarray, max_gap: int, rng: np.random.Generator) -> tuple[int, int]:
    """Indices (reference, test) of two usable frames at most ``max_gap`` apart.

    The reference is uniform over the usable frames, the test frame uniform over the usable frames
    within ``max_gap`` of it (the reference included, so one usable frame gives a pair).
    Raises ValueError when no frame is usable.
    """
    candidates = np.flatnonzero(usable)
    if len(candidates) == 0:
        raise ValueError("the sequence has no usable frame")
    ref = int(candidates[rng.integers(len(candidates))])
    near = candidates[np.abs(candidates - ref) <= max_gap]
    return ref, int(near[rng.integers(len(near))])


class TrackingPairs(Dataset):
    """A map-style data set of ``num_pairs`` training pairs; see the module docstring.

    Args:
        datasets: the data sets to draw from.
        weights: relative probability of each data set (default: equal).
        processing: applied to each :class:`FramePair` (e.g.
            :class:`~ebmtrack.data.processing.AtomProcessing`); None returns the pair itself.
        num_pairs: the number of distinct pairs (``len``). Make it at least the number of pairs
            a whole training run draws, so that epochs do not repeat pairs.
        max_gap: largest distance in frames between reference and test frame (50 in the
            reference code, 100 according to the paper).
        min_visible_frames: a sequence is used only when it has at least this many usable frames
            (or all its frames are usable, for short sequences such as still images).
        seed: the seed of every draw.
        max_tries: sequences to try per pair before giving up on a data set.
    """

    def __init__(
        self,
        datasets: SequenceOf[SequenceCollection],
        weights: SequenceOf[float] | None = None,
        processing: PairProcessing | None = None,
        num_pairs: int = 3_200_000,
        max_gap: int = 50,
        min_visible_frames: int = 5,
        seed: int = 0,
        max_tries: int = 100,
    ):
        if len(datasets) == 0:
            raise ValueError("datasets must hold at least one data set")
        empty = [k for k, d in enumerate(datasets) if len(d) == 0]
        if empty:
            raise ValueError(f"datasets {empty} hold no sequence")
        weights = np.ones(len(datasets)) if weights is None else np.asarray(weights, dtype=float)
        if weights.shape != (len(datasets),) or not np.all(weights >= 0) or weights.sum() <= 0:
            raise ValueError(
                f"weights must be {len(datasets)} non-negative numbers, not all zero, "
                f"got {np.asarray(weights).tolist()}"
            )
        for name, value, low in (
            ("num_pairs", num_pairs, 1),
            ("max_gap", max_gap, 0),
            ("min_visible_frames", min_visible_frames, 1),
            ("max_tries", max_tries, 1),
        ):
            if int(value) != value or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value}")
        self.datasets = list(datasets)
        self.probabilities = weights / weights.sum()
        self.processing = processing
        self.num_pairs = int(num_pairs)
        self.max_gap = int(max_gap)
        self.min_visible_frames = int(min_visible_frames)
        self.seed = int(seed)
        self.max_tries = int(max_tries)

    def __len__(self) -> int:
        return self.num_pairs

    def _usable_frames(self, sequence: FrameSequence) -> np.ndarray | None:
        usable = np.asarray(sequence.annotated(), dtype=bool)
        enough = min(self.min_visible_frames, len(sequence))
        return usable if usable.sum() >= enough and usable.any() else None

    def draw_pair(self, rng: np.random.Generator) -> tuple[int, FramePair]:
        """(data set index, pair) drawn with ``rng``."""
        which = int(rng.choice(len(self.datasets), p=self.probabilities))
        dataset = self.datasets[which]
        for _ in range(self.max_tries):
            sequence = dataset[int(rng.integers(len(dataset)))]
            usable = self._usable_frames(sequence)
            if usable is None:
                continue
            ref, test = choose_frames(usable, self.max_gap, rng)
            pair = FramePair(
                ref_frame=sequence.frame(ref),
                ref_box=np.array(sequence.ground_truth[ref], dtype=np.float64),
                test_frame=sequence.frame(test),
                test_box=np.array(sequence.ground_truth[test], dtype=np.float64),
                sequence=sequence.name,
                ref_index=ref,
                test_index=test,
            )
            return which, pair
        raise ValueError(
            f"datasets[{which}]: no sequence with {self.min_visible_frames} usable frames in "
            f"{self.max_tries} tries"
        )

    def rng(self, index: int) -> np.random.Generator:
        """The generator of pair ``index``."""
        return np.random.default_rng([self.seed, int(index)])

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < self.num_pairs:
            raise IndexError(f"pair index {index} out of range for {self.num_pairs}")
        rng = self.rng(index)
        _, pair = self.draw_pair(rng)
        return pair if self.processing is None else self.processing(pair, rng)


# ------------------------------------------------------------------------------ data sets on disk
TRAINING_SPLITS = {"lasot": "train", "got10k": "train", "trackingnet": "train", "coco": "train2017"}
"""The data sets :func:`load_training_sets` opens, and the split it reads by default."""


def _load_one(name: str, root: Path, split: str) -> SequenceCollection:
    from ebmtrack.data.coco import CocoSequences
    from ebmtrack.data.datasets.benchmarks import load_got10k, load_lasot, load_trackingnet

    if name == "coco":
        return CocoSequences(root, split)
    if name == "lasot":
        return load_lasot(root, split)
    if name == "got10k":
        return load_got10k(root, split)
    # TrackingNet: "train", one chunk "TRAIN_3", or several "TRAIN_0,TRAIN_1".
    return [s for chunk in split.split(",") for s in load_trackingnet(root, chunk.strip())]


def load_training_sets(
    roots: Mapping[str, str | Path], splits: Mapping[str, str] | None = None
) -> dict[str, SequenceCollection]:
    """Open the training data sets named in ``roots`` ({name: root folder}).

    Names are the keys of :data:`TRAINING_SPLITS`; ``splits`` overrides their default splits.
    Every set is tried before failing, and one FileNotFoundError lists everything missing.
    """
    splits = dict(splits or {})
    unknown = sorted((set(roots) | set(splits)) - set(TRAINING_SPLITS))
    if unknown:
        raise ValueError(
            f"unknown training data set(s) {', '.join(unknown)}; "
            f"valid names: {', '.join(TRAINING_SPLITS)}"
        )
    opened, missing = {}, []
    for name, root in roots.items():
        try:
            opened[name] = _load_one(name, Path(root), splits.get(name, TRAINING_SPLITS[name]))
        except (FileNotFoundError, NotADirectoryError) as err:
            missing.append(str(err))  # the readers' messages start with the set's name
    if missing:
        raise FileNotFoundError("training data missing:\n- " + "\n- ".join(missing))
    return opened
