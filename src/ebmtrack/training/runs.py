"""A training run's config from its parts, and a saved run read back.

:func:`build_experiment` is what ``ebmtrack train`` runs: a preset (or a saved run's config),
then a config file, then config values (the command's flags), then ``key.sub=value`` overrides,
each refused in one line naming where it came from when it does not fit; so a Python user
reproduces a command's run with the same parts::

    config = build_experiment("pack-cpu", overrides=["trainer.epochs=2"])
    run_experiment(config, "runs/pack-cpu")

:func:`load_experiment` reads a saved config (earlier formats upgraded,
:mod:`ebmtrack.training.legacy`); :func:`export_checkpoint` writes a run's latest model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ebmtrack.values import parse_value

if TYPE_CHECKING:
    import torch

from .checkpoint import (
    checkpoint_at,
    latest_checkpoint,
    load_trainable_state_dict,
    read_checkpoint,
)
from .config import (
    apply_overrides,
    config_to_dict,
    merge_config_dicts,
    read_config_file,
)
from .experiment import (
    CONFIG_FILE,
    Experiment,
    experiment_from_dict,
    experiment_type,
    kinds_with_setting,
    setting_names,
)
from .legacy import upgrade_config_dict
from .presets import PRESETS, preset_config

__all__ = ["Origins", "build_experiment", "export_checkpoint", "load_experiment"]


def load_experiment(path: str | Path) -> Experiment:
    """The experiment saved in a YAML or JSON config file (a run's ``config.yaml``), of the class
    its ``model`` names; files of earlier formats included
    (:func:`ebmtrack.training.legacy.upgrade_config_dict`)."""
    return experiment_from_dict(upgrade_config_dict(read_config_file(path)), str(path))


@dataclass(frozen=True)
class Origins:
    """How :func:`build_experiment`'s errors name where a value came from (``ebmtrack train``
    names its flags: ``--config FILE``, ``--set KEY=VALUE``, ``--epochs``)."""

    base: Callable[[str], str] = lambda preset: f"preset {preset}"
    config_file: Callable[[str], str] = lambda path: f"config file {path}"
    override: Callable[[str], str] = lambda item: f"override {item}"
    change: Callable[[str], str] = lambda key: f"setting {key}"


def _requested_source(changes: Mapping, overrides: Sequence[str]) -> Any:
    """The data source that ``changes`` (a config file's) or an override ``data.source=NAME``
    names (the last one given), or None."""
    section = changes.get("data")
    source = section.get("source") if isinstance(section, Mapping) else None
    for item in overrides:
        key, _, value = item.partition("=")
        if key == "data.source":
            source = parse_value(value)
    return source


def build_experiment(
    preset: str | None = None,
    *,
    run: str | Path | None = None,
    config_file: str | Path | None = None,
    changes: Mapping[str, Any] | None = None,
    overrides: Sequence[str] = (),
    origins: Origins = Origins(),
) -> Experiment:
    """The experiment config of a run, from its parts, in this order: the preset ``preset`` (or
    the config saved in the run folder ``run``), the file ``config_file`` (any subset of a
    config's keys, YAML or JSON), the nested values ``changes`` (``{"trainer": {"epochs": 3}}``),
    then the ``key.sub=value`` items of ``overrides``.

    The preset (or the run) fixes the kind of experiment; a setting of another kind, from any of
    the later parts, is refused with one line naming it (``origins`` says how a part is named).
    Another data source (a file's ``data.source`` or an override's) starts the ``data`` section
    from that source's defaults, as another ``loss.name`` in ``changes`` starts from that loss's
    recipe.

    Raises:
        ValueError: a value that does not fit, naming where it came from; FileNotFoundError:
            no saved config in ``run``, or no ``config_file``.
    """
    changes = dict(changes or {})
    if run is not None:
        saved = Path(run) / CONFIG_FILE
        data = upgrade_config_dict(read_config_file(saved))
        base, where = f"the run in {run}", str(saved)
    else:
        preset = preset or "atom-r18"
        data = config_to_dict(preset_config(preset))
        base, where = origins.base(preset), "config"
    cls = experiment_type(data, where)
    kind = cls.model

    def refuse_other_kinds(key: str, value, origin: str) -> None:
        if key == "model" and value != kind:
            presets = [name for name, make in PRESETS.items() if make().model == value]
            choice = f"; for {value}, start from one of its presets: {', '.join(presets)}"
            raise ValueError(
                f"{origin}: the kind of experiment is fixed by {base} ({kind})"
                + (choice if presets else "")
            )
        kinds = kinds_with_setting(key)
        if key != "model" and key not in setting_names(cls) and kinds:
            raise ValueError(
                f"{origin}: {key} does not apply to {kind} experiments ({base}); it is a "
                f"setting of {' and '.join(kinds)} experiments"
            )

    from_file: dict = {}
    if config_file is not None:
        from_file = upgrade_config_dict(read_config_file(config_file), whole=False)
        for key in sorted(from_file, key=lambda key: key != "model"):  # the kind first
            refuse_other_kinds(key, from_file[key], origins.config_file(str(config_file)))
    source = _requested_source(from_file, overrides)
    if source is not None and source != data["data"].get("source"):
        data["data"] = {"source": source}  # another data source: start from its defaults
    data = merge_config_dicts(data, from_file)
    for key, value in changes.items():
        refuse_other_kinds(key, value, origins.change(key))
    for item in overrides:
        key, _, value = item.partition("=")
        refuse_other_kinds(key.split(".")[0], value.strip(), origins.override(item))
    loss = changes.get("loss", {}).get("name") if isinstance(changes.get("loss"), dict) else None
    if loss and loss != data.get("loss", {}).get("name"):
        data["loss"] = {"name": loss, "params": {}}  # another loss: start from its recipe
    data = apply_overrides(merge_config_dicts(data, changes), list(overrides))
    return experiment_from_dict(data)


def export_checkpoint(
    run_dir: str | Path,
    path: str | Path,
    epoch: int | None = None,
    dtype: torch.dtype | None = None,
) -> int:
    """Write the model of the run's latest checkpoint (or of the one after ``epoch`` epochs) to
    ``path`` (the file the run writes at its end, e.g. ``iou_net.safetensors``), so that a long
    run's head can be used before it ends; ``dtype``: of its floating-point tensors in the file
    (:func:`~ebmtrack.models.serialization.save_model`).

    Returns the checkpoint's epoch. Raises ValueError where ``run_dir`` holds no such checkpoint.
    """
    from ebmtrack.models.serialization import save_model

    run_dir = Path(run_dir)
    folder = run_dir / "checkpoints"
    if epoch is None:
        checkpoint = latest_checkpoint(folder)
        if checkpoint is None:
            raise ValueError(f"{run_dir} holds no checkpoint yet (none of its epochs has finished)")
    else:
        checkpoint = checkpoint_at(folder, epoch)
        if checkpoint is None:
            kept = sorted(p.name for p in folder.glob("epoch-*")) or ["none"]
            raise ValueError(f"{run_dir} keeps no checkpoint of epoch {epoch} ({', '.join(kept)})")
    config = load_experiment(run_dir / CONFIG_FILE)
    module = config.build_module()
    model_state, _, _ = read_checkpoint(checkpoint)
    load_trainable_state_dict(module, model_state)
    save_model(config.trained_model(module).cpu(), path, config.provenance(module), dtype)
    return checkpoint.epoch
