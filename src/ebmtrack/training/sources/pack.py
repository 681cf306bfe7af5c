"""``data.source: pack``: a training pack of real tracks and still images, and generated sequences
whose targets are objects cut from those images (the data of the ``pack-cpu``, ``pack-stream``
and ``dimp-pack-cpu`` presets).

A training pack is a folder with any of these parts (:data:`PARTS`):

- ``sequences/``: OTB-layout tracks, ``frames.txt`` giving each stored image's frame number in its
  video (:func:`~ebmtrack.data.datasets.folder.load_folder`);
- ``stills/coco128/``: YOLO-labelled images (:class:`~ebmtrack.data.datasets.stills.YoloSequences`);
- ``stills/tiny-imagenet/boxes.txt``: a box list
  (:class:`~ebmtrack.data.datasets.stills.BoxListSequences`);
- ``clips/``: OTB-layout clips of consecutive real frames (50 each in the shared pack).

Three collections, sampled by ``data.weights`` (keys ``sequences``, ``stills``, ``synthetic``):

- ``sequences``: the pack's tracks except ``data.holdout`` (the first ``data.pack_tracks`` of
  them when that is > 0) and, with ``clips``, the clips except :data:`CLIP_HOLDOUT`;
- ``stills``: every ``STILL_STRIDE``-th frame of those tracks and, with ``coco128``, its objects,
  each a one-frame sequence;
- ``synthetic``: ``data.synthetic_sequences`` generated sequences whose target is an object cut
  with its surroundings (:class:`~ebmtrack.data.textures.ObjectPatches`) from the training
  tracks' frames, and, with those parts, from coco128 and Tiny ImageNet; backgrounds and
  occluders are cut from the training tracks' frames and coco128's images.

Validation pairs come from the held-out tracks (and, with ``clips``, the held-out clips) only,
never from the test sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.datasets.sequence import Sequence
from ebmtrack.data.datasets.stills import BoxListSequences, YoloSequences
from ebmtrack.data.io import read_image
from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences
from ebmtrack.data.textures import ImageTextures, ObjectPatches

from .base import DataSource, SourceData, register_source
from .folder import check_weights, split_fold, still_frames

PARTS = ("sequences", "coco128", "tiny-imagenet", "clips")
DEFAULT_PARTS = ("sequences", "coco128", "tiny-imagenet")
"""The parts a config uses unless it names them (the presets recorded before ``clips`` existed)."""
PART_PATHS = {
    "sequences": "sequences",
    "coco128": "stills/coco128",
    "tiny-imagenet": "stills/tiny-imagenet",
    "clips": "clips",
}
PACK_HOLDOUT = ("Biker", "boat1", "car1", "group2_2", "zebrafish1")
"""Tracks of the training pack kept for validation: five videos from four benchmarks, none of
them sharing a video with a training track."""
CLIP_HOLDOUT = ("Biker", "boat1", "car1", "group2_2", "zebrafish1", "Dog", "Gym", "Gym_b")
"""Clips of the training pack kept for validation and for choosing settings on consecutive real
frames: the clips of the five held-out tracks' videos and three OTB clips (two of one video) that
no training track or clip shares a video with."""
TEXTURE_STRIDE = 10
COCO_TEXTURE_STRIDE = 4


def pack_sources(
    pack: str,
    parts: list[str],
    holdout: list[str],
    tracks: int,
    synthetic_sequences: int,
    seed: int,
    synthetic_config: SyntheticConfig | None = None,
) -> tuple[dict[str, list], list[Sequence]]:
    """The training collections ``{name: collection}`` and the held-out tracks of a training pack.

    Raises ValueError for an unknown part or a part whose folder is missing (naming it).
    """
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or "sequences" not in parts:
        raise ValueError(
            f"data.pack_parts must include 'sequences' and name parts of {', '.join(PARTS)}, "
            f"got {parts}"
        )
    root = Path(pack)
    missing = [str(root / PART_PATHS[p]) for p in parts if not (root / PART_PATHS[p]).exists()]
    if missing:
        raise FileNotFoundError(f"data.pack {root}: missing {', '.join(missing)}")
    train, held_out = split_fold(load_folder(root / "sequences"), list(holdout))
    if tracks > 0:
        train = train[:tracks]
    if "clips" in parts:
        train_clips, held_clips = split_fold(load_folder(root / "clips"), list(CLIP_HOLDOUT))
        train, held_out = [*train, *train_clips], [*held_out, *held_clips]
    stills: list = still_frames(train)
    objects: list = [stills]
    backgrounds = [s.frame(i) for s in train for i in range(0, len(s), TEXTURE_STRIDE)]
    if "coco128" in parts:
        coco = YoloSequences(root / PART_PATHS["coco128"])
        stills = [*stills, *(coco[k] for k in range(len(coco)))]
        objects.append(coco)
        backgrounds += [read_image(f) for f in coco.files[::COCO_TEXTURE_STRIDE]]
    if "tiny-imagenet" in parts:
        objects.append(BoxListSequences(root / PART_PATHS["tiny-imagenet"]))
    sources: dict[str, list] = {"sequences": train, "stills": stills}
    if synthetic_sequences > 0:
        options = {} if synthetic_config is None else {"config": synthetic_config}
        sources["synthetic"] = SyntheticSequences(
            synthetic_sequences,
            seed=seed,
            textures=ImageTextures(backgrounds),
            objects=ObjectPatches(objects),
            **options,
        )
    return sources, held_out


@dataclass
class PackSettings:
    """The ``data`` fields of ``source: pack``.

    Attributes:
        pack: a training pack folder (``sequences/``, ``stills/coco128/``,
            ``stills/tiny-imagenet/``, ``clips/``; required).
        pack_parts: the parts of ``pack`` used (``sequences`` always).
        pack_tracks: train on the first this many of the pack's tracks (0: all).
        holdout: names of the pack's sequences left out of training; validation samples come
            from them.
        synthetic_sequences: how many generated sequences with the pack's objects as targets.
        synthetic: how the generated sequences look.
        weights: collection -> relative sampling probability (default 1).
    """

    pack: str | None = None
    pack_parts: list[str] = field(default_factory=lambda: list(DEFAULT_PARTS))
    pack_tracks: int = 0
    holdout: list[str] = field(default_factory=list)
    synthetic_sequences: int = 0
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    weights: dict[str, float] = field(default_factory=dict)


@register_source
class PackSource(DataSource):
    """The training pack ``data.pack``: the parts ``data.pack_parts``, the tracks except
    ``data.holdout`` (the first ``data.pack_tracks``), their still frames and
    ``data.synthetic_sequences`` generated sequences that look as ``data.synthetic`` says (see
    the module docstring); validation on the held-out tracks (and clips)."""

    name = "pack"
    Settings = PackSettings
    folder_setting = "pack"

    def check(self) -> None:
        if self.data.pack is None:
            raise ValueError("data.source pack needs data.pack (a training pack folder)")
        check_weights(self.name, self.data.weights)

    def collections(self, seed: int) -> SourceData:
        data = self.data
        sources, held_out = pack_sources(
            data.pack,
            data.pack_parts,
            data.holdout,
            data.pack_tracks,
            data.synthetic_sequences,
            seed,
            data.synthetic,
        )
        return SourceData(list(sources.values()), self.weights_of(sources), [held_out])
