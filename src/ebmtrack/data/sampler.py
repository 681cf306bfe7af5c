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

:class:`TrackingFrameSets` draws DiMP's samples the same way: several training frames and, after
them, several test frames of one sequence (:func:`choose_frame_sets`, DiMP's "causal" mode).
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


def _positions(candidates: np.ndarray, frame_numbers: np.ndarray | None) -> np.ndarray:
    """Where the candidate frames lie in their video: their numbers there, else their indices."""
    return candidates if frame_numbers is None else np.asarray(frame_numbers)[candidates]


def choose_frames(
    usable: np.ndarray,
    max_gap: int,
    rng: np.random.Generator,
    frame_numbers: np.ndarray | None = None,
) -> tuple[int, int]:
    """Indices (reference, test) of two usable frames at most ``max_gap`` apart.

    The reference is uniform over the usable frames, the test frame uniform over the usable frames
    within ``max_gap`` of it (the reference included, so one usable frame gives a pair). Distances
    are in ``frame_numbers`` (the source video's numbering of a subsampled sequence) when given,
    else in indices. Raises ValueError when no frame is usable.
    """
    reference, (test,) = choose_reference_and_tests(usable, max_gap, rng, frame_numbers)
    return reference, test


def choose_reference_and_tests(
    usable: np.ndarray,
    max_gap: int,
    rng: np.random.Generator,
    frame_numbers: np.ndarray | None = None,
    num_tests: int = 1,
) -> tuple[int, list[int]]:
    """A reference frame and ``num_tests`` test frames, each drawn as :func:`choose_frames` draws
    its one (independently, so they may repeat); with one test the same draws as there."""
    candidates = np.flatnonzero(usable)
    if len(candidates) == 0:
        raise ValueError("the sequence has no usable frame")
    positions = _positions(candidates, frame_numbers)
    pick = int(rng.integers(len(candidates)))
    near = candidates[np.abs(positions - positions[pick]) <= max_gap]
    return int(candidates[pick]), [int(near[rng.integers(len(near))]) for _ in range(num_tests)]


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

    def draw_sequence(self, rng: np.random.Generator) -> tuple[int, FrameSequence, np.ndarray]:
        """(data set index, sequence, its usable-frame mask) drawn with ``rng``: a data set by
        weight, then sequences uniformly until one has enough usable frames."""
        which = int(rng.choice(len(self.datasets), p=self.probabilities))
        dataset = self.datasets[which]
        for _ in range(self.max_tries):
            sequence = dataset[int(rng.integers(len(dataset)))]
            usable = self._usable_frames(sequence)
            if usable is not None:
                return which, sequence, usable
        raise ValueError(
            f"datasets[{which}]: no sequence with {self.min_visible_frames} usable frames in "
            f"{self.max_tries} tries"
        )

    def draw_pair(self, rng: np.random.Generator) -> tuple[int, FramePair]:
        """(data set index, pair) drawn with ``rng``."""
        which, sequence, usable = self.draw_sequence(rng)
        numbers = getattr(sequence, "frame_numbers", None)
        ref, test = choose_frames(usable, self.max_gap, rng, numbers)
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

    def rng(self, index: int) -> np.random.Generator:
        """The generator of pair ``index``."""
        return np.random.default_rng([self.seed, int(index)])

    def group(self, index: int, size: int) -> list[Any]:
        """``size`` samples that share one reference frame and its crop: draw ``index`` with
        ``size`` test frames (:func:`choose_reference_and_tests`), each test frame near the
        reference, through the processing's ``group`` (e.g.
        :meth:`~ebmtrack.data.processing.AtomProcessing.group`). ``group(i, 1)[0]`` is pair
        ``i``. Samples of one group are not independent draws: a trainer that reads them counts
        distinct (reference crop, test crop) pairs, ``size`` per reference."""
        if not 0 <= index < self.num_pairs:
            raise IndexError(f"group index {index} out of range for {self.num_pairs}")
        if int(size) != size or size < 1:
            raise ValueError(f"size must be an integer >= 1, got {size}")
        if not hasattr(self.processing, "group"):
            raise ValueError(f"the processing {type(self.processing).__name__} makes no groups")
        rng = self.rng(index)
        _, sequence, usable = self.draw_sequence(rng)
        numbers = getattr(sequence, "frame_numbers", None)
        reference, tests = choose_reference_and_tests(usable, self.max_gap, rng, numbers, int(size))
        frames = [
            (sequence.frame(t), np.array(sequence.ground_truth[t], dtype=np.float64)) for t in tests
        ]
        ref_box = np.array(sequence.ground_truth[reference], dtype=np.float64)
        return self.processing.group(sequence.frame(reference), ref_box, frames, rng)

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < self.num_pairs:
            raise IndexError(f"pair index {index} out of range for {self.num_pairs}")
        rng = self.rng(index)
        _, pair = self.draw_pair(rng)
        return pair if self.processing is None else self.processing(pair, rng)


# ----------------------------------------------------------------------- multi-frame samples (DiMP)
@dataclass(frozen=True)
class FrameSet:
    """``k`` training and ``m`` test frames of one sequence with the target's box in each.

    ``train_indices[0]`` is the base frame; every test frame comes after every training frame.
    """

    train_frames: list[np.ndarray]
    train_boxes: np.ndarray
    test_frames: list[np.ndarray]
    test_boxes: np.ndarray
    sequence: str
    train_indices: tuple[int, ...]
    test_indices: tuple[int, ...]


FrameSetProcessing = Callable[[FrameSet, np.random.Generator], Any]
"""``processing(frame_set, rng)``: turns a frame set into a training sample."""


def choose_frame_sets(
    usable: np.ndarray,
    num_train: int,
    num_test: int,
    max_gap: int,
    rng: np.random.Generator,
    frame_numbers: np.ndarray | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Indices (train, test) of usable frames sampled causally, as DiMP's sampler does.

    A base frame is drawn uniformly among the usable frames that have a usable frame at most
    ``max_gap`` frames after them. The training frames are the base and ``num_train - 1`` usable
    frames of ``[base - max_gap, base]``; the test frames are ``num_test`` usable frames of
    ``(base, base + max_gap]``; both drawn uniformly with replacement. So every test frame comes
    after every training frame and lies at most ``max_gap`` after the base. Two departures from
    the reference (``ltr/data/sampler.py``, mode ``causal``), which widens the gap by 5 frames
    until frames are found: the base itself may be repeated among the training frames, and a
    sequence with no such base (a still image, or usable frames further apart than ``max_gap``)
    repeats one usable frame everywhere, as the reference does for image data sets.

    Distances are in ``frame_numbers`` when given (see :func:`choose_frames`).
    Raises ValueError when no frame is usable.
    """
    candidates = np.flatnonzero(usable)
    if len(candidates) == 0:
        raise ValueError("the sequence has no usable frame")
    positions = _positions(candidates, frame_numbers)
    has_next = np.flatnonzero(np.diff(positions) <= max_gap)  # the next usable frame is close
    if len(has_next) == 0:
        only = int(candidates[rng.integers(len(candidates))])
        return (only,) * num_train, (only,) * num_test
    pick = int(has_next[rng.integers(len(has_next))])
    base, at = int(candidates[pick]), positions[pick]
    before = candidates[(positions >= at - max_gap) & (positions <= at)]
    after = candidates[(positions > at) & (positions <= at + max_gap)]
    train = (base, *(int(i) for i in before[rng.integers(len(before), size=num_train - 1)]))
    test = tuple(int(i) for i in after[rng.integers(len(after), size=num_test)])
    return train, test


class TrackingFrameSets(TrackingPairs):
    """A map-style data set of ``num_samples`` :class:`FrameSet` samples (DiMP's training data).

    Sample ``i`` depends only on ``(seed, i)``, as a pair of :class:`TrackingPairs` does: the
    data set, the sequence (same rules and arguments as there), the frames
    (:func:`choose_frame_sets`) and the processing's randomness all come from one generator.

    Args:
        datasets, weights, min_visible_frames, seed, max_tries: as for :class:`TrackingPairs`.
        processing: applied to each :class:`FrameSet` (e.g.
            :class:`~ebmtrack.data.processing.DiMPProcessing`); None returns the set itself.
        num_samples: the number of distinct samples (``len``).
        num_train_frames, num_test_frames: frames of each kind per sample (DiMP: 3 and 3).
        max_gap: see :func:`choose_frame_sets` (DiMP-18/50: 30).
    """

    def __init__(
        self,
        datasets: SequenceOf[SequenceCollection],
        weights: SequenceOf[float] | None = None,
        processing: FrameSetProcessing | None = None,
        num_samples: int = 26_000,
        num_train_frames: int = 3,
        num_test_frames: int = 3,
        max_gap: int = 30,
        min_visible_frames: int = 5,
        seed: int = 0,
        max_tries: int = 100,
    ):
        super().__init__(
            datasets, weights, None, num_samples, max_gap, min_visible_frames, seed, max_tries
        )
        for name, value in (
            ("num_train_frames", num_train_frames),
            ("num_test_frames", num_test_frames),
        ):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value}")
        self.processing = processing
        self.num_train_frames = int(num_train_frames)
        self.num_test_frames = int(num_test_frames)

    def draw_frame_set(self, rng: np.random.Generator) -> tuple[int, FrameSet]:
        """(data set index, frame set) drawn with ``rng``."""
        which, sequence, usable = self.draw_sequence(rng)
        train, test = choose_frame_sets(
            usable,
            self.num_train_frames,
            self.num_test_frames,
            self.max_gap,
            rng,
            getattr(sequence, "frame_numbers", None),
        )

        def boxes(indices: tuple[int, ...]) -> np.ndarray:
            return np.array([sequence.ground_truth[i] for i in indices], dtype=np.float64)

        frames = {i: sequence.frame(i) for i in set(train) | set(test)}  # each read once
        frame_set = FrameSet(
            train_frames=[frames[i] for i in train],
            train_boxes=boxes(train),
            test_frames=[frames[i] for i in test],
            test_boxes=boxes(test),
            sequence=sequence.name,
            train_indices=train,
            test_indices=test,
        )
        return which, frame_set

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < self.num_pairs:
            raise IndexError(f"sample index {index} out of range for {self.num_pairs}")
        rng = self.rng(index)
        _, frame_set = self.draw_frame_set(rng)
        return frame_set if self.processing is None else self.processing(frame_set, rng)


# ------------------------------------------------------------------------------ data sets on disk
TRAINING_SPLITS = {
    "lasot": "train",
    "got10k": "train",
    "trackingnet": "train",
    "coco": "train2017",
    "folder": "",
    "yolo": "",
    "boxlist": "",
}
"""The data sets :func:`load_training_sets` opens, and the split it reads by default: the
benchmarks, a folder of OTB-layout sequences (``frames.txt`` read where present), YOLO-labelled
images (split: a sub-folder of ``images/``, empty for all) and a box list file."""


def _load_one(name: str, root: Path, split: str) -> SequenceCollection:
    from ebmtrack.data.coco import CocoSequences
    from ebmtrack.data.datasets.benchmarks import load_got10k, load_lasot, load_trackingnet
    from ebmtrack.data.datasets.folder import load_folder
    from ebmtrack.data.datasets.stills import BoxListSequences, YoloSequences

    if name == "coco":
        return CocoSequences(root, split)
    if name == "folder":
        return load_folder(root)
    if name == "yolo":
        return YoloSequences(root, split or None)
    if name == "boxlist":
        return BoxListSequences(root)
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
