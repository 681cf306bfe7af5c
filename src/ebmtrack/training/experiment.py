"""One box-regression experiment: its config, the named presets, and the function that runs it.

An :class:`ExperimentConfig` says everything about a run: backbone, head sizes, data sets and
their processing, loss and training loop. It is saved as ``config.yaml`` in the run folder and
inside every checkpoint, so a run can be resumed or repeated from its folder alone.

Presets (:data:`PRESETS`):

- ``atom-r18``: ATOM's recipe (reference code ``atom.py``, B.3) on ResNet-18: LaSOT, GOT-10k,
  TrackingNet and COCO with equal weights (those whose folders are given), 40 epochs of 64 000
  pairs, batch 64, Adam 1e-3 with x0.2 every 15 epochs, MSE on 2 * IoU - 1.
- ``synthetic-smoke``: the same pipeline at toy size on generated sequences: random-weight
  MobileNetV2, 96-pixel crops, a quarter-width head, two epochs of 32 pairs; runs in seconds.
- ``default-cpu``: the model shipped with ebmtrack, trained on a shared 2-core CPU in 12 (MSE)
  to 25 (EBM losses) minutes after an 8-minute feature cache: ImageNet MobileNetV2 (frozen,
  features cached once), the tracker's 288-pixel crops, a half-width head, real sequences of
  ``data.sequence_folder`` minus the held-out fold (:data:`DEFAULT_HOLDOUT`), still frames and
  generated sequences textured with real images (:mod:`ebmtrack.training.presets.default_cpu`);
  validation on the held-out sequences.
- ``dimp-cpu``: DiMP's target classifier (``model: dimp``, :mod:`ebmtrack.training.dimp`) on the
  same data, backbone and held-out fold: 3 + 3 frames per sample sampled causally within 30
  frames, DiMP-18's crops and jitter, features cached once, the classification loss through the
  unrolled optimizer; writes ``dimp_classifier.safetensors`` (docs/dimp.md, "Training").

Choosing an EBM loss (``loss.name``, e.g. ``nce+`` or ``kld-is``) trains the same head with the
BMVC 2020 recipe of that loss (:data:`~ebmtrack.training.box_regression.EBM_RECIPES`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils.data import Dataset

from ebmtrack.data.processing import AtomProcessing
from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences

from .box_regression import BoxLossConfig, BoxRegressionModule
from .checkpoint import latest_checkpoint
from .config import TrainerConfig, config_to_dict, save_config
from .dimp import (
    CachedDiMPTrainingModule,
    CachedFrameSets,
    DiMPTrainingConfig,
    DiMPTrainingModule,
    build_frame_set_cache,
)
from .distributed import DistributedContext, init_distributed
from .feature_cache import (
    CachedBoxRegressionModule,
    CachedPairs,
    FeatureCacheConfig,
    build_feature_cache,
)
from .presets.pack import PACK_HOLDOUT
from .presets.pack import PARTS as PACK_PARTS
from .trainer import EpochResult, Trainer

CONFIG_FILE = "config.yaml"
MODEL_FILE = "iou_net.safetensors"
MODEL_FILES = {"iou-net": MODEL_FILE, "dimp": "dimp_classifier.safetensors"}
"""The trained model's file in the run folder, per ``ExperimentConfig.model``."""
UNTRAINED_VAL_FILE = "untrained_val.json"
FEATURES_FOLDER = "features"

DEFAULT_HOLDOUT = ("Couple", "Crossing", "Jumping", "MotorRolling", "bag")
"""Sequences of the shared test folder that ``default-cpu`` never trains on (validation and the
refinement study use them); ``Couple`` is the clip of ``ebmtrack demo``."""


