"""Where an experiment's training and validation sequences come from: one class per source,
chosen by ``data.source`` (:data:`SOURCES`).

- ``datasets`` (:class:`DatasetsSource`): LaSOT, GOT-10k, TrackingNet and COCO from the folders
  of ``data.roots`` (``--lasot``, ``--got10k``, ``--trackingnet``, ``--coco``).
- ``synthetic`` (:class:`SyntheticSource`): ``data.synthetic_sequences`` generated sequences.
- ``folder`` (:class:`FolderSource`): a folder of real sequences (``data.sequence_folder``) minus
  a held-out fold, their still frames and generated sequences textured with their frames.
- ``pack`` (:class:`PackSource`): a training pack (``data.pack``) of tracks, still images and
  clips, plus generated sequences with its objects as targets.

:mod:`ebmtrack.training.sources.features` holds the routes by which samples reach the module
(images, the feature cache, the feature stream).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ebmtrack.data.synthetic import SyntheticConfig

from .base import DataSource, SourceData
from .datasets import DatasetsSource
from .folder import FolderSource
from .pack import DEFAULT_PARTS, PackSource
from .synthetic import SyntheticSource

SOURCES: dict[str, type[DataSource]] = {
    source.name: source for source in (DatasetsSource, SyntheticSource, FolderSource, PackSource)
}
"""The source class of each value of ``data.source``."""
COMMON_SETTINGS = ("source", "max_gap")
"""The fields of :class:`DataConfig` that every source has."""


@dataclass
class DataConfig:
    """Where training and validation samples come from: the source and its settings.

    ``source`` chooses the class (:data:`SOURCES`); each of the other fields belongs to the
    sources that read it, and a field of another source must keep its default (a ValueError
    names it otherwise), so no setting is silently ignored.

    Attributes:
        source: ``datasets``, ``synthetic``, ``folder`` or ``pack`` (required).
        roots: (datasets) data-set name -> folder, for the names of
            :data:`ebmtrack.data.sampler.TRAINING_SPLITS` (lasot, got10k, trackingnet, coco).
        splits: (datasets) data-set name -> split, overriding the default training splits (e.g.
            ``trackingnet: TRAIN_0,TRAIN_1,TRAIN_2,TRAIN_3``).
        weights: (datasets, folder, pack) collection name -> relative sampling probability
            (default 1 each): the data-set names, or ``sequences``, ``stills``, ``synthetic``.
        val_splits: (datasets) data-set name -> split read from the same folder for validation
            (e.g. ``got10k: val``); empty: no validation.
        synthetic_sequences: (synthetic, folder, pack) how many generated sequences.
        synthetic: (synthetic, pack) how the generated sequences look.
        max_gap: largest distance in frames between the frames of a sample.
        sequence_folder: (folder) a folder of OTB/VOT-style sequences.
        holdout: (folder, pack) names of the folder's (or the pack's) sequences left out of
            training; validation samples come from them.
        pack: (pack) a training pack folder (``sequences/``, ``stills/coco128/``,
            ``stills/tiny-imagenet/``, ``clips/``).
        pack_parts: (pack) the parts of ``pack`` used (``sequences`` always).
        pack_tracks: (pack) train on the first this many of the pack's tracks (0: all).
    """

    source: str = ""
    roots: dict[str, str] = field(default_factory=dict)
    splits: dict[str, str] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    val_splits: dict[str, str] = field(default_factory=dict)
    synthetic_sequences: int = 0
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    max_gap: int = 50
    sequence_folder: str | None = None
    holdout: list[str] = field(default_factory=list)
    pack: str | None = None
    pack_parts: list[str] = field(default_factory=lambda: list(DEFAULT_PARTS))
    pack_tracks: int = 0

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError (one line) unless ``source`` names a source, the fields of other
        sources keep their defaults and the source can use its own (e.g. a folder is named)."""
        if not self.source:
            raise ValueError(
                "data.source is missing; name where the training data comes from: "
                f"{', '.join(SOURCES)}"
            )
        if self.source not in SOURCES:
            raise ValueError(
                f"data.source must be one of {', '.join(SOURCES)}, got {self.source!r}"
            )
        own = set(SOURCES[self.source].settings) | set(COMMON_SETTINGS)
        for name, default in field_defaults().items():
            if name not in own and getattr(self, name) != default:
                owners = [s for s, cls in SOURCES.items() if name in cls.settings]
                raise ValueError(
                    f"data.{name} does not apply to data.source {self.source}; it is a setting "
                    f"of data.source {' and '.join(owners)}"
                )
        data_source(self).check()


def field_defaults() -> dict[str, object]:
    """The default of each field of :class:`DataConfig` (``source`` aside)."""
    defaults = {}
    for f in dataclasses.fields(DataConfig):
        if f.name == "source":
            continue
        has_factory = f.default_factory is not dataclasses.MISSING
        defaults[f.name] = f.default_factory() if has_factory else f.default
    return defaults


def data_source(data: DataConfig) -> DataSource:
    """The source that ``data.source`` names, reading ``data``."""
    return SOURCES[data.source](data)


__all__ = [
    "SOURCES",
    "DataConfig",
    "DataSource",
    "DatasetsSource",
    "FolderSource",
    "PackSource",
    "SourceData",
    "SyntheticSource",
    "data_source",
    "field_defaults",
]
