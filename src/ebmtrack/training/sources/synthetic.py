"""``data.source: synthetic``: generated sequences only (:mod:`ebmtrack.data.synthetic`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences

from .base import DataSource, SourceData, register_source


@dataclass
class SyntheticSettings:
    """The ``data`` fields of ``source: synthetic``: how many generated sequences, and how they
    look."""

    synthetic_sequences: int = 0
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)


@register_source
class SyntheticSource(DataSource):
    """``data.synthetic_sequences`` generated sequences that look as ``data.synthetic`` says;
    validation on a quarter as many (at least one) generated with the next seed, so its targets
    and textures are never seen in training."""

    name = "synthetic"
    Settings = SyntheticSettings

    def check(self) -> None:
        if self.data.synthetic_sequences <= 0:
            raise ValueError(
                "data.source synthetic needs data.synthetic_sequences > 0, got "
                f"{self.data.synthetic_sequences}"
            )

    def collections(self, seed: int) -> SourceData:
        data = self.data
        train = SyntheticSequences(data.synthetic_sequences, data.synthetic, seed=seed)
        val = SyntheticSequences(max(1, data.synthetic_sequences // 4), data.synthetic, seed + 1)
        return SourceData([train], None, [val])
