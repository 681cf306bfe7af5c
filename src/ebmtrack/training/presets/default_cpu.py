"""The presets on the shared sequences (``sequences/`` below the data root): ``default-cpu``,
which made the box head shipped until 5 Dec 2026, and ``dimp-cpu``, DiMP's classifier on the same
data (the test sequences less a held-out fold: their models no longer ship)."""

from __future__ import annotations

from ..config import TrainerConfig
from ..dimp import DiMPTrainingConfig
from ..experiment import DiMPExperiment, IoUNetExperiment
from ..feature_cache import FeatureCacheConfig
from ..sources import DataConfig
from .root import data_path

DEFAULT_HOLDOUT = ("Couple", "Crossing", "Jumping", "MotorRolling", "bag")
"""Sequences of the shared test folder that ``default-cpu`` never trains on (validation and the
refinement study use them); ``Couple`` is the clip of ``ebmtrack demo``."""


def sequences_data(**changes) -> DataConfig:
    """The data of both presets (:class:`~ebmtrack.training.sources.folder.FolderSource`): the
    shared sequences minus :data:`DEFAULT_HOLDOUT`, their still frames and 400 generated
    sequences textured with their frames."""
    return DataConfig(
        source="folder",
        sequence_folder=data_path("sequences"),
        holdout=list(DEFAULT_HOLDOUT),
        synthetic_sequences=400,
        weights={"sequences": 1.0, "stills": 0.5, "synthetic": 1.0},
        **changes,
    )


def default_cpu() -> IoUNetExperiment:
    """The model shipped with ebmtrack, trained on a shared 2-core CPU in 12 (MSE) to 25 (EBM
    losses) minutes after an 8-minute feature cache: ImageNet MobileNetV2 (frozen, features
    cached once), the tracker's 288-pixel crops, a half-width head, :func:`sequences_data`;
    validation on the held-out sequences."""
    return IoUNetExperiment(
        preset="default-cpu",
        backbone="mobilenetv2",
        head_width=0.5,  # IoUNetConfig.for_backbone's width for the mobile backbones
        head_dims=128,
        data=sequences_data(),
        feature_cache=FeatureCacheConfig(enabled=True, train_pairs=2048),
        trainer=TrainerConfig(
            epochs=4,
            samples_per_epoch=2048,
            batch_size=16,
            lr_step_epochs=3,
            val_every=1,
            val_samples=256,
            num_workers=0,
            shuffle=False,  # CachedPairs orders each pass itself
        ),
    )


def dimp_cpu() -> DiMPExperiment:
    """A :class:`DiMPExperiment` on ``default-cpu``'s data, backbone and held-out fold: 3 + 3
    frames per sample sampled causally within 30 frames, DiMP-18's crops and jitter, features
    cached once, the classification loss through the unrolled optimizer (docs/dimp.md,
    "Training")."""
    # DiMP-18's samples (max_gap 30, 3 + 3 frames, its crops), loss and lr schedule shape (x0.2
    # steps), shrunk to the CPU budget of docs/dimp.md.
    return DiMPExperiment(
        preset="dimp-cpu",
        backbone="mobilenetv2",
        data=sequences_data(max_gap=30),
        dimp=DiMPTrainingConfig(),  # DiMP-18's samples, labels and loss weights
        feature_cache=FeatureCacheConfig(
            enabled=True, train_pairs=1024, chunk_size=128, batch_size=4
        ),
        trainer=TrainerConfig(
            epochs=6,
            samples_per_epoch=1024,
            batch_size=8,
            lr=1e-3,  # PrDiMP's single classifier lr (prdimp50.py); DiMP's lrs are per part
            lr_step_epochs=5,
            val_every=1,
            val_samples=256,
            num_workers=0,
            shuffle=True,  # a new order of the cached samples every epoch
        ),
    )
