"""``data.source: datasets``: the tracking data sets LaSOT, GOT-10k, TrackingNet and COCO, each
from its own folder (:func:`ebmtrack.data.sampler.load_training_sets`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import DataSource, SourceData, register_source


@dataclass
class DatasetsSettings:
    """The ``data`` fields of ``source: datasets``.

    Attributes:
        roots: data-set name -> folder, for the names of
            :data:`ebmtrack.data.sampler.TRAINING_SPLITS` (lasot, got10k, trackingnet, coco).
        splits: data-set name -> split, overriding the default training splits (e.g.
            ``trackingnet: TRAIN_0,TRAIN_1,TRAIN_2,TRAIN_3``).
        weights: data-set name -> relative sampling probability (default 1 each).
        val_splits: data-set name -> split read from the same folder for validation (e.g.
            ``got10k: val``); empty: no validation.
    """

    roots: dict[str, str] = field(default_factory=dict)
    splits: dict[str, str] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    val_splits: dict[str, str] = field(default_factory=dict)


@register_source
class DatasetsSource(DataSource):
    """The sets of ``data.roots`` (name -> folder) in their training splits (``data.splits``
    overrides them), sampled by ``data.weights``; validation on ``data.val_splits`` read from the
    same folders (none without)."""

    name = "datasets"
    Settings = DatasetsSettings

    def collections(self, seed: int) -> SourceData:
        from ebmtrack.data.sampler import load_training_sets

        data = self.data
        if not data.roots:
            raise ValueError(
                "no training data: give data.roots (e.g. --got10k DIR, --lasot DIR, "
                "--trackingnet DIR, --coco DIR) or choose another data.source"
            )
        sets = load_training_sets(data.roots, data.splits)
        train = SourceData(list(sets.values()), self.weights_of(sets), None)
        if not data.val_splits:
            return train
        missing = sorted(set(data.val_splits) - set(data.roots))
        if missing:
            raise ValueError(f"data.val_splits names {missing} without a folder in data.roots")
        val_sets = load_training_sets(
            {name: data.roots[name] for name in data.val_splits}, data.val_splits
        )
        train.val = list(val_sets.values())
        return train