@dataclass
class DataConfig:
    """Where training and validation pairs come from.

    Attributes:
        roots: data-set name -> folder, for the names of
            :data:`ebmtrack.data.sampler.TRAINING_SPLITS` (lasot, got10k, trackingnet, coco).
        splits: data-set name -> split, overriding the default training splits (e.g.
            ``trackingnet: TRAIN_0,TRAIN_1,TRAIN_2,TRAIN_3``).
        weights: data-set name -> relative sampling probability (default 1 each).
        val_splits: data-set name -> split read from the same folder for validation (e.g.
            ``got10k: val``); empty: no validation on real data.
        synthetic_sequences: when > 0, train (and validate) on that many generated sequences
            instead of the folders.
        synthetic: how the generated sequences look.
        max_gap: largest distance in frames between the two frames of a pair.
        sequence_folder: a folder of OTB/VOT-style sequences to train on instead of ``roots``,
            together with still frames of them and, if ``synthetic_sequences`` > 0, generated
            sequences textured with real images (``weights`` keys: ``sequences``, ``stills``,
            ``synthetic``; :mod:`ebmtrack.training.presets.default_cpu`).
        holdout: names of ``sequence_folder``'s (or ``pack``'s) sequences left out of training;
            validation pairs come from them.
        pack: a training pack folder to train on instead of ``roots`` (``sequences/``,
            ``stills/coco128/``, ``stills/tiny-imagenet/``; ``weights`` keys: ``sequences``,
            ``stills``, ``synthetic``; :mod:`ebmtrack.training.presets.pack`).
        pack_parts: the parts of ``pack`` used (``sequences`` always).
        pack_tracks: train on the first this many of the pack's tracks (0: all).
    """

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
    pack_parts: list[str] = field(default_factory=lambda: list(PACK_PARTS))
    pack_tracks: int = 0


