"""Training one model of the 1-D study (appendix B: 75 epochs, batch 32, Adam)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ebmtrack.ebm import get_loss

from .data import sample_dataset
from .methods import METHODS, MethodSpec
from .model import Regression1dEnergy


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults are the paper's (B.2-B.4) and the reference code's lr."""

    method: str = "nce+"
    dataset: int = 1
    seed: int = 0
    num_samples: int = 1024
    epochs: int = 75
    batch_size: int = 32
    lr: float = 1e-3
    data_seed: int | None = None  # None: the study's fixed training set of this data set

    @property
    def spec(self) -> MethodSpec:
        return METHODS[self.method]


def train_model(
    config: TrainConfig, on_epoch: Callable[[int], None] | None = None
) -> tuple[Regression1dEnergy, float]:
    """Train one model; returns it (in eval mode) and the mean wall-clock seconds per epoch."""
    if config.method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {config.method!r}")
    data_seed = config.dataset if config.data_seed is None else config.data_seed
    x_np, y_np = sample_dataset(config.dataset, seed=data_seed)
    x = torch.from_numpy(x_np)
    y = torch.from_numpy(y_np)[:, None]
    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)  # parameter initialization
    model = Regression1dEnergy()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, foreach=True)
    loss_fn = get_loss(config.spec.loss)
    kwargs = config.spec.loss_kwargs(config.num_samples)
    if config.spec.sample_based:  # every sample-based loss draws from our generator
        kwargs["generator"] = generator

    start = time.perf_counter()
    for epoch in range(config.epochs):
        order = torch.randperm(len(x), generator=generator)
        for batch in order.split(config.batch_size):
            loss = loss_fn(model, x[batch], y[batch], **kwargs)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if on_epoch is not None:
            on_epoch(epoch + 1)
    seconds_per_epoch = (time.perf_counter() - start) / max(config.epochs, 1)
    return model.eval(), seconds_per_epoch
