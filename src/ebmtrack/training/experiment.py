"""Box-head and classifier training experiments: one config class per kind, the named presets, and
the function that runs any of them.

An experiment config says everything about a run: backbone, model sizes, data sets and their
processing, loss and training loop. It is saved as ``config.yaml`` in the run folder (its
``model`` key names the kind) and inside every checkpoint, so a run can be resumed or repeated
from its folder alone (:func:`load_experiment`).

Kinds (:data:`EXPERIMENTS`), both :class:`Experiment` subclasses that share the backbone, the
data, the loop and the feature cache, and each own what differs: the module trained, the samples
drawn, the feature cache's key and samples, and the model file written at the end.

- :class:`IoUNetExperiment` (``model: iou-net``): ATOM's IoU-Net box head with MSE or an EBM loss
  on frame pairs (:mod:`ebmtrack.training.box_regression`); writes ``iou_net.safetensors``.
- :class:`DiMPExperiment` (``model: dimp``): DiMP's target classifier through its unrolled
  optimizer on sets of frames (:mod:`ebmtrack.training.dimp`); writes
  ``dimp_classifier.safetensors``.

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
- ``dimp-cpu``: a :class:`DiMPExperiment` on the same data, backbone and held-out fold: 3 + 3
  frames per sample sampled causally within 30 frames, DiMP-18's crops and jitter, features
  cached once, the classification loss through the unrolled optimizer (docs/dimp.md,
  "Training").
- ``pack-cpu`` and ``dimp-pack-cpu``: ``default-cpu`` and ``dimp-cpu`` on the training pack
  (:data:`PACK`, :mod:`ebmtrack.training.presets.pack`).
- ``pack-stream``: ``pack-cpu``'s head on the whole training pack (its clips too), every sample a
  fresh pair whose int8 backbone features a DataLoader worker computes
  (:mod:`ebmtrack.training.feature_stream`): 40 epochs of 16 384 distinct pairs.

Choosing an EBM loss (``loss.name``, e.g. ``nce+`` or ``kld-is``) trains the same head with the
BMVC 2020 recipe of that loss (:data:`~ebmtrack.training.box_regression.EBM_RECIPES`).
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn
from torch.utils.data import Dataset

from ebmtrack.data.processing import AtomProcessing
from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences

from .box_regression import BoxLossConfig, BoxRegressionModule
from .checkpoint import latest_checkpoint
from .config import (
    TrainerConfig,
    config_from_dict,
    config_to_dict,
    read_config_file,
    save_config,
)
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
from .feature_stream import FeatureStreamConfig, StreamedPairs
from .presets.pack import DEFAULT_PARTS as PACK_PARTS
from .presets.pack import PACK_HOLDOUT
from .presets.pack import PARTS as PACK_ALL_PARTS
from .trainer import EpochResult, Trainer

CONFIG_FILE = "config.yaml"
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
            ``stills/coco128/``, ``stills/tiny-imagenet/``, ``clips/``; ``weights`` keys:
            ``sequences``, ``stills``, ``synthetic``; :mod:`ebmtrack.training.presets.pack`).
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
class Experiment(ABC):
    """What every kind of training experiment has; see the module docstring.

    A subclass is one kind (its ``model``, a key of :data:`EXPERIMENTS`): it adds the settings
    of its model and says how the module, the samples and the feature cache are made and what
    the run folder keeps at the end. :func:`run_experiment` runs any kind.

    Attributes:
        preset: the preset it started from (informational).
        model: the kind, fixed by the class and written to ``config.yaml`` so that
            :func:`experiment_from_dict` can rebuild the right class.
        backbone: a name of :data:`ebmtrack.models.backbones.BACKBONES`.
        pretrained: load ImageNet weights (from ``backbone_weights``, or the packaged ones).
        backbone_weights: path of a torchvision-style checkpoint (needed for pretrained ResNets).
        data: the data sets.
        trainer: the training loop.
        feature_cache: compute the frozen backbone's features once per sample
            (:mod:`ebmtrack.training.feature_cache`).
    """

    preset: str = ""
    model: str = field(default="", init=False)
    backbone: str = "resnet18"
    pretrained: bool = True
    backbone_weights: str | None = None
    data: DataConfig = field(default_factory=DataConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    feature_cache: FeatureCacheConfig = field(default_factory=FeatureCacheConfig)

    model_file: ClassVar[str]
    """The trained model's file that :func:`run_experiment` writes into the run folder."""
    validates_untrained: ClassVar[bool] = False
    """Whether a fresh run with validation data first validates the untrained model into
    :data:`UNTRAINED_VAL_FILE` (the baseline of the curve)."""

    def build_module(self) -> nn.Module:
        """Frozen backbone + freshly initialized model + loss (reading cached features when
        ``feature_cache.enabled``).

        Random initializations (the model's, and the backbone's without pretrained weights) are
        seeded by ``trainer.seed``, so the module is a function of the config (checkpoints do not
        store the frozen backbone).
        """
        from ebmtrack.models.backbones import create_backbone

        torch.manual_seed(self.trainer.seed)
        backbone = create_backbone(self.backbone, self.pretrained, self.backbone_weights)
        return self._build_module(backbone)

    def build_datasets(self, num_pairs: int | None = None) -> tuple[Dataset, Dataset | None]:
        """``(train, val)`` sample data sets (``val`` None without validation data).

        ``num_pairs``: length of the training set (default ``epochs * samples_per_epoch``).
        """
        from ebmtrack.data.sampler import load_training_sets

        data, seed, trainer = self.data, self.trainer.seed, self.trainer
        num_pairs = num_pairs or trainer.epochs * (trainer.samples_per_epoch or trainer.batch_size)
        val_pairs = trainer.val_samples or trainer.batch_size
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
            train = self._samples(list(sources.values()), weights, seed, num_pairs)
            return train, self._samples([held_out], None, seed + 1, val_pairs)
        if data.synthetic_sequences > 0:
            # Validation sequences come from another seed: targets and textures never seen in
            # training.
            train_seqs = SyntheticSequences(data.synthetic_sequences, data.synthetic, seed=seed)
            val_seqs = SyntheticSequences(
                max(1, data.synthetic_sequences // 4), data.synthetic, seed + 1
            )
            return (
                self._samples([train_seqs], None, seed, num_pairs),
                self._samples([val_seqs], None, seed + 1, val_pairs),
            )
        if not data.roots:
            raise ValueError(
                "no training data: give data.roots (e.g. --got10k DIR, --lasot DIR, "
                "--trackingnet DIR, --coco DIR) or data.synthetic_sequences > 0"
            )
        sets = load_training_sets(data.roots, data.splits)
        weights = [float(data.weights.get(name, 1.0)) for name in sets]
        train = self._samples(list(sets.values()), weights, seed, num_pairs)
        if not data.val_splits:
            return train, None
        missing = sorted(set(data.val_splits) - set(data.roots))
        if missing:
            raise ValueError(f"data.val_splits names {missing} without a folder in data.roots")
        val_sets = load_training_sets(
            {name: data.roots[name] for name in data.val_splits}, data.val_splits
        )
        return train, self._samples(list(val_sets.values()), None, seed + 1, val_pairs)

    def datasets(
        self, module: nn.Module, run_dir: Path, context: DistributedContext
    ) -> tuple[Dataset, Dataset | None]:
        """``(train, val)`` as :meth:`build_module`'s module reads them: images, or features
        from the cache (built first where missing, single process only)."""
        if not self.feature_cache.enabled:
            return self.build_datasets()
        if context.world_size > 1:
            raise ValueError("feature_cache.enabled needs a single process (build the cache once)")
        return self.cached_datasets(module, run_dir, context.is_main)

    def cached_datasets(
        self, module: nn.Module, run_dir: Path, progress: bool = True
    ) -> tuple[Dataset, Dataset | None]:
        """Training and validation samples read from the feature cache (``feature_cache.folder``,
        or ``features/`` in ``run_dir``), built first where missing."""
        cache = self.feature_cache
        folder = Path(cache.folder) if cache.folder else Path(run_dir) / FEATURES_FOLDER
        train_samples, val_samples = self.build_datasets(num_pairs=cache.train_pairs)
        options = {"key": self.cache_key(), "chunk_size": cache.chunk_size}
        options.update(batch_size=cache.batch_size, progress=progress and self.trainer.progress)
        train = self._cached(train_samples, module, folder / "train", options, training=True)
        if val_samples is None:
            return train, None
        return train, self._cached(val_samples, module, folder / "val", options, training=False)

    @abstractmethod
    def cache_key(self) -> str:
        """Everything the cached crops and features depend on (the loss and the loop do not
        matter): a cache built under another key is rebuilt. Existing caches are found by their
        key, so a kind's key must not change."""

    @abstractmethod
    def trained_model(self, module: nn.Module) -> nn.Module:
        """The part of :meth:`build_module`'s module that :attr:`model_file` keeps."""

    @abstractmethod
    def _build_module(self, backbone: nn.Module) -> nn.Module:
        """The training module around ``backbone`` (the random state is seeded)."""

    @abstractmethod
    def _samples(self, datasets: list, weights: list[float] | None, seed: int, num: int) -> Dataset:
        """``num`` samples (pairs, or sets of frames) drawn from ``datasets`` with ``weights`` and
        ``seed``."""

    @abstractmethod
    def _cached(
        self, samples: Dataset, module: nn.Module, folder: Path, options: dict, training: bool
    ) -> Dataset:
        """``samples`` through the feature cache in ``folder`` (built with ``options``)."""

    def _key(self, names: Iterable[str], **more: Any) -> str:
        made_from = config_to_dict(self)
        key = {name: made_from[name] for name in names}
        return json.dumps({**key, **more, "seed": self.trainer.seed}, sort_keys=True)


@dataclass
class IoUNetExperiment(Experiment):
    """Training ATOM's IoU-Net box head (``model: iou-net``) on frame pairs, with MSE on the
    overlap or an EBM loss; writes ``iou_net.safetensors``.

    Attributes (besides :class:`Experiment`'s):
        head_width: multiplier of the IoU-Net's hidden convolution widths
            (:meth:`ebmtrack.models.iou_net.IoUNetConfig.for_backbone`'s ``width``).
        head_dims: channels of the modulated features and of the predictor's linear blocks
            (``for_backbone``'s are 256 * ``head_width``).
        processing: crops, jitter and proposals of a pair.
        loss: the box loss.
        feature_stream: fresh pairs whose features the DataLoader workers compute
            (:mod:`ebmtrack.training.feature_stream`); not with ``feature_cache``.
    """

    preset: str = "atom-r18"
    model: str = field(default="iou-net", init=False)
    head_width: float = 1.0
    head_dims: int = 256
    processing: AtomProcessing = field(default_factory=AtomProcessing)
    loss: BoxLossConfig = field(default_factory=BoxLossConfig)
    feature_stream: FeatureStreamConfig = field(default_factory=FeatureStreamConfig)

    model_file: ClassVar[str] = "iou_net.safetensors"

    def __post_init__(self) -> None:
        if self.feature_stream.enabled and self.feature_cache.enabled:
            raise ValueError("enable feature_stream or feature_cache, not both")

    def _build_module(self, backbone) -> BoxRegressionModule:
        from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig

        dims = (self.head_dims, self.head_dims)
        head = dataclasses.replace(
            IoUNetConfig.for_backbone(backbone, self.head_width),
            pred_input_dim=dims,
            pred_inter_dim=dims,
        )
        precomputed = self.feature_cache.enabled or self.feature_stream.enabled
        module_type = CachedBoxRegressionModule if precomputed else BoxRegressionModule
        return module_type(backbone, AtomIoUNet(head), self.loss, backbone.default_layers)

    def _samples(self, datasets, weights, seed, num) -> Dataset:
        from ebmtrack.data.sampler import TrackingPairs

        return TrackingPairs(
            datasets,
            weights,
            processing=self.processing,
            num_pairs=num,
            max_gap=self.data.max_gap,
            seed=seed,
        )

    def datasets(self, module, run_dir, context) -> tuple[Dataset, Dataset | None]:
        if not self.feature_stream.enabled:
            return super().datasets(module, run_dir, context)
        stream = self.feature_stream
        train, val = self.build_datasets()
        options = {"layers": module.layers, "runtime": stream.runtime, "threads": stream.threads}
        return (
            StreamedPairs(train, module.backbone, **options),
            None if val is None else StreamedPairs(val, module.backbone, **options),
        )

    def cache_key(self) -> str:
        # The key of the box head's caches made before DiMP experiments existed: the backbone,
        # the crops and the data, and the head's sizes (though the features do not depend on
        # them).
        names = ("backbone", "pretrained", "backbone_weights", "head_width", "head_dims")
        return self._key((*names, "processing", "data"))

    def _cached(self, samples, module, folder, options, training) -> Dataset:
        cache = build_feature_cache(samples, module, folder, **options)
        trainer = self.trainer
        if training:  # fresh proposals for every pass over the cached pairs
            num = trainer.epochs * (trainer.samples_per_epoch or trainer.batch_size)
            return CachedPairs(cache, self.processing, num, trainer.seed)
        return CachedPairs(cache, self.processing, len(samples), trainer.seed + 1)

    def trained_model(self, module) -> nn.Module:
        return module.iou_net


@dataclass
class DiMPExperiment(Experiment):
    """Training DiMP's target classifier (``model: dimp``, :mod:`ebmtrack.training.dimp`) through
    its unrolled optimizer on sets of training and test frames; writes
    ``dimp_classifier.safetensors``. A fresh run with validation data first validates the
    untrained classifier into :data:`UNTRAINED_VAL_FILE`.

    Attributes (besides :class:`Experiment`'s):
        dimp: DiMP's samples, crops, labels, loss and classifier sizes.
    """

    model: str = field(default="dimp", init=False)
    dimp: DiMPTrainingConfig = field(default_factory=DiMPTrainingConfig)

    model_file: ClassVar[str] = "dimp_classifier.safetensors"
    validates_untrained: ClassVar[bool] = True

    def _build_module(self, backbone) -> DiMPTrainingModule:
        from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig

        settings = self.dimp
        classifier_config = dataclasses.replace(
            DiMPConfig.for_backbone(backbone, settings.feature_dim),
            num_iter=settings.num_iter,
            init_gauss_sigma=settings.label_sigma(
                backbone.feature_info[backbone.classifier_layer].stride
            ),
        )
        module_type = CachedDiMPTrainingModule if self.feature_cache.enabled else DiMPTrainingModule
        return module_type(backbone, DiMPClassifier(classifier_config), settings)

    def _samples(self, datasets, weights, seed, num) -> Dataset:
        from ebmtrack.data.sampler import TrackingFrameSets

        return TrackingFrameSets(
            datasets,
            weights,
            processing=self.dimp.processing,
            num_samples=num,
            num_train_frames=self.dimp.num_train_frames,
            num_test_frames=self.dimp.num_test_frames,
            max_gap=self.data.max_gap,
            seed=seed,
        )

    def cache_key(self) -> str:
        sampling = ("processing", "num_train_frames", "num_test_frames")
        made_from = config_to_dict(self.dimp)
        return self._key(
            ("backbone", "pretrained", "backbone_weights", "data"),
            model=self.model,
            dimp={name: made_from[name] for name in sampling},
        )

    def _cached(self, samples, module, folder, options, training) -> Dataset:
        return CachedFrameSets(build_frame_set_cache(samples, module, folder, **options))

    def trained_model(self, module) -> nn.Module:
        return module.classifier


EXPERIMENTS: dict[str, type[Experiment]] = {"iou-net": IoUNetExperiment, "dimp": DiMPExperiment}
"""The experiment class of each ``model`` key of a config."""
LEGACY_MODEL = "iou-net"
"""The kind of a saved config without ``model``: runs from before DiMP experiments existed."""
LEGACY_KEYS = frozenset(
    {"preset", "model", "backbone", "pretrained", "backbone_weights", "head_width", "head_dims"}
    | {"processing", "data", "loss", "dimp", "trainer", "feature_cache"}
)
"""The keys of every config that the code before the experiment classes wrote: one class for
both kinds, with the settings of both (those of the other kind did nothing)."""


def setting_names(cls: type[Experiment]) -> set[str]:
    """The keys of a config of experiment class ``cls`` (``model`` aside)."""
    return {f.name for f in dataclasses.fields(cls) if f.init}


def kinds_with_setting(key: str) -> list[str]:
    """The kinds (keys of :data:`EXPERIMENTS`) that have the setting ``key``."""
    return [kind for kind, cls in EXPERIMENTS.items() if key in setting_names(cls)]


def experiment_type(data: Mapping[str, Any], where: str = "config") -> type[Experiment]:
    """The class of the config ``data``: its ``model`` (:data:`LEGACY_MODEL` without one)."""
    kind = data.get("model", LEGACY_MODEL)
    if kind not in EXPERIMENTS:
        raise ValueError(f"{where}.model must be one of {', '.join(EXPERIMENTS)}, got {kind!r}")
    return EXPERIMENTS[kind]


def experiment_from_dict(data: Mapping[str, Any], where: str = "config") -> Experiment:
    """The experiment of plain-data config ``data`` (as :func:`config_to_dict` makes it), of the
    class that its ``model`` names; missing keys keep the class's defaults.

    Raises:
        ValueError: a key of another kind of experiment, or of none (the message lists the
            valid ones), or a bad value.
    """
    cls = experiment_type(data, where)
    values = {key: value for key, value in data.items() if key != "model"}
    for key in values:
        kinds = kinds_with_setting(key)
        if kinds and cls.model not in kinds:
            raise ValueError(
                f"{key} in {where} does not apply to {cls.model} experiments; it is a setting "
                f"of {' and '.join(kinds)} experiments"
            )
    return config_from_dict(cls, values, where)


def upgrade_config_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """A config as the code before the experiment classes wrote it (:data:`LEGACY_KEYS`: a
    run's ``config.yaml``) without the settings of the kind it is not; any other mapping
    unchanged (a copy). A config without ``model`` is of :data:`LEGACY_MODEL`."""
    data = dict(data)
    if not LEGACY_KEYS <= set(data):
        return data
    own = setting_names(experiment_type(data))
    return {key: value for key, value in data.items() if key in own or key == "model"}


def load_experiment(path: str | Path) -> Experiment:
    """The experiment saved in a YAML or JSON config file (a run's ``config.yaml``), of the class
    its ``model`` names (``iou-net`` without one); files of the code before the experiment
    classes included (:func:`upgrade_config_dict`)."""
    return experiment_from_dict(upgrade_config_dict(read_config_file(path)), str(path))


def _atom_r18() -> IoUNetExperiment:
    # Pairs are random draws: walk through them in order so that none repeats in 40 epochs.
    return IoUNetExperiment(preset="atom-r18", trainer=TrainerConfig(shuffle=False))


def _synthetic_smoke() -> IoUNetExperiment:
    return IoUNetExperiment(
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


def _default_cpu() -> IoUNetExperiment:
    return IoUNetExperiment(
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


def _dimp_cpu() -> DiMPExperiment:
    # default-cpu's data and backbone; DiMP-18's samples (max_gap 30, 3 + 3 frames, its crops),
    # loss and lr schedule shape (x0.2 steps), shrunk to the CPU budget of docs/dimp.md.
    return DiMPExperiment(
        preset="dimp-cpu",
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


def _pack_cpu() -> IoUNetExperiment:
    # default-cpu's head, crops and loop, on the training pack: its real tracks, coco128's
    # objects and generated sequences with objects of all three parts as targets.
    return dataclasses.replace(_default_cpu(), preset="pack-cpu", data=_pack_data())


def _pack_stream() -> IoUNetExperiment:
    # pack-cpu's head, crops and data plus the pack's clips of consecutive frames, every sample a
    # fresh pair whose int8 backbone features a worker process computes (the trackers' default
    # backbone path): 40 epochs of 16,384 distinct pairs, a checkpoint every epoch.
    base = _pack_cpu()
    return dataclasses.replace(
        base,
        preset="pack-stream",
        data=_pack_data(pack_parts=list(PACK_ALL_PARTS)),
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


def _dimp_pack_cpu() -> DiMPExperiment:
    return dataclasses.replace(_dimp_cpu(), preset="dimp-pack-cpu", data=_pack_data(max_gap=30))


PRESETS: dict[str, Callable[[], Experiment]] = {
    "atom-r18": _atom_r18,
    "synthetic-smoke": _synthetic_smoke,
    "default-cpu": _default_cpu,
    "dimp-cpu": _dimp_cpu,
    "pack-cpu": _pack_cpu,
    "pack-stream": _pack_stream,
    "dimp-pack-cpu": _dimp_pack_cpu,
}


def preset_config(name: str) -> Experiment:
    """The config of preset ``name`` (an :class:`IoUNetExperiment` or a
    :class:`DiMPExperiment`); ValueError listing the presets otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[name]()


def run_experiment(
    config: Experiment,
    run_dir: str | Path,
    resume: bool = False,
    context: DistributedContext | None = None,
    stop_after_epoch: int | None = None,
) -> list[EpochResult]:
    """Train the model as ``config`` says and write the trained model to ``run_dir``.

    Writes ``config.yaml``, ``metrics.csv``, ``checkpoints/`` and, when the last epoch is done,
    ``config.model_file`` (``iou_net.safetensors`` or ``dimp_classifier.safetensors``, loadable
    with :func:`ebmtrack.models.serialization.load_model`). A fresh run of a kind that
    ``validates_untrained`` (DiMP) with validation data first validates the untrained model into
    ``untrained_val.json``, the baseline of the curve. With ``resume`` it continues from the
    run's latest checkpoint (a fresh start if it has none); without, a folder that already holds
    checkpoints is refused (ValueError). Works the same under ``torchrun`` (one process per
    device).
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
    module = config.build_module()
    train, val = config.datasets(module, run_dir, context)
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
    if config.validates_untrained and val is not None and trainer.epoch == 0:
        untrained = trainer.validate()
        if context.is_main:
            (run_dir / UNTRAINED_VAL_FILE).write_text(json.dumps(untrained, indent=2) + "\n")
    results = trainer.fit(stop_after_epoch)
    if context.is_main and trainer.epoch == config.trainer.epochs:
        from ebmtrack.models.serialization import save_model

        save_model(config.trained_model(module).cpu(), run_dir / config.model_file)
    return results


def export_checkpoint(run_dir: str | Path, path: str | Path) -> int:
    """Write the model of the run's latest checkpoint to ``path`` (the file the run writes at its
    end, e.g. ``iou_net.safetensors``), so that a long run's head can be used before it ends.

    Returns the checkpoint's epoch. Raises ValueError where ``run_dir`` holds no checkpoint.
    """
    from ebmtrack.models.serialization import save_model

    from .checkpoint import load_trainable_state_dict, read_checkpoint

    run_dir = Path(run_dir)
    checkpoint = latest_checkpoint(run_dir / "checkpoints")
    if checkpoint is None:
        raise ValueError(f"{run_dir} holds no checkpoint yet (none of its epochs has finished)")
    config = load_experiment(run_dir / CONFIG_FILE)
    module = config.build_module()
    model_state, _, _ = read_checkpoint(checkpoint)
    load_trainable_state_dict(module, model_state)
    save_model(config.trained_model(module).cpu(), path)
    return checkpoint.epoch
