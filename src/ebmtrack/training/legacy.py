"""Configs saved in earlier formats, upgraded on load to the present one.

Three earlier formats of a run's ``config.yaml`` (and of the config inside its checkpoints) still
load, through :func:`upgrade_config_dict`:

- no ``model`` key: a box-head run (:data:`LEGACY_MODEL`), from before DiMP experiments;
- every key of both kinds (:data:`LEGACY_KEYS`): one class held the settings of both kinds (those
  of the other kind did nothing); they are left out;
- a ``data`` section without ``source``: the source was the one whose fields were set
  (:func:`inferred_source`); the fields that source did not read are left out (they did nothing).

:func:`ebmtrack.training.experiment.load_experiment` and ``ebmtrack train --resume`` upgrade every
file they read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .experiment import experiment_type, setting_names
from .sources import COMMON_SETTINGS, SOURCES, field_defaults

LEGACY_MODEL = "iou-net"
"""The kind of a saved config without ``model``."""
LEGACY_KEYS = frozenset(
    {"preset", "model", "backbone", "pretrained", "backbone_weights", "head_width", "head_dims"}
    | {"processing", "data", "loss", "dimp", "trainer", "feature_cache"}
)
"""The keys of every config of the format with one class for both kinds."""


def inferred_source(data: Mapping[str, Any]) -> str:
    """The source of a ``data`` section without ``source``: ``pack`` or ``folder`` where
    ``pack`` or ``sequence_folder`` names a folder, else ``synthetic`` where
    ``synthetic_sequences`` > 0, else ``datasets``. ValueError where both folders are named."""
    folder, pack = data.get("sequence_folder"), data.get("pack")
    if folder is not None and pack is not None:
        raise ValueError("give data.sequence_folder or data.pack, not both")
    if pack is not None:
        return "pack"
    if folder is not None:
        return "folder"
    return "synthetic" if (data.get("synthetic_sequences") or 0) > 0 else "datasets"


def upgrade_data_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ``data`` section without ``source`` with the source it had (:func:`inferred_source`) and
    without the fields of other sources; a section with ``source`` unchanged (a copy). Keys that
    are no field at all are kept (and refused when the config is built)."""
    if "source" in data:
        return dict(data)
    source = inferred_source(data)
    own = set(SOURCES[source].settings) | set(COMMON_SETTINGS)
    fields = set(field_defaults())
    kept = {key: value for key, value in data.items() if key in own or key not in fields}
    return {"source": source, **kept}


def upgrade_config_dict(data: Mapping[str, Any], whole: bool = True) -> dict[str, Any]:
    """``data`` in the present format (a copy): see the module docstring.

    ``whole``: ``data`` describes a whole run (a run's ``config.yaml``): a missing ``model`` is
    :data:`LEGACY_MODEL` and a ``data`` section without ``source`` (or none) is upgraded. Otherwise
    (``--config FILE``, any subset of the keys) only a complete ``data`` section, with every
    field, is, and ``model`` is left as it is.
    """
    data = dict(data)
    if whole and "model" not in data:
        data["model"] = LEGACY_MODEL
    if LEGACY_KEYS <= set(data):
        own = setting_names(experiment_type(data))
        data = {key: value for key, value in data.items() if key in own or key == "model"}
    section = data.get("data", {} if whole else None)  # a whole run's defaults: datasets
    if isinstance(section, Mapping) and (whole or set(field_defaults()) <= set(section)):
        data["data"] = upgrade_data_dict(section)
    return data
