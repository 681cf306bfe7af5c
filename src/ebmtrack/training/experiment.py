"""Box-head and classifier training experiments: one config class per kind, and the function that
runs any of them.

An experiment config says everything about a run: backbone, model sizes, data source and its
processing, loss and training loop. It is saved as ``config.yaml`` in the run folder (its
``model`` key names the kind, its ``data.source`` the data source) and inside every checkpoint,
so a run can be resumed or repeated from its folder alone (:func:`load_experiment`).

Kinds (:data:`EXPERIMENTS`), both :class:`Experiment` subclasses that share the backbone, the
data, the loop and the feature routes, and each own what differs: the module trained, the samples
drawn, the feature cache's key and samples, and the model file written at the end.

- :class:`IoUNetExperiment` (``model: iou-net``): ATOM's IoU-Net box head with MSE or an EBM loss
  on frame pairs (:mod:`ebmtrack.training.box_regression`); writes ``iou_net.safetensors``.
- :class:`DiMPExperiment` (``model: dimp``): DiMP's target classifier through its unrolled
  optimizer on sets of frames (:mod:`ebmtrack.training.dimp`); writes
  ``dimp_classifier.safetensors``.

The data sources are :mod:`ebmtrack.training.sources`, the named presets
:mod:`ebmtrack.training.presets`, the upgrades of configs saved in earlier formats
:mod:`ebmtrack.training.legacy`; :mod:`ebmtrack.training.runs` builds a run's config from a
preset, a file, flags and overrides, and loads or exports a saved run.

Choosing an EBM loss (``loss.name``, e.g. ``nce+`` or ``kld-is``) trains the same head with the
BMVC 2020 recipe of that loss (:data:`~ebmtrack.training.box_regression.EBM_RECIPES`).
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn
from torch.utils.data import Dataset

from ebmtrack.data.processing import AtomProcessing

from .box_regression import BoxLossConfig, BoxRegressionModule
from .checkpoint import latest_checkpoint
from .config import TrainerConfig, config_from_dict, config_to_dict, save_config
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
from .feature_stream import FeatureStreamConfig, StreamedFrameSets, StreamedPairs
from .sources import SOURCES, DataConfig, data_source
from .sources.features import CachedFeatures, ImageSamples, StreamedFeatures
from .trainer import EpochResult, Trainer

CONFIG_FILE = "config.yaml"
UNTRAINED_VAL_FILE = "untrained_val.json"


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
        backbone: a registered backbone (:func:`ebmtrack.models.backbones.backbone_names`).
        pretrained: load ImageNet weights (from ``backbone_weights``, or the packaged ones).
        backbone_weights: path of a torchvision-style checkpoint (needed for pretrained ResNets).
        data: the data source and its settings (:mod:`ebmtrack.training.sources`; default:
            ATOM's data sets, ``source: datasets``).
        trainer: the training loop.
        feature_cache: compute the frozen backbone's features once per sample
            (:mod:`ebmtrack.training.feature_cache`).
        feature_stream: every sample a fresh one whose features the DataLoader workers compute
            (:mod:`ebmtrack.training.feature_stream`); not with ``feature_cache``.
    """

    preset: str = ""
    model: str = field(default="", init=False)
    backbone: str = "resnet18"
    pretrained: bool = True
    backbone_weights: str | None = None
    data: DataConfig = field(default_factory=lambda: DataConfig(source="datasets"))
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    feature_cache: FeatureCacheConfig = field(default_factory=FeatureCacheConfig)
    feature_stream: FeatureStreamConfig = field(default_factory=FeatureStreamConfig)

    model_file: ClassVar[str]
    """The trained model's file that :func:`run_experiment` writes into the run folder."""
    validates_untrained: ClassVar[bool] = False
    """Whether a fresh run with validation data first validates the untrained model into
    :data:`UNTRAINED_VAL_FILE` (the baseline of the curve)."""

    def __post_init__(self) -> None:
        if self.feature_stream.enabled and self.feature_cache.enabled:
            raise ValueError("enable feature_stream or feature_cache, not both")

    @property
    def precomputed(self) -> bool:
        """Whether the module reads features (cached or streamed) rather than images."""
        return self.feature_cache.enabled or self.feature_stream.enabled

    def build_module(self) -> nn.Module:
        """Frozen backbone + freshly initialized model + loss (reading precomputed features when
        the samples reach it as features: :meth:`feature_source`).

        Random initializations (the model's, and the backbone's without pretrained weights) are
        seeded by ``trainer.seed``, so the module is a function of the config (checkpoints do not
        store the frozen backbone).
        """
        from ebmtrack.models.backbones import create_backbone

        torch.manual_seed(self.trainer.seed)
        backbone = create_backbone(self.backbone, self.pretrained, self.backbone_weights)
        return self._build_module(backbone)

    def build_datasets(self, num_pairs: int | None = None) -> tuple[Dataset, Dataset | None]:
        """``(train, val)`` samples of the collections of ``data``'s source (``val`` None without
        validation data); validation samples are drawn with the next seed.

        ``num_pairs``: length of the training set (default ``epochs * samples_per_epoch``).
        """
        trainer, seed = self.trainer, self.trainer.seed
        num_pairs = num_pairs or trainer.epochs * (trainer.samples_per_epoch or trainer.batch_size)
        val_pairs = trainer.val_samples or trainer.batch_size
        self.data.check()
        found = data_source(self.data).collections(seed)
        train = self._samples(found.train, found.weights, seed, num_pairs)
        if found.val is None:
            return train, None
        return train, self._samples(found.val, None, seed + 1, val_pairs)

    def feature_source(self) -> ImageSamples | CachedFeatures | StreamedFeatures:
        """The route of the samples to the module (:mod:`ebmtrack.training.sources.features`):
        the feature stream where ``feature_stream.enabled``, the feature cache where
        ``feature_cache.enabled``, else the images."""
        if self.feature_stream.enabled:
            return StreamedFeatures()
        if self.feature_cache.enabled:
            return CachedFeatures(self.feature_cache)
        return ImageSamples()

    def datasets(
        self, module: nn.Module, run_dir: Path, context: DistributedContext
    ) -> tuple[Dataset, Dataset | None]:
        """``(train, val)`` as :meth:`build_module`'s module reads them (:meth:`feature_source`):
        images, or features (a cache is built first where missing, single process only)."""
        return self.feature_source().datasets(self, module, run_dir, context)

    def cached_datasets(
        self, module: nn.Module, run_dir: Path, progress: bool = True
    ) -> tuple[Dataset, Dataset | None]:
        """Training and validation samples read from the feature cache (``feature_cache.folder``,
        or ``features/`` in ``run_dir``), built first where missing."""
        return CachedFeatures(self.feature_cache).read(self, module, run_dir, progress)

    @abstractmethod
    def cache_key(self) -> str:
        """Everything the cached crops and features depend on (the loss and the loop do not
        matter): a cache built under another key is rebuilt. Existing caches are found by their
        key, so a kind's key must not change."""

    def provenance(self, module: nn.Module) -> dict[str, str]:
        """What :attr:`model_file`'s header records of the training
        (:data:`~ebmtrack.models.serialization.PROVENANCE`): the backbone weights the features
        came from (a tracker with other weights refuses the file), the precision, a head's loss."""
        from ebmtrack.models.serialization import backbone_provenance

        if self.backbone_weights:
            origin = Path(self.backbone_weights).name
        elif self.pretrained:
            origin = "the shipped ImageNet weights"
        else:
            origin = f"random initialisation (pretrained: false, seed {self.trainer.seed})"
        device = self.trainer.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.feature_stream.enabled:
            backbone = f"backbone {self.feature_stream.runtime} in the data workers"
        elif isinstance(self.feature_source(), ImageSamples):
            backbone = "backbone eager float32"
        else:
            backbone = "backbone eager float32, stored float16"
        if device != "cpu":
            head = "float16 autocast" if self.trainer.amp else "float32"
        else:
            head = "bfloat16 autocast" if self.trainer.cpu_bf16 else "float32"
        trained_on = f"torch {torch.__version__.split('+')[0]}, {device}: {backbone}, head {head}"
        loss_entry = getattr(getattr(self, "loss", None), "entry", dict)  # a box head's loss
        return {**backbone_provenance(module.backbone, origin, trained_on), **loss_entry()}

    @abstractmethod
    def streamed_samples(self, samples: Dataset, module: nn.Module, training: bool) -> Dataset:
        """``samples`` with their images replaced by backbone features computed where they are
        read (in the DataLoader workers), as ``feature_stream`` says."""

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
    def cached_samples(
        self, samples: Dataset, module: nn.Module, folder: Path, options: dict, training: bool
    ) -> Dataset:
        """``samples`` through the feature cache in ``folder`` (built with ``options``)."""

    def _key(self, names: Iterable[str], **more: Any) -> str:
        made_from = config_to_dict(self)
        key = {name: made_from[name] for name in names}
        if "data" in key:
            # The source is left out: each source's own field (roots, synthetic_sequences,
            # sequence_folder, pack) already tells the data apart, and the existing caches'
            # keys hold the other fields only (DataConfig.key_dict).
            key["data"] = self.data.key_dict()
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
        head_windows: the head's branches run on the feature windows its boxes read
            (:class:`~ebmtrack.training.box_regression.BoxRegressionModule`'s ``windows``).
    """

    preset: str = "atom-r18"
    model: str = field(default="iou-net", init=False)
    head_width: float = 1.0
    head_dims: int = 256
    processing: AtomProcessing = field(default_factory=AtomProcessing)
    loss: BoxLossConfig = field(default_factory=BoxLossConfig)
    head_windows: bool = False

    model_file: ClassVar[str] = "iou_net.safetensors"

    def _build_module(self, backbone) -> BoxRegressionModule:
        from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig

        dims = (self.head_dims, self.head_dims)
        head = dataclasses.replace(
            IoUNetConfig.for_backbone(backbone, self.head_width),
            pred_input_dim=dims,
            pred_inter_dim=dims,
        )
        module_type = CachedBoxRegressionModule if self.precomputed else BoxRegressionModule
        return module_type(
            backbone, AtomIoUNet(head), self.loss, backbone.default_layers, self.head_windows
        )

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

    def cache_key(self) -> str:
        # The key of the box head's caches made before DiMP experiments existed: the backbone,
        # the crops and the data, and the head's sizes (though the features do not depend on
        # them).
        names = ("backbone", "pretrained", "backbone_weights", "head_width", "head_dims")
        return self._key((*names, "processing", "data"))

    def cached_samples(self, samples, module, folder, options, training) -> Dataset:
        cache = build_feature_cache(samples, module, folder, **options)
        trainer = self.trainer
        if training:  # fresh proposals for every pass over the cached pairs
            num = trainer.epochs * (trainer.samples_per_epoch or trainer.batch_size)
            return CachedPairs(cache, self.processing, num, trainer.seed)
        return CachedPairs(cache, self.processing, len(samples), trainer.seed + 1)

    def streamed_samples(self, samples, module, training) -> Dataset:
        stream = self.feature_stream
        grouped = stream.tests_per_reference if training else 1  # validation: independent
        options = {"runtime": stream.runtime, "threads": stream.threads}
        return StreamedPairs(
            samples, module.backbone, module.layers, **options, tests_per_reference=grouped
        )

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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.feature_stream.enabled and self.feature_stream.tests_per_reference != 1:
            raise ValueError(
                "feature_stream.tests_per_reference groups box-head pairs; a DiMP frame set "
                f"is drawn whole: it must be 1, got {self.feature_stream.tests_per_reference}"
            )

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
        module_type = CachedDiMPTrainingModule if self.precomputed else DiMPTrainingModule
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

    def cached_samples(self, samples, module, folder, options, training) -> Dataset:
        return CachedFrameSets(build_frame_set_cache(samples, module, folder, **options))

    def streamed_samples(self, samples, module, training) -> Dataset:
        stream = self.feature_stream
        options = {"runtime": stream.runtime, "threads": stream.threads}
        return StreamedFrameSets(samples, module.backbone, module.layer, **options)

    def trained_model(self, module) -> nn.Module:
        return module.classifier


EXPERIMENTS: dict[str, type[Experiment]] = {"iou-net": IoUNetExperiment, "dimp": DiMPExperiment}
"""The experiment class of each ``model`` key of a config."""


def setting_names(cls: type[Experiment]) -> set[str]:
    """The keys of a config of experiment class ``cls`` (``model`` aside)."""
    return {f.name for f in dataclasses.fields(cls) if f.init}


def kinds_with_setting(key: str) -> list[str]:
    """The kinds (keys of :data:`EXPERIMENTS`) that have the setting ``key``."""
    return [kind for kind, cls in EXPERIMENTS.items() if key in setting_names(cls)]


def experiment_type(data: Mapping[str, Any], where: str = "config") -> type[Experiment]:
    """The class of the config ``data``: the one its ``model`` names (ValueError otherwise)."""
    kind = data.get("model")
    if kind is None:
        raise ValueError(f"{where}.model is missing; name the kind: {', '.join(EXPERIMENTS)}")
    if kind not in EXPERIMENTS:
        raise ValueError(f"{where}.model must be one of {', '.join(EXPERIMENTS)}, got {kind!r}")
    return EXPERIMENTS[kind]


def experiment_from_dict(data: Mapping[str, Any], where: str = "config") -> Experiment:
    """The experiment of plain-data config ``data`` (as :func:`config_to_dict` makes it), of the
    class that its ``model`` names and with the data source that its ``data.source`` names;
    other missing keys keep the class's defaults. Configs saved in earlier formats go through
    :func:`ebmtrack.training.legacy.upgrade_config_dict` first
    (:func:`ebmtrack.training.runs.load_experiment`).

    Raises:
        ValueError: no ``model`` or ``data.source``, or an unknown one; a key of another kind of
            experiment, or of none (the message lists the valid ones), or a bad value.
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
    section = values.get("data")
    if not isinstance(section, Mapping) or "source" not in section:
        raise ValueError(
            f"{where}.data.source is missing; name where the training data comes from: "
            f"{', '.join(SOURCES)}"
        )
    return config_from_dict(cls, values, where)


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

        model = config.trained_model(module).cpu()
        save_model(model, run_dir / config.model_file, config.provenance(module))
    return results
