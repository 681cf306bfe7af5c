"""``data.source: folder``: a folder of real sequences in a leave-some-out fold, generated
sequences textured with real images, and still frames used as 1-frame sequences (the data of the
``default-cpu`` and ``dimp-cpu`` presets).

Three collections, sampled by ``data.weights`` (keys :data:`COLLECTIONS`):

- ``sequences``: the sequences of ``data.sequence_folder`` (OTB/VOT-style, read with
  :func:`~ebmtrack.data.datasets.folder.load_folder`) except those named in ``data.holdout``;
- ``stills``: every ``STILL_STRIDE``-th frame of those sequences as a 1-frame sequence (reference
  and test frame are the same image, told apart only by the crop jitter: ATOM's use of COCO);
- ``synthetic``: ``data.synthetic_sequences`` generated sequences whose targets, distractors and
  backgrounds are cut from real images: frames of the training sequences (never the held-out ones)
  and scikit-image's bundled sample photographs.

Validation pairs come from the held-out sequences only, so validation measures sequences the head
never saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.datasets.sequence import Sequence
from ebmtrack.data.synthetic import SyntheticSequences
from ebmtrack.data.textures import ImageTextures

from .base import DataSource, SourceData, register_source

COLLECTIONS = ("sequences", "stills", "synthetic")
"""The collections of a folder or a training pack: the keys of ``data.weights``."""
STILL_STRIDE = 5
TEXTURE_STRIDE = 25
SKIMAGE_PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "camera", "hubble_deep_field")
"""scikit-image sample images (bundled with the package, no download) used as textures."""


def split_fold(
    sequences: list[Sequence], holdout: list[str]
) -> tuple[list[Sequence], list[Sequence]]:
    """``(train, held_out)``; ValueError naming unknown held-out names and the valid ones."""
    names = [s.name for s in sequences]
    unknown = sorted(set(holdout) - set(names))
    if unknown:
        raise ValueError(f"data.holdout names unknown sequences {unknown}; valid: {names}")
    train = [s for s in sequences if s.name not in holdout]
    held_out = [s for s in sequences if s.name in holdout]
    if not train or not held_out:
        raise ValueError("data.holdout must leave at least one sequence on each side of the fold")
    return train, held_out


def still_frames(sequences: list[Sequence], stride: int = STILL_STRIDE) -> list[Sequence]:
    """Every ``stride``-th annotated frame of ``sequences`` as a 1-frame :class:`Sequence`."""
    stills = []
    for sequence in sequences:
        usable = np.flatnonzero(sequence.annotated())
        for index in usable[::stride]:
            stills.append(
                Sequence(
                    f"{sequence.name}-{index:04d}",
                    (sequence.frames[index],),
                    sequence.ground_truth[index : index + 1],
                    dataset="stills",
                )
            )
    return stills


def texture_images(sequences: list[Sequence], stride: int = TEXTURE_STRIDE) -> list[np.ndarray]:
    """Every ``stride``-th frame of ``sequences`` plus :data:`SKIMAGE_PHOTOS`."""
    try:
        import skimage.data
    except ImportError as err:
        raise ImportError(
            "data.source folder textures its generated sequences with scikit-image's sample "
            "images: pip install 'ebmtrack[train]'"
        ) from err
    images = [s.frame(i) for s in sequences for i in range(0, len(s), stride)]
    return images + [getattr(skimage.data, name)() for name in SKIMAGE_PHOTOS]


def local_sources(
    sequence_folder: str, holdout: list[str], synthetic_sequences: int, seed: int
) -> tuple[dict[str, list], list[Sequence]]:
    """The training collections ``{name: collection}`` of :data:`COLLECTIONS` (``synthetic`` only
    when ``synthetic_sequences`` > 0) and the held-out sequences."""
    train, held_out = split_fold(load_folder(sequence_folder), list(holdout))
    sources: dict[str, list] = {"sequences": train, "stills": still_frames(train)}
    if synthetic_sequences > 0:
        textures = ImageTextures(texture_images(train))
        sources["synthetic"] = SyntheticSequences(synthetic_sequences, seed=seed, textures=textures)
    return sources, held_out


def check_weights(source: str, weights) -> None:
    """ValueError naming the keys of ``data.weights`` that are not :data:`COLLECTIONS`."""
    unknown = sorted(set(weights) - set(COLLECTIONS))
    if unknown:
        raise ValueError(
            f"data.weights names {unknown}; valid with data.source {source}: {COLLECTIONS}"
        )


@dataclass
class FolderSettings:
    """The ``data`` fields of ``source: folder``.

    Attributes:
        sequence_folder: a folder of OTB/VOT-style sequences (required).
        holdout: names of its sequences left out of training; validation samples come from them.
        synthetic_sequences: how many generated sequences textured with its frames.
        weights: collection (:data:`COLLECTIONS`) -> relative sampling probability (default 1).
    """

    sequence_folder: str | None = None
    holdout: list[str] = field(default_factory=list)
    synthetic_sequences: int = 0
    weights: dict[str, float] = field(default_factory=dict)


@register_source
class FolderSource(DataSource):
    """The sequences of ``data.sequence_folder`` except ``data.holdout``, their still frames and
    ``data.synthetic_sequences`` generated sequences textured with their frames (see the module
    docstring); validation on the held-out sequences."""

    name = "folder"
    Settings = FolderSettings
    folder_setting = "sequence_folder"

    def check(self) -> None:
        if self.data.sequence_folder is None:
            raise ValueError("data.source folder needs data.sequence_folder (a sequence folder)")
        check_weights(self.name, self.data.weights)

    def collections(self, seed: int) -> SourceData:
        data = self.data
        sources, held_out = local_sources(
            data.sequence_folder, data.holdout, data.synthetic_sequences, seed
        )
        return SourceData(list(sources.values()), self.weights_of(sources), [held_out])
