"""Training one model of the 1-D study (appendix B: 75 epochs, batch 32, Adam)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ebmtrack.ebm import get_loss
from ebmtrack.files import write_atomic
from ebmtrack.process import torch_threads

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


def _load_state(path: Path, config: TrainConfig) -> dict | None:
    """The saved state of this exact run, or None (no file, or one of another run)."""
    if not path.exists():
        return None
    state = torch.load(path, weights_only=True)
    return state if state.get("config") == asdict(config) else None


def train_model(
    config: TrainConfig,
    on_epoch: Callable[[int], None] | None = None,
    checkpoint: str | Path | None = None,
    threads: int = 1,
) -> tuple[Regression1dEnergy, float]:
    """Train one model; returns it (in eval mode) and the mean wall-clock seconds per epoch.

    With ``checkpoint``, the model, optimizer and random-generator states are saved there after
    every epoch and training resumes from it, bit-exactly, if it holds this same run (the costly
    ML-MCMC-256 runs take hours here). The caller removes the file once the run is recorded.
    ``threads``: the model's ``threads`` (torch runs one intra-op thread meanwhile).
    """
    if config.method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {config.method!r}")
    data_seed = config.dataset if config.data_seed is None else config.data_seed
    x_np, y_np = sample_dataset(config.dataset, seed=data_seed)
    x = torch.from_numpy(x_np)
    y = torch.from_numpy(y_np)[:, None]
    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)  # parameter initialization
    model = Regression1dEnergy(threads=threads)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, fused=True)
    loss_fn = get_loss(config.spec.loss)
    kwargs = config.spec.loss_kwargs(config.num_samples)
    if config.spec.sample_based:  # every sample-based loss draws from our generator
        kwargs["generator"] = generator

    first_epoch, past_seconds = 0, 0.0
    checkpoint = Path(checkpoint) if checkpoint is not None else None
    state = _load_state(checkpoint, config) if checkpoint is not None else None
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        first_epoch, past_seconds = int(state["epoch"]), float(state["seconds"])
        if on_epoch is not None:
            for epoch in range(first_epoch):
                on_epoch(epoch + 1)

    start = time.perf_counter()
    with torch_threads(1):
        for epoch in range(first_epoch, config.epochs):
            order = torch.randperm(len(x), generator=generator)
            for batch in order.split(config.batch_size):
                loss = loss_fn(model, x[batch], y[batch], **kwargs)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            if checkpoint is not None and epoch + 1 < config.epochs:
                seconds = past_seconds + time.perf_counter() - start
                state = {
                    "config": asdict(config),
                    "epoch": epoch + 1,
                    "seconds": seconds,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "generator": generator.get_state(),
                }
                write_atomic(checkpoint, lambda tmp, state=state: torch.save(state, tmp))
            if on_epoch is not None:
                on_epoch(epoch + 1)
    seconds = past_seconds + time.perf_counter() - start
    seconds_per_epoch = seconds / max(config.epochs, 1)
    return model.eval(), seconds_per_epoch
