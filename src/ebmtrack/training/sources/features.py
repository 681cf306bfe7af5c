"""How samples reach the training module: as images, as features read from the feature cache,
or as features streamed from DataLoader workers.

Each class is one route; the experiment chooses it from its explicit switches
(``feature_cache.enabled``, ``feature_stream.enabled``; at most one is on) and calls
:meth:`datasets`. Either way the samples themselves come from the experiment's
:meth:`~ebmtrack.training.experiment.Experiment.build_datasets` (its data source and sampler).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from torch import nn
from torch.utils.data import Dataset

from ..distributed import DistributedContext
from ..feature_cache import FeatureCacheConfig


class Experiment(Protocol):
    """What a route reads of an experiment
    (:class:`~ebmtrack.training.experiment.Experiment`)."""

    trainer: object

    def build_datasets(self, num_pairs: int | None = None) -> tuple[Dataset, Dataset | None]: ...

    def cache_key(self) -> str: ...

    def cached_samples(
        self, samples: Dataset, module: nn.Module, folder: Path, options: dict, training: bool
    ) -> Dataset: ...

    def streamed_samples(self, samples: Dataset, module: nn.Module, training: bool) -> Dataset: ...

FEATURES_FOLDER = "features"
"""The feature cache's folder inside the run folder, unless ``feature_cache.folder`` names one."""


class ImageSamples:
    """The samples as images: the module runs the frozen backbone in every training step."""

    def datasets(
        self, experiment: Experiment, module: nn.Module, run_dir: Path, context: DistributedContext
    ) -> tuple[Dataset, Dataset | None]:
        """``(train, val)`` (``val`` None without validation data)."""
        return experiment.build_datasets()


class CachedFeatures:
    """The samples' backbone features computed once into the feature cache
    (:mod:`ebmtrack.training.feature_cache`) and read from it in every epoch; single process."""

    def __init__(self, config: FeatureCacheConfig) -> None:
        self.config = config

    def datasets(
        self, experiment: Experiment, module: nn.Module, run_dir: Path, context: DistributedContext
    ) -> tuple[Dataset, Dataset | None]:
        if context.world_size > 1:
            raise ValueError("feature_cache.enabled needs a single process (build the cache once)")
        return self.read(experiment, module, run_dir, context.is_main)

    def read(
        self, experiment: Experiment, module: nn.Module, run_dir: Path, progress: bool = True
    ) -> tuple[Dataset, Dataset | None]:
        """Training and validation samples read from the cache (``feature_cache.folder``, or
        :data:`FEATURES_FOLDER` in ``run_dir``), built first where missing, under the
        experiment's :meth:`~ebmtrack.training.experiment.Experiment.cache_key`."""
        cache = self.config
        folder = Path(cache.folder) if cache.folder else Path(run_dir) / FEATURES_FOLDER
        train_samples, val_samples = experiment.build_datasets(num_pairs=cache.train_pairs)
        options = {"key": experiment.cache_key(), "chunk_size": cache.chunk_size}
        progress = progress and experiment.trainer.progress
        options.update(batch_size=cache.batch_size, progress=progress)
        train = experiment.cached_samples(
            train_samples, module, folder / "train", options, training=True
        )
        if val_samples is None:
            return train, None
        val = experiment.cached_samples(
            val_samples, module, folder / "val", options, training=False
        )
        return train, val


class StreamedFeatures:
    """Every sample a fresh one (a pair, or DiMP's set of frames) whose backbone features a
    DataLoader worker computes (:mod:`ebmtrack.training.feature_stream`); the module reads
    features, never images."""

    def datasets(
        self, experiment: Experiment, module: nn.Module, run_dir: Path, context: DistributedContext
    ) -> tuple[Dataset, Dataset | None]:
        train, val = experiment.build_datasets()
        train = experiment.streamed_samples(train, module, training=True)
        return train, None if val is None else experiment.streamed_samples(val, module, False)
