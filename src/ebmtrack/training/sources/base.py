"""What every data source is: the data fields it reads and the collections it makes from them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from . import DataConfig


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

    A subclass reads the :class:`~ebmtrack.training.sources.DataConfig` fields of
    :attr:`settings` (and ``max_gap``, which every source has); the fields of other sources must
    keep their defaults (:meth:`DataConfig.__post_init__` refuses them).
    """

    name: ClassVar[str]
    """The value of ``data.source`` that chooses this class."""
    settings: ClassVar[tuple[str, ...]]
    """The fields of ``data`` this source reads, besides ``source`` and ``max_gap``."""
    folder_setting: ClassVar[str | None] = None
    """The field naming the folder the source reads (checked before a run starts), if any."""

    def __init__(self, data: DataConfig) -> None:
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
