"""``data.source: synthetic``: generated sequences only (:mod:`ebmtrack.data.synthetic`)."""

from __future__ import annotations

from ebmtrack.data.synthetic import SyntheticSequences

from .base import DataSource, SourceData


class SyntheticSource(DataSource):
    """``data.synthetic_sequences`` generated sequences that look as ``data.synthetic`` says;
    validation on a quarter as many (at least one) generated with the next seed, so its targets
    and textures are never seen in training."""

    name = "synthetic"
    settings = ("synthetic_sequences", "synthetic")

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
