"""What every data source is: the data fields it reads (its own settings dataclass) and the
collections it makes from them; and the registry of sources by ``data.source``."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["SOURCES", "DataSource", "SourceData", "register_source"]


@dataclass
class SourceData:
    """The sequence collections of a source, as the samplers take them.

    Attributes:
        train: the training collections (each a list of sequences or a sequence collection).
        weights: the relative sampling probability of each of ``train`` (None: the samplers'
            default for the collections).
        val: the validation collections (None: no validation).
    """

    train: list[Any]
    weights: list[float] | None
    val: list[Any] | None


class DataSource(ABC):
    """One place training sequences come from, named by ``data.source``.

    A subclass declares ``name`` and ``Settings``, the dataclass of the ``data`` fields it reads
    besides ``source`` and ``max_gap`` (``settings``, their names, follows), and is registered
    with :func:`register_source`, beside its definition: a new source is one module. It reads its
    settings as attributes of ``data`` (:class:`~ebmtrack.training.sources.config.DataConfig`).
    """

    name: ClassVar[str]
    """The value of ``data.source`` that chooses this class."""
    Settings: ClassVar[type]
    """The dataclass of the fields of ``data`` this source reads, with their defaults."""
    settings: ClassVar[tuple[str, ...]] = ()
    """The names of ``Settings``' fields (set from it)."""
    folder_setting: ClassVar[str | None] = None
    """The field naming the folder the source reads (checked before a run starts), if any."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "Settings" in cls.__dict__:
            cls.settings = tuple(f.name for f in dataclasses.fields(cls.Settings))

    def __init__(self, data) -> None:
        self.data = data

    def check(self) -> None:
        """Raise ValueError (one line naming the field) for settings this source cannot use;
        none by default."""
        return

    @abstractmethod
    def collections(self, seed: int) -> SourceData:
        """The training and validation collections; generated ones are seeded by ``seed``."""

    def weights_of(self, names) -> list[float]:
        """``data.weights`` of each of ``names`` (default 1)."""
        return [float(self.data.weights.get(name, 1.0)) for name in names]


SOURCES: dict[str, type[DataSource]] = {}
"""The source class of each value of ``data.source``."""


def register_source(cls: type[DataSource]) -> type[DataSource]:
    """Make ``cls`` the source of ``data.source: <cls.name>`` (a class decorator); ValueError
    for a name taken by another class. A field it shares with other sources must have their
    default (the config of one source leaves the others' fields out)."""
    if SOURCES.get(cls.name, cls) is not cls:
        raise ValueError(f"data source {cls.name!r} is already registered")
    defaults = _field_defaults(cls.Settings)
    for other in SOURCES.values():
        for name, default in _field_defaults(other.Settings).items():
            if name in defaults and defaults[name] != default:
                raise ValueError(
                    f"data.{name} of source {cls.name!r} must default to {default!r}, as for "
                    f"source {other.name!r}"
                )
    SOURCES[cls.name] = cls
    return cls


def _field_defaults(settings: type) -> dict[str, Any]:
    defaults = {}
    for f in dataclasses.fields(settings):
        has_factory = f.default_factory is not dataclasses.MISSING
        defaults[f.name] = f.default_factory() if has_factory else f.default
    return defaults
