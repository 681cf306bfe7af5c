"""``data``: the source of an experiment's samples and the settings of that source alone.

:class:`DataConfig` holds ``source`` (a key of :data:`~ebmtrack.training.sources.base.SOURCES`),
``max_gap`` (every source has it) and an instance of the chosen source's own ``Settings``
dataclass; its fields read and write as attributes of the config (``data.pack``). Saved as one
flat ``data`` section of ``config.yaml`` (``source``, ``max_gap`` and the source's fields).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import config_from_dict, config_to_dict
from .base import SOURCES, DataSource, _field_defaults

__all__ = ["COMMON_SETTINGS", "KEY_FIELDS", "DataConfig", "data_source", "field_defaults"]

COMMON_SETTINGS = ("source", "max_gap")
"""The fields of :class:`DataConfig` that every source has."""
DEFAULT_MAX_GAP = 50

KEY_FIELDS = (
    "roots",
    "splits",
    "weights",
    "val_splits",
    "synthetic_sequences",
    "synthetic",
    "sequence_folder",
    "holdout",
    "pack",
    "pack_parts",
    "pack_tracks",
)
"""The fields every feature-cache key has held since the data section was one flat class (at
their defaults where another source's): existing caches are found by their key, so these stay
in it whatever the source (:meth:`DataConfig.key_dict`)."""


def field_defaults() -> dict[str, Any]:
    """The default of every field of every registered source, and of ``max_gap``."""
    defaults: dict[str, Any] = {"max_gap": DEFAULT_MAX_GAP}
    for cls in SOURCES.values():
        defaults.update(_field_defaults(cls.Settings))
    return defaults


class DataConfig:
    """Where training and validation samples come from: the source and its own settings.

    ``DataConfig(source="pack", pack="...", holdout=[...])``: ``source`` chooses the class
    (:data:`~ebmtrack.training.sources.base.SOURCES`); the other keywords are fields of its
    ``Settings`` (and ``max_gap``). A field of another source is refused, naming the sources it
    belongs to, unless it keeps its default; the source then checks its settings (e.g. a folder
    is named). Setting an attribute later is checked the same way.
    """

    def __init__(self, source: str = "", max_gap: int = DEFAULT_MAX_GAP, **settings: Any):
        if not source:
            raise ValueError(
                "data.source is missing; name where the training data comes from: "
                f"{', '.join(SOURCES)}"
            )
        if source not in SOURCES:
            raise ValueError(
                f"data.source must be one of {', '.join(SOURCES)}, got {source!r}"
            )
        cls = SOURCES[source]
        own = {name: value for name, value in settings.items() if self._owns(cls, name, value)}
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "max_gap", max_gap)
        object.__setattr__(self, "settings", config_from_dict(cls.Settings, own, "data"))
        self.check()

    @staticmethod
    def _owns(cls: type[DataSource], name: str, value: Any) -> bool:
        """Whether ``name`` is a setting of source ``cls`` (False: another source's, at its
        default); ValueError otherwise."""
        if name in cls.settings:
            return True
        owners = [s for s, other in SOURCES.items() if name in other.settings]
        if not owners:
            valid = sorted({*COMMON_SETTINGS, *cls.settings})
            raise ValueError(f"unknown key(s) {name} in data; valid keys: {', '.join(valid)}")
        if value != field_defaults()[name]:
            raise ValueError(
                f"data.{name} does not apply to data.source {cls.name}; it is a setting of "
                f"data.source {' and '.join(owners)}"
            )
        return False

    def __getattr__(self, name: str) -> Any:
        settings = self.__dict__.get("settings")
        if settings is not None and name in SOURCES[self.source].settings:
            return getattr(settings, name)
        raise AttributeError(f"data.source {self.__dict__.get('source')} has no setting {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "max_gap":
            object.__setattr__(self, name, value)
        elif self._owns(SOURCES[self.source], name, value):
            setattr(self.settings, name, value)

    def check(self) -> None:
        """Raise ValueError (one line) unless the source can use its settings."""
        data_source(self).check()

    def to_dict(self) -> dict[str, Any]:
        """The ``data`` section: ``source``, ``max_gap`` and the source's fields, plain data."""
        return {"source": self.source, "max_gap": self.max_gap, **config_to_dict(self.settings)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "data") -> DataConfig:
        """The config of a ``data`` section (:meth:`to_dict`'s form)."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a mapping, got {type(data).__name__}")
        return cls(**data)

    def replace(self, **changes: Any) -> DataConfig:
        """A copy with ``changes`` (fields of the same source, or another ``source``)."""
        values = self.to_dict()
        if "source" in changes and changes["source"] != self.source:
            values = {"max_gap": self.max_gap}
        return DataConfig(**{**values, **changes})

    def key_dict(self) -> dict[str, Any]:
        """What a feature cache's key holds of ``data``: :data:`KEY_FIELDS` (the defaults of
        the fields of other sources), ``max_gap`` and the source's own fields; no ``source``."""
        defaults = field_defaults()
        key = {name: defaults[name] for name in KEY_FIELDS if name in defaults}
        own = self.to_dict()
        del own["source"]
        return config_to_dict_plain({**key, **own})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"DataConfig({fields})"

    def __deepcopy__(self, memo) -> DataConfig:
        return DataConfig.from_dict(self.to_dict())


def config_to_dict_plain(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with dataclasses as plain data."""
    return {
        k: config_to_dict(v) if dataclasses.is_dataclass(v) else v for k, v in values.items()
    }


def data_source(data: DataConfig) -> DataSource:
    """The source that ``data.source`` names, reading ``data``."""
    return SOURCES[data.source](data)
