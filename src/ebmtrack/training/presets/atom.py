"""ATOM's recipe and its toy version: ``atom-r18`` and ``synthetic-smoke``."""

from __future__ import annotations

from ebmtrack.data.processing import AtomProcessing
from ebmtrack.data.synthetic import SyntheticConfig

from ..config import TrainerConfig
from ..experiment import IoUNetExperiment
from ..sources import DataConfig


def atom_r18() -> IoUNetExperiment:
    """ATOM's recipe (reference code ``atom.py``, B.3) on ResNet-18: the data sets given by
    ``--lasot``, ``--got10k``, ``--trackingnet`` and ``--coco`` with equal weights, 40 epochs of
    64 000 pairs, batch 64, Adam 1e-3 with x0.2 every 15 epochs, MSE on 2 * IoU - 1."""
    # Pairs are random draws: walk through them in order so that none repeats in 40 epochs.
    return IoUNetExperiment(
        preset="atom-r18", data=DataConfig(source="datasets"), trainer=TrainerConfig(shuffle=False)
    )


def synthetic_smoke() -> IoUNetExperiment:
    """The same pipeline at toy size on generated sequences: random-weight MobileNetV2,
    96-pixel crops, a quarter-width head, two epochs of 32 pairs; runs in seconds."""
    return IoUNetExperiment(
        preset="synthetic-smoke",
        backbone="mobilenetv2",
        pretrained=False,
        head_width=0.25,
        head_dims=64,
        processing=AtomProcessing(output_size=96),
        data=DataConfig(
            source="synthetic",
            synthetic_sequences=50,
            synthetic=SyntheticConfig(num_frames=30, frame_size=(120, 160)),
        ),
        trainer=TrainerConfig(
            epochs=2,
            samples_per_epoch=32,
            batch_size=8,
            val_every=1,
            val_samples=16,
            num_workers=0,
            shuffle=False,
        ),
    )