@dataclass
class ExperimentConfig:
    """Everything about one training run of the box head; see the module docstring.

    Attributes:
        preset: the preset it started from (informational).
        model: what is trained, a key of :data:`MODEL_FILES`: ``iou-net`` (the box head, with
            ``head_*``, ``processing`` and ``loss``) or ``dimp`` (DiMP's target classifier,
            with ``dimp``).
        backbone: a name of :data:`ebmtrack.models.backbones.BACKBONES`.
        pretrained: load ImageNet weights (from ``backbone_weights``, or the packaged ones).
        backbone_weights: path of a torchvision-style checkpoint (needed for pretrained ResNets).
        head_width: multiplier of the IoU-Net's hidden convolution widths.
        head_dims: channels of the modulated features and of the predictor's linear blocks.
        processing: crops, jitter and proposals of a pair.
        data: the data sets.
        loss: the box loss.
        dimp: DiMP's samples, labels and loss (``model: dimp``).
        trainer: the training loop.
        feature_cache: compute the frozen backbone's features once per pair
            (:mod:`ebmtrack.training.feature_cache`).
    """

    preset: str = "atom-r18"
    model: str = "iou-net"
    backbone: str = "resnet18"
    pretrained: bool = True
    backbone_weights: str | None = None
    head_width: float = 1.0
    head_dims: int = 256
    processing: AtomProcessing = field(default_factory=AtomProcessing)
    data: DataConfig = field(default_factory=DataConfig)
    loss: BoxLossConfig = field(default_factory=BoxLossConfig)
    dimp: DiMPTrainingConfig = field(default_factory=DiMPTrainingConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    feature_cache: FeatureCacheConfig = field(default_factory=FeatureCacheConfig)

    def __post_init__(self) -> None:
        if self.model not in MODEL_FILES:
            raise ValueError(f"model must be one of {', '.join(MODEL_FILES)}, got {self.model!r}")


def model_file(config: ExperimentConfig) -> str:
    """The name of the trained model's file that :func:`run_experiment` writes."""
    return MODEL_FILES[config.model]


def _atom_r18() -> ExperimentConfig:
    # Pairs are random draws: walk through them in order so that none repeats in 40 epochs.
    return ExperimentConfig(preset="atom-r18", trainer=TrainerConfig(shuffle=False))


def _synthetic_smoke() -> ExperimentConfig:
    return ExperimentConfig(
        preset="synthetic-smoke",
        backbone="mobilenetv2",
        pretrained=False,
        head_width=0.25,
        head_dims=64,
        processing=AtomProcessing(output_size=96),
        data=DataConfig(
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


def _default_cpu() -> ExperimentConfig:
    return ExperimentConfig(
        preset="default-cpu",
        backbone="mobilenetv2",
        head_width=0.5,  # IoUNetConfig.for_backbone's width for the mobile backbones
        head_dims=128,
        data=DataConfig(
            sequence_folder="../shared/data/sequences",
            holdout=list(DEFAULT_HOLDOUT),
            synthetic_sequences=400,
            weights={"sequences": 1.0, "stills": 0.5, "synthetic": 1.0},
        ),
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


def _dimp_cpu() -> ExperimentConfig:
    # default-cpu's data and backbone; DiMP-18's samples (max_gap 30, 3 + 3 frames, its crops),
    # loss and lr schedule shape (x0.2 steps), shrunk to the CPU budget of docs/dimp.md.
    return ExperimentConfig(
        preset="dimp-cpu",
        model="dimp",
        backbone="mobilenetv2",
        data=DataConfig(
            sequence_folder="../shared/data/sequences",
            holdout=list(DEFAULT_HOLDOUT),
            synthetic_sequences=400,
            weights={"sequences": 1.0, "stills": 0.5, "synthetic": 1.0},
            max_gap=30,
        ),
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


PACK = "../shared/data/train"
"""Where ``pack-cpu`` and ``dimp-pack-cpu`` look for the training pack (``--set data.pack=DIR``)."""


def _pack_data(**changes) -> DataConfig:
    return DataConfig(
        pack=PACK,
        holdout=list(PACK_HOLDOUT),
        synthetic_sequences=2000,
        weights={"sequences": 1.0, "stills": 0.5, "synthetic": 1.5},
        **changes,
    )


def _pack_cpu() -> ExperimentConfig:
    # default-cpu's head, crops and loop, on the training pack: its real tracks, coco128's
    # objects and generated sequences with objects of all three parts as targets.
    return dataclasses.replace(_default_cpu(), preset="pack-cpu", data=_pack_data())


def _dimp_pack_cpu() -> ExperimentConfig:
    return dataclasses.replace(_dimp_cpu(), preset="dimp-pack-cpu", data=_pack_data(max_gap=30))


PRESETS: dict[str, Callable[[], ExperimentConfig]] = {
    "atom-r18": _atom_r18,
    "synthetic-smoke": _synthetic_smoke,
    "default-cpu": _default_cpu,
    "dimp-cpu": _dimp_cpu,
    "pack-cpu": _pack_cpu,
    "dimp-pack-cpu": _dimp_pack_cpu,
}


def preset_config(name: str) -> ExperimentConfig:
    """The config of preset ``name``; ValueError listing the presets otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[name]()


def build_module(config: ExperimentConfig) -> BoxRegressionModule | DiMPTrainingModule:
    """Frozen backbone + freshly initialized head + loss (reading cached features when
    ``feature_cache.enabled``): the IoU-Net's :class:`BoxRegressionModule`, or for
    ``model: dimp`` a :class:`~ebmtrack.training.dimp.DiMPTrainingModule`.

    Random initializations (the head's, and the backbone's without pretrained weights) are seeded
    by ``trainer.seed``, so the module is a function of the config (checkpoints do not store the
    frozen backbone).
    """
    from ebmtrack.models.backbones import create_backbone
    from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig

    torch.manual_seed(config.trainer.seed)
    backbone = create_backbone(config.backbone, config.pretrained, config.backbone_weights)
    if config.model == "dimp":
        from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig

        settings = config.dimp
        classifier_config = dataclasses.replace(
            DiMPConfig.for_backbone(backbone, settings.feature_dim),
            num_iter=settings.num_iter,
            init_gauss_sigma=settings.label_sigma(
                backbone.feature_info[backbone.classifier_layer].stride
            ),
        )
        cached = config.feature_cache.enabled
        module_type = CachedDiMPTrainingModule if cached else DiMPTrainingModule
        return module_type(backbone, DiMPClassifier(classifier_config), settings)
    layers = backbone.default_layers
    head = IoUNetConfig(
        input_channels=tuple(backbone.feature_info[name].channels for name in layers),
        pred_input_dim=(config.head_dims, config.head_dims),
        pred_inter_dim=(config.head_dims, config.head_dims),
        width=config.head_width,
        strides=tuple(backbone.feature_info[name].stride for name in layers),
        backbone=config.backbone,
        feature_layers=layers,
    )
    module_type = CachedBoxRegressionModule if config.feature_cache.enabled else BoxRegressionModule
    return module_type(backbone, AtomIoUNet(head), config.loss, layers)


def build_datasets(
    config: ExperimentConfig, num_pairs: int | None = None
) -> tuple[Dataset, Dataset | None]:
    """``(train, val)`` pair data sets (``val`` None without validation data).

    ``num_pairs``: length of the training set (default ``epochs * samples_per_epoch``).
    """
    from ebmtrack.data.sampler import TrackingFrameSets, TrackingPairs, load_training_sets

    data, seed, trainer = config.data, config.trainer.seed, config.trainer
    samples = trainer.samples_per_epoch or trainer.batch_size
    num_pairs = num_pairs or trainer.epochs * samples
    val_pairs = trainer.val_samples or trainer.batch_size
    if config.model == "dimp":
        sample_type: Callable[..., Dataset] = TrackingFrameSets
        common = {
            "processing": config.dimp.processing,
            "max_gap": data.max_gap,
            "num_train_frames": config.dimp.num_train_frames,
            "num_test_frames": config.dimp.num_test_frames,
        }
    else:
        sample_type = TrackingPairs
        common = {"processing": config.processing, "max_gap": data.max_gap}

    def length(num: int) -> dict[str, int]:
        return {"num_samples" if config.model == "dimp" else "num_pairs": num}

    if data.sequence_folder is not None or data.pack is not None:
        from .presets.default_cpu import SOURCES, local_sources
        from .presets.pack import pack_sources

        if data.sequence_folder is not None and data.pack is not None:
            raise ValueError("give data.sequence_folder or data.pack, not both")
        unknown = sorted(set(data.weights) - set(SOURCES))
        if unknown:
            raise ValueError(f"data.weights names {unknown}; valid with a folder: {SOURCES}")
        if data.pack is not None:
            sources, held_out = pack_sources(
                data.pack,
                data.pack_parts,
                data.holdout,
                data.pack_tracks,
                data.synthetic_sequences,
                seed,
                data.synthetic,
            )
        else:
            sources, held_out = local_sources(
                data.sequence_folder, data.holdout, data.synthetic_sequences, seed
            )
        weights = [float(data.weights.get(name, 1.0)) for name in sources]
        train = sample_type(
            list(sources.values()), weights, seed=seed, **length(num_pairs), **common
        )
        return train, sample_type([held_out], seed=seed + 1, **length(val_pairs), **common)
    if data.synthetic_sequences > 0:
        # Validation sequences come from another seed: targets and textures never seen in training.
        train_seqs = SyntheticSequences(data.synthetic_sequences, data.synthetic, seed=seed)
        val_seqs = SyntheticSequences(
            max(1, data.synthetic_sequences // 4), data.synthetic, seed + 1
        )
        return (
            sample_type([train_seqs], seed=seed, **length(num_pairs), **common),
            sample_type([val_seqs], seed=seed + 1, **length(val_pairs), **common),
        )
    if not data.roots:
        raise ValueError(
            "no training data: give data.roots (e.g. --got10k DIR, --lasot DIR, --trackingnet DIR, "
            "--coco DIR) or data.synthetic_sequences > 0"
        )
    sets = load_training_sets(data.roots, data.splits)
    weights = [float(data.weights.get(name, 1.0)) for name in sets]
    train = sample_type(list(sets.values()), weights, seed=seed, **length(num_pairs), **common)
    if not data.val_splits:
        return train, None
    missing = sorted(set(data.val_splits) - set(data.roots))
    if missing:
        raise ValueError(f"data.val_splits names {missing} without a folder in data.roots")
    val_sets = load_training_sets(
        {name: data.roots[name] for name in data.val_splits}, data.val_splits
    )
    val = sample_type(list(val_sets.values()), seed=seed + 1, **length(val_pairs), **common)
    return train, val


def _cache_key(config: ExperimentConfig) -> str:
    """Everything the stored crops and features depend on; the loss and the loop do not matter."""
    made_from = config_to_dict(config)
    if config.model == "dimp":
        sampling = ("processing", "num_train_frames", "num_test_frames")
        key = {name: made_from[name] for name in ("backbone", "pretrained", "backbone_weights")}
        key.update(
            model="dimp",
            data=made_from["data"],
            dimp={name: made_from["dimp"][name] for name in sampling},
        )
    else:  # the key of the box head's caches made before ``model`` and ``dimp`` existed
        ignored = ("preset", "loss", "trainer", "feature_cache", "model", "dimp")
        key = {name: value for name, value in made_from.items() if name not in ignored}
    return json.dumps({**key, "seed": config.trainer.seed}, sort_keys=True)


def _cached_datasets(
    config: ExperimentConfig,
    module: BoxRegressionModule | DiMPTrainingModule,
    run_dir: Path,
    progress: bool,
) -> tuple[Dataset, Dataset | None]:
    """Training and validation samples read from a feature cache, built first where missing."""
    cache = config.feature_cache
    folder = Path(cache.folder) if cache.folder else run_dir / FEATURES_FOLDER
    train_pairs, val_pairs = build_datasets(config, num_pairs=cache.train_pairs)
    options = {"key": _cache_key(config), "chunk_size": cache.chunk_size}
    options.update(batch_size=cache.batch_size, progress=progress and config.trainer.progress)
    if config.model == "dimp":
        train = CachedFrameSets(
            build_frame_set_cache(train_pairs, module, folder / "train", **options)
        )
        if val_pairs is None:
            return train, None
        return train, CachedFrameSets(
            build_frame_set_cache(val_pairs, module, folder / "val", **options)
        )
    train_cache = build_feature_cache(train_pairs, module, folder / "train", **options)
    trainer = config.trainer
    samples = trainer.samples_per_epoch or trainer.batch_size
    train = CachedPairs(train_cache, config.processing, trainer.epochs * samples, trainer.seed)
    if val_pairs is None:
        return train, None
    val_cache = build_feature_cache(val_pairs, module, folder / "val", **options)
    val = CachedPairs(val_cache, config.processing, len(val_pairs), trainer.seed + 1)
    return train, val


def run_experiment(
    config: ExperimentConfig,
    run_dir: str | Path,
    resume: bool = False,
    context: DistributedContext | None = None,
    stop_after_epoch: int | None = None,
) -> list[EpochResult]:
    """Train the model as ``config`` says and write the trained model to ``run_dir``.

    Writes ``config.yaml``, ``metrics.csv``, ``checkpoints/`` and, when the last epoch is done,
    :func:`model_file` (``iou_net.safetensors`` or ``dimp_classifier.safetensors``, loadable with
    :func:`ebmtrack.models.serialization.load_model`). A fresh DiMP run with validation data first
    validates the untrained classifier into ``untrained_val.json``, the baseline of the curve.
    With ``resume`` it continues from the run's latest checkpoint (a fresh start if it has none);
    without, a folder that already holds checkpoints is refused (ValueError). Works the same under
    ``torchrun`` (one process per device).
    """
    context = context or init_distributed(config.trainer.device)
    run_dir = Path(run_dir)
    existing = latest_checkpoint(run_dir / "checkpoints")
    if existing is not None and not resume:
        raise ValueError(
            f"{run_dir} already holds a run (checkpoint {existing.path.name}); resume it or "
            "choose another run folder"
        )
    if context.is_main:
        save_config(config, run_dir / CONFIG_FILE)
    module = build_module(config)
    if config.feature_cache.enabled:
        if context.world_size > 1:
            raise ValueError("feature_cache.enabled needs a single process (build the cache once)")
        train, val = _cached_datasets(config, module, run_dir, context.is_main)
    else:
        train, val = build_datasets(config)
    trainer = Trainer(
        module,
        train,
        config.trainer,
        run_dir,
        val_data=val,
        experiment_config=config_to_dict(config),
        context=context,
    )
    if resume:
        trainer.resume()
    if config.model == "dimp" and val is not None and trainer.epoch == 0:
        untrained = trainer.validate()
        if context.is_main:
            (run_dir / UNTRAINED_VAL_FILE).write_text(json.dumps(untrained, indent=2) + "\n")
    results = trainer.fit(stop_after_epoch)
    if context.is_main and trainer.epoch == config.trainer.epochs:
        from ebmtrack.models.serialization import save_model

        head = module.classifier if config.model == "dimp" else module.iou_net
        save_model(head.cpu(), run_dir / model_file(config))
    return results
