"""``data.source: datasets``: the tracking data sets LaSOT, GOT-10k, TrackingNet and COCO, each
from its own folder (:func:`ebmtrack.data.sampler.load_training_sets`)."""

from __future__ import annotations

from .base import DataSource, SourceData


class DatasetsSource(DataSource):
    """The sets of ``data.roots`` (name -> folder) in their training splits (``data.splits``
    overrides them), sampled by ``data.weights``; validation on ``data.val_splits`` read from the
    same folders (none without)."""

    name = "datasets"
    settings = ("roots", "splits", "weights", "val_splits")

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
