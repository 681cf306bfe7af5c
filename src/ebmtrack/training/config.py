"""The training-loop settings and the dataclass <-> YAML/JSON round trip used for every config.

An experiment is described by one (possibly nested) dataclass; :func:`save_config` writes it next to
the run as YAML or JSON, and :func:`config_from_dict` rebuilds it, rejecting unknown keys so that a
typo in a config file is an error rather than a silently ignored setting.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ebmtrack.values import parse_value

T = TypeVar("T")


@dataclass
class TrainerConfig:
    """How the generic loop of :class:`ebmtrack.training.Trainer` runs. Defaults: ATOM's recipe.

    Attributes:
        epochs: number of epochs (ATOM paper: 40; the reference code's settings file: 50).
        samples_per_epoch: training samples per epoch over all processes (ATOM: 1000 batches of 64);
            ``None`` means one pass over the data set.
        batch_size: the global batch, split evenly across the processes of a distributed run.
        lr: Adam learning rate.
        lr_step_epochs: the learning rate is multiplied by ``lr_gamma`` every this many epochs.
        lr_gamma: see ``lr_step_epochs``.
        weight_decay: Adam weight decay (ATOM: none).
        val_every: validate after every this many epochs and after the last one; 0 disables.
        val_samples: validation samples per validation run (ATOM: 500 batches of 64); ``None`` is
            the whole validation set.
        shuffle: visit the data set in a new random order each epoch; False walks through it in
            consecutive ranges (for data sets of random pairs, where no index repeats that way).
        num_workers: DataLoader worker processes per training process.
        seed: seeds the data order and every random draw of the training step.
        device: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda"``.
        amp: mixed precision (float16 autocast + gradient scaling); only used on CUDA.
        cpu_bf16: on the CPU, the training step's forward in bfloat16 autocast (the validation
            stays float32); it pays where the CPU has native bfloat16 (AMX, avx512_bf16) and
            slows the step down elsewhere. CPU runs only.
        sync_batchnorm: in a multi-GPU run, compute BatchNorm statistics over the global batch
            (SyncBatchNorm). PyTorch supports this on GPUs only: on CPUs (gloo) every process
            normalizes with its own share of the batch.
        keep_checkpoints: how many epoch checkpoints to keep (the newest ones).
        progress: show a tqdm progress bar (on the first process only).
    """

    epochs: int = 40
    samples_per_epoch: int | None = 64000
    batch_size: int = 64
    lr: float = 1e-3
    lr_step_epochs: int = 15
    lr_gamma: float = 0.2
    weight_decay: float = 0.0
    val_every: int = 5
    val_samples: int | None = 32000
    shuffle: bool = True
    num_workers: int = 8
    seed: int = 1
    device: str = "auto"
    amp: bool = True
    cpu_bf16: bool = False
    sync_batchnorm: bool = True
    keep_checkpoints: int = 2
    progress: bool = True

    def __post_init__(self) -> None:
        positive = {"epochs": self.epochs, "batch_size": self.batch_size, "lr": self.lr}
        positive.update(lr_step_epochs=self.lr_step_epochs, keep_checkpoints=self.keep_checkpoints)
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        for name in ("samples_per_epoch", "val_samples"):
            value = getattr(self, name)
            if value is not None and value < self.batch_size:
                raise ValueError(
                    f"{name} must be None or at least batch_size={self.batch_size}, got {value}"
                )
        if self.val_every < 0 or self.num_workers < 0 or self.weight_decay < 0:
            raise ValueError("val_every, num_workers and weight_decay must be >= 0")
        if not 0 < self.lr_gamma <= 1:
            raise ValueError(f"lr_gamma must be in (0, 1], got {self.lr_gamma}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be one of auto, cpu, cuda; got {self.device!r}")
        if self.cpu_bf16 and self.device == "cuda":
            raise ValueError("trainer.cpu_bf16 applies to CPU runs only, not to cuda")


def _plain(value: Any) -> Any:
    if hasattr(value, "to_dict") and not isinstance(value, type):  # a section with its own form
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def config_to_dict(config: Any) -> dict[str, Any]:
    """A dataclass (nested ones too; a section with a ``to_dict`` method as that gives it) as a
    dict of plain YAML/JSON values; tuples become lists."""
    return json.loads(json.dumps(_plain(config)))


def _convert(value: Any, hint: Any, where: str) -> Any:
    """``value`` (plain data) converted to the annotated type ``hint`` where that is structural
    (a dataclass, or a section class with a ``from_dict`` class method); a value already of
    that type is kept."""
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and isinstance(value, hint):
        return value
    if hasattr(hint, "from_dict") and isinstance(value, dict):
        return hint.from_dict(value, where)
    if dataclasses.is_dataclass(hint):
        return config_from_dict(hint, value, where)
    if origin in (typing.Union, types.UnionType):
        options = [h for h in typing.get_args(hint) if h is not type(None)]
        if value is None or len(options) != 1:
            return value
        return _convert(value, options[0], where)
    if origin is tuple and isinstance(value, list | tuple):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], where) for v in value)
        if args and len(args) == len(value):
            return tuple(_convert(v, a, where) for a, v in zip(args, value, strict=True))
        return tuple(value)
    if hint is float and isinstance(value, int | str) and not isinstance(value, bool):
        try:  # PyYAML reads 1e-3 (no dot) as a string
            return float(value)
        except ValueError:
            raise ValueError(f"{where} must be a number, got {value!r}") from None
    return value


def config_from_dict(cls: type[T], data: dict[str, Any], where: str = "config") -> T:
    """Build dataclass ``cls`` from ``data``; missing keys keep their defaults.

    Raises:
        ValueError: a key that is not a field of ``cls`` (the message lists the valid ones).
    """
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} in {where}; "
            f"valid keys: {', '.join(sorted(fields))}"
        )
    kwargs = {k: _convert(v, hints[k], f"{where}.{k}") for k, v in data.items()}
    return cls(**kwargs)


def merge_config_dicts(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated with ``changes``, recursing into sections present in both; a copy."""
    merged = json.loads(json.dumps(base))
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_config_dicts(merged[key], value)
        else:
            merged[key] = value
    return merged


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.sub=value`` strings to a nested dict (values read by
    :func:`ebmtrack.values.parse_value`, as ``--option`` values); returns a copy."""
    data = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"override must look like key.sub=value, got {item!r}")
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            if not isinstance(node.get(part), dict):
                raise ValueError(f"override {item!r}: {part!r} is not a section of the config")
            node = node[part]
        node[leaf] = parse_value(raw)
    return data


def save_config(config: Any, path: str | Path) -> Path:
    """Write a dataclass config as YAML (``.yaml``/``.yml``) or JSON (``.json``)."""
    path = Path(path)
    data = config_to_dict(config)
    if path.suffix in (".yaml", ".yml"):
        text = yaml.safe_dump(data, sort_keys=False)
    elif path.suffix == ".json":
        text = json.dumps(data, indent=2) + "\n"
    else:
        raise ValueError(f"config file must end in .yaml, .yml or .json, got {path.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping stored in a YAML or JSON config file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    data = yaml.safe_load(path.read_text())  # YAML is a superset of JSON
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a mapping, got {type(data).__name__}")
    return data
