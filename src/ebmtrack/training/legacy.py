"""Configs saved in earlier formats, upgraded on load to the present one.

Three earlier formats of a run's ``config.yaml`` (and of the config inside its checkpoints) still
load, through :func:`upgrade_config_dict`:

- no ``model`` key: a box-head run (:data:`LEGACY_MODEL`), from before DiMP experiments;
- every key of both kinds (:data:`LEGACY_KEYS`): one class held the settings of both kinds (those
  of the other kind did nothing); they are left out;
- a ``data`` section without ``source``: the source was the one whose fields were set
  (:func:`inferred_source`); the fields that source did not read are left out (they did nothing).

:func:`ebmtrack.training.runs.load_experiment` and :func:`ebmtrack.training.runs.build_experiment`
(``ebmtrack train``, ``--resume`` too) upgrade every file they read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import config_to_dict
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
    """A ``data`` section in the present form: one without ``source`` gets the source it had
    (:func:`inferred_source`) and loses the fields of other sources; one with ``source`` and
    every field (the flat form saved before each source had its own settings) loses the fields
    of other sources that keep their defaults (others are refused when the config is built).
    Keys that are no field at all are kept (and refused when the config is built). A copy."""
    defaults = field_defaults()
    source = data.get("source")
    if source is None:
        source = inferred_source(data)
        own = set(SOURCES[source].settings) | set(COMMON_SETTINGS)
        kept = {key: value for key, value in data.items() if key in own or key not in defaults}
        return {"source": source, **kept}
    if source not in SOURCES:
        return dict(data)
    own = set(SOURCES[source].settings) | set(COMMON_SETTINGS)
    return {
        key: value
        for key, value in data.items()
        if key in own or key not in defaults or not _is_default(value, defaults[key])
    }


def _is_default(value: Any, default: Any) -> bool:
    return value == config_to_dict({"v": default})["v"] if default is not None else value is None


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
