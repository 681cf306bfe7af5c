"""Per-epoch metrics: a CSV file next to the run, plus TensorBoard when it is installed."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

FIXED_COLUMNS = ("epoch", "split", "loss", "lr", "samples_per_s", "time_s")


class MetricsLog:
    """Appends one row per (epoch, split) to ``<run>/metrics.csv``.

    Columns are :data:`FIXED_COLUMNS` followed by the training module's extra statistics; a row
    with a statistic not seen before (e.g. one only validation computes) adds a column.
    Reopening a run with ``resume_epoch`` drops rows of epochs after it, which a killed run may
    have logged before its checkpoint was complete.
    """

    def __init__(self, run_dir: str | Path, resume_epoch: int = 0, tensorboard: bool = True):
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(run_dir) / "metrics.csv"
        self.columns: list[str] | None = None
        if self.path.is_file():
            with open(self.path, newline="") as handle:
                rows = list(csv.DictReader(handle))
            kept = [row for row in rows if int(row["epoch"]) <= resume_epoch]
            if rows:
                self.columns = list(rows[0])
                self._rewrite(kept)
        self.writer = None
        if tensorboard and importlib.util.find_spec("tensorboard") is not None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(Path(run_dir) / "tensorboard"))

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        with open(self.path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(rows)

    def log(self, epoch: int, split: str, values: dict[str, float]) -> None:
        """Append the row of ``split`` ("train" or "val") for ``epoch``."""
        row = {"epoch": epoch, "split": split, **values}
        if self.columns is None:
            self.columns = list(FIXED_COLUMNS)
            self._rewrite([])
        new = sorted(k for k in row if k not in self.columns)
        if new:
            with open(self.path, newline="") as handle:
                rows = list(csv.DictReader(handle))
            self.columns += new
            self._rewrite(rows)
        with open(self.path, "a", newline="") as handle:
            csv.DictWriter(handle, fieldnames=self.columns).writerow(row)
        if self.writer is not None:
            for key, value in values.items():
                self.writer.add_scalar(f"{split}/{key}", value, epoch)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
