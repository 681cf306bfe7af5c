"""The presets on the training pack (``train/`` below the data root): ``pack-cpu``,
``pack-stream``, ``dimp-pack-cpu``, ``dimp-pack-clips`` and ``dimp-pack-stream``.

The pack's data itself (its parts, ``PACK_HOLDOUT``, ``pack_sources``) is
:mod:`ebmtrack.training.sources.pack`.
"""

from __future__ import annotations

import dataclasses

from ..experiment import DiMPExperiment, IoUNetExperiment
from ..feature_cache import FeatureCacheConfig
from ..feature_stream import FeatureStreamConfig
from ..sources import DataConfig
from ..sources.pack import PACK_HOLDOUT, PARTS
from .default_cpu import default_cpu, dimp_cpu
from .root import data_path

__all__ = [
    "dimp_pack_clips",
    "dimp_pack_cpu",
    "dimp_pack_stream",
    "pack_cpu",
    "pack_data",
    "pack_folder",
    "pack_stream",
]


def pack_folder() -> str:
    """Where the presets look for the training pack: ``train/`` below the data root
    (``--set data.pack=DIR`` for one run)."""
    return data_path("train")


def pack_data(**changes) -> DataConfig:
    """The data of the pack presets (:class:`~ebmtrack.training.sources.pack.PackSource`): the
    pack's tracks minus :data:`PACK_HOLDOUT`, its still images and 2000 generated sequences."""
    return DataConfig(
        source="pack",
        pack=pack_folder(),
        holdout=list(PACK_HOLDOUT),
        synthetic_sequences=2000,
        weights={"sequences": 1.0, "stills": 0.5, "synthetic": 1.5},
        **changes,
    )


def pack_cpu() -> IoUNetExperiment:
    """``default-cpu``'s head, crops and loop on the training pack: its real tracks, coco128's
    objects and generated sequences with objects of all three parts as targets."""
    return dataclasses.replace(default_cpu(), preset="pack-cpu", data=pack_data())


def pack_stream() -> IoUNetExperiment:
    """``pack-cpu``'s head on the whole training pack (its clips too), every sample a fresh pair
    whose int8 backbone features a DataLoader worker computes
    (:mod:`ebmtrack.training.feature_stream`): 40 epochs of 16 384 distinct pairs."""
    # The trackers' default backbone path; a checkpoint every epoch.
    base = pack_cpu()
    return dataclasses.replace(
        base,
        preset="pack-stream",
        data=pack_data(pack_parts=list(PARTS)),
        feature_cache=FeatureCacheConfig(),
        feature_stream=FeatureStreamConfig(enabled=True),
        trainer=dataclasses.replace(
            base.trainer,
            epochs=40,
            samples_per_epoch=16384,
            batch_size=32,
            lr_step_epochs=15,
            val_every=1,
            val_samples=512,
            num_workers=1,
        ),
    )


def dimp_pack_cpu() -> DiMPExperiment:
    """``dimp-cpu`` on the training pack."""
    return dataclasses.replace(dimp_cpu(), preset="dimp-pack-cpu", data=pack_data(max_gap=30))


def dimp_pack_clips() -> DiMPExperiment:
    """``dimp-pack-cpu`` on the whole pack, its clips of consecutive frames too, with twice the
    cached samples for the same number of steps (``dimp-cpu``'s 1024 over-fitted): the recipe of
    the shipped classifier."""
    base = dimp_pack_cpu()
    return dataclasses.replace(
        base,
        preset="dimp-pack-clips",
        data=pack_data(max_gap=30, pack_parts=list(PARTS)),
        feature_cache=dataclasses.replace(base.feature_cache, train_pairs=2048),
        trainer=dataclasses.replace(
            base.trainer, epochs=3, samples_per_epoch=2048, lr_step_epochs=2
        ),
    )


def dimp_pack_stream() -> DiMPExperiment:
    """``dimp-pack-clips``'s classifier with the sample engine: every sample a fresh set of
    3 + 3 frames of the whole pack whose backbone features a DataLoader worker computes, in ONNX
    Runtime float32 (the DiMP trackers' default backbone path): 20 epochs of 2048 distinct sets,
    20 times the distinct sets ``dimp-pack-clips`` sees."""
    base = dimp_pack_clips()
    return dataclasses.replace(
        base,
        preset="dimp-pack-stream",
        feature_cache=FeatureCacheConfig(),
        feature_stream=FeatureStreamConfig(enabled=True, runtime="onnx"),
        trainer=dataclasses.replace(
            base.trainer,
            epochs=20,
            samples_per_epoch=2048,
            lr_step_epochs=15,
            num_workers=1,
            shuffle=False,  # every index a distinct draw (feature_stream)
        ),
    )
