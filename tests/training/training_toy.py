"""A tiny regression problem for testing the generic training loop (not a test module)."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

from ebmtrack.training import TrainerConfig


def toy_config(**overrides) -> TrainerConfig:
    """Three short epochs on the CPU: 8 steps of 16 samples each, lr x0.2 after epoch 2."""
    values = dict(
        epochs=3,
        samples_per_epoch=128,
        batch_size=16,
        lr=3e-2,
        lr_step_epochs=2,
        val_every=1,
        val_samples=64,
        num_workers=0,
        device="cpu",
        progress=False,
    )
    values.update(overrides)
    return TrainerConfig(**values)


class ToyRegression(Dataset):
    """``size`` pairs x ~ N(0, I_4), y = x . w + 0.1 noise; ``nan_index`` gets a NaN target."""

    def __init__(self, size: int = 256, seed: int = 0, nan_index: int | None = None):
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(size, 4, generator=generator)
        weights = torch.tensor([1.0, -2.0, 0.5, 3.0])
        self.y = self.x @ weights + 0.1 * torch.randn(size, generator=generator)
        if nan_index is not None:
            self.y[nan_index] = float("nan")

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "y": self.y[index]}


class ToyModule(nn.Module):
    """An MLP trained with MSE; dropout makes the step random (for the resume test)."""

    def __init__(self, dropout: float = 0.0, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 1))

    def forward(self, batch):
        pred = self.net(batch["x"]).squeeze(-1)
        error = pred - batch["y"]
        return error.square().mean(), {"mae": error.abs().mean()}
