"""The generic training loop: Adam + step schedule, DDP, mixed precision, checkpoints, resume.

The loop knows nothing about tracking. It trains a *training module*: an ``nn.Module`` whose
``forward(batch)`` returns ``(loss, stats)``, a scalar tensor to minimize and a dict of scalar
tensors to log (e.g. the loss of each part). Everything the step needs (frozen feature extractor,
loss function, sampling) lives inside that module, so DistributedDataParallel wraps one forward
per step. The module may also define:

- ``frozen_submodules``: names of sub-modules left out of checkpoints (e.g. ``("backbone",)``);
- ``needs_input_grad``: True if its loss differentiates with respect to its inputs (score
  matching), so that validation runs with autograd on. Such a loss may leave parameters without
  gradient (e.g. a final bias, which does not change ``d f / d y``), so DDP then also looks for
  unused parameters.

Reproducibility: the data order of an epoch is a function of ``(seed, epoch)`` (see
:func:`~ebmtrack.training.batch_sampler.epoch_order`), and before every
step the global torch generator is seeded from ``(seed, step, rank)``, so every random draw
inside the step is fixed too. A run resumed from the checkpoint of epoch ``k`` therefore repeats
exactly what the uninterrupted run did after epoch ``k``.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from .batch_sampler import RankBatchSampler
from .checkpoint import (
    Checkpoint,
    capture_rng_state,
    latest_checkpoint,
    load_trainable_state_dict,
    read_checkpoint,
    restore_rng_state,
    save_checkpoint,
    trainable_state_dict,
)
from .config import TrainerConfig
from .distributed import DistributedContext, all_reduce_mean, barrier, init_distributed
from .running_metrics import MetricsLog


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; training stopped before the bad update."""


@dataclass(frozen=True)
class EpochResult:
    """Averages over one epoch: training statistics, and validation ones when it was run."""

    epoch: int
    train: dict[str, float]
    val: dict[str, float] | None = None


def step_seed(seed: int, step: int, rank: int) -> int:
    """The seed of the global torch generator for optimizer step ``step`` on process ``rank``."""
    return (seed * 0x9E3779B1 + step * 0x85EBCA77 + rank * 0xC2B2AE3D + 1) % (2**63 - 1)


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor in a (nested) dict / list / tuple batch to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, list | tuple):
        return type(batch)(to_device(value, device) for value in batch)
    return batch


def _init_worker(worker_id: int) -> None:
    # DataLoader seeds torch and random in each worker; NumPy must follow for datasets using it.
    np.random.seed(torch.initial_seed() % 2**32)  # noqa: NPY002
    # Ctrl-C and a SIGTERM sent to the whole process group are the training process's to
    # handle: it stops at its checkpoint and shuts its workers down. A worker killed by the
    # signal first would make that shutdown raise (a traceback after the one-line message).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class Trainer:
    """Trains a training module (see the module docstring) on a map-style data set.

    Args:
        module: the training module; its parameters with ``requires_grad`` are optimized.
        train_data: map-style data set of training samples.
        config: the loop's settings.
        run_dir: folder for checkpoints and ``metrics.csv``.
        val_data: optional validation data set.
        collate_fn: DataLoader collate function (default: PyTorch's).
        experiment_config: plain-data description of the whole experiment, stored in checkpoints.
        context: the process's place in a distributed run; default :func:`init_distributed`.
    """

    def __init__(
        self,
        module: nn.Module,
        train_data: Dataset,
        config: TrainerConfig,
        run_dir: str | Path,
        val_data: Dataset | None = None,
        collate_fn: Callable | None = None,
        experiment_config: dict[str, Any] | None = None,
        context: DistributedContext | None = None,
    ) -> None:
        self.config = config
        self.context = context or init_distributed(config.device)
        self.device = self.context.device
        if self.context.is_distributed and config.sync_batchnorm and self.device.type == "cuda":
            module = nn.SyncBatchNorm.convert_sync_batchnorm(module)
        self.module = module.to(self.device)
        params = [p for p in self.module.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the training module has no parameter with requires_grad=True")
        self.optimizer = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.StepLR(
            self.optimizer, step_size=config.lr_step_epochs, gamma=config.lr_gamma
        )
        self.use_amp = config.amp and self.device.type == "cuda"
        if config.cpu_bf16 and self.device.type != "cpu":
            raise ValueError(f"trainer.cpu_bf16 applies to CPU runs only, not to {self.device}")
        self.autocast_dtype = torch.bfloat16 if config.cpu_bf16 else torch.float16
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.use_amp)
        self.model: nn.Module = self.module
        if self.context.is_distributed:
            device_ids = [self.device] if self.device.type == "cuda" else None
            self.model = DistributedDataParallel(
                self.module,
                device_ids=device_ids,
                find_unused_parameters=bool(getattr(self.module, "needs_input_grad", False)),
            )
        self.train_data = train_data
        self.val_data = val_data
        self.collate_fn = collate_fn
        self.experiment_config = experiment_config or {}
        self.run_dir = Path(run_dir)
        self.checkpoint_dir = self.run_dir / "checkpoints"
        self.epoch = 0
        self.global_step = 0
        self.last_checkpoint: Checkpoint | None = None

    # -- checkpoints -------------------------------------------------------------------------

    def resume(self) -> Checkpoint | None:
        """Load the run's latest checkpoint, if it has one; returns it (None: fresh start)."""
        checkpoint = latest_checkpoint(self.checkpoint_dir)
        if checkpoint is None:
            return None
        model_state, training_state, rng_states = read_checkpoint(checkpoint, self.device)
        load_trainable_state_dict(self.module, model_state)
        self.optimizer.load_state_dict(training_state["optimizer"])
        self.scheduler.load_state_dict(training_state["scheduler"])
        self.scaler.load_state_dict(training_state["scaler"])
        if len(rng_states) == self.context.world_size:
            restore_rng_state(rng_states[self.context.rank])
        self.epoch, self.global_step = checkpoint.epoch, checkpoint.global_step
        self.last_checkpoint = checkpoint
        return checkpoint

    def _save(self) -> None:
        rng = capture_rng_state()
        if self.context.is_distributed:
            rng_states: list[Any] = [None] * self.context.world_size
            torch.distributed.all_gather_object(rng_states, rng)
        else:
            rng_states = [rng]
        if self.context.is_main:
            training_state = {
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict(),
            }
            self.last_checkpoint = save_checkpoint(
                self.checkpoint_dir,
                self.epoch,
                self.global_step,
                trainable_state_dict(self.module),
                training_state,
                rng_states,
                self.experiment_config,
                keep=self.config.keep_checkpoints,
            )
        barrier(self.context)

    # -- loops -------------------------------------------------------------------------------

    def _loader(self, data: Dataset, num_samples: int | None, epoch: int, shuffle: bool):
        sampler = RankBatchSampler(
            len(data),
            num_samples,
            self.config.batch_size,
            self.context.rank,
            self.context.world_size,
            seed=self.config.seed,
            epoch=epoch,
            shuffle=shuffle,
        )
        return DataLoader(
            data,
            batch_sampler=sampler,
            num_workers=self.config.num_workers,
            collate_fn=self.collate_fn,
            pin_memory=self.device.type == "cuda",
            worker_init_fn=_init_worker,
        )

    def _reduced_stats(self, loss: torch.Tensor, stats: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[loss, *stats sorted by name]`` averaged over processes, float64 on the CPU."""
        values = [loss.detach().float()] + [stats[k].detach().float() for k in sorted(stats)]
        return all_reduce_mean(torch.stack(values), self.context).double().cpu()

    def _stop_on_non_finite(self, loss_value: float, epoch: int) -> None:
        where = self.last_checkpoint.path if self.last_checkpoint else None
        kept = f"the last good checkpoint is {where}" if where else "no epoch had finished yet"
        raise NonFiniteLossError(
            f"the loss became {loss_value} at epoch {epoch} (step {self.global_step + 1}); "
            f"training stopped before that update and {kept}. Lower the learning rate or check "
            f"the data, then resume."
        )

    def _train_epoch(self, epoch: int) -> dict[str, float]:
        self.model.train()
        loader = self._loader(
            self.train_data, self.config.samples_per_epoch, epoch, self.config.shuffle
        )
        samples_per_step = self.config.batch_size
        progress = tqdm(
            loader,
            desc=f"epoch {epoch}/{self.config.epochs}",
            disable=not (self.config.progress and self.context.is_main),
            dynamic_ncols=True,
        )
        totals: torch.Tensor | None = None
        names: list[str] = []
        start = time.perf_counter()
        for steps_done, batch in enumerate(progress, start=1):
            batch = to_device(batch, self.device)
            torch.manual_seed(step_seed(self.config.seed, self.global_step, self.context.rank))
            with torch.autocast(
                self.device.type,
                dtype=self.autocast_dtype,
                enabled=self.use_amp or self.config.cpu_bf16,
            ):
                loss, stats = self.model(batch)
            reduced = self._reduced_stats(loss, stats)
            if not math.isfinite(reduced[0].item()):
                self._stop_on_non_finite(reduced[0].item(), epoch)
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.global_step += 1
            totals = reduced if totals is None else totals + reduced
            names = ["loss", *sorted(stats)]
            rate = steps_done * samples_per_step / (time.perf_counter() - start)
            progress.set_postfix(
                loss=f"{totals[0].item() / steps_done:.4f}",
                pairs_s=f"{rate:.1f}",
                seen=self.global_step * samples_per_step,
            )
        elapsed = time.perf_counter() - start
        steps = len(loader)
        result = {name: (totals[i] / steps).item() for i, name in enumerate(names)}
        result.update(
            lr=self.optimizer.param_groups[0]["lr"],
            samples_per_s=steps * samples_per_step / elapsed,
            time_s=elapsed,
            # Training samples drawn since the run started (over all processes). Distinct
            # samples where the data set is at least this long and walked in order.
            pairs_seen=self.global_step * samples_per_step,
        )
        return result

    def validate(self) -> dict[str, float]:
        """Average loss and statistics over ``val_samples`` validation samples (fixed order)."""
        if self.val_data is None:
            raise ValueError("validate() needs val_data")
        self.module.eval()
        loader = self._loader(self.val_data, self.config.val_samples, epoch=1, shuffle=False)
        grad = bool(getattr(self.module, "needs_input_grad", False))
        totals: torch.Tensor | None = None
        names: list[str] = []
        start = time.perf_counter()
        for step, batch in enumerate(loader):
            batch = to_device(batch, self.device)
            torch.manual_seed(step_seed(self.config.seed + 1, step, self.context.rank))
            with (
                torch.set_grad_enabled(grad),
                torch.autocast(self.device.type, dtype=torch.float16, enabled=self.use_amp),
            ):
                loss, stats = self.module(batch)  # unwrapped: no DDP gradient bookkeeping
            reduced = self._reduced_stats(loss, stats)
            totals = reduced if totals is None else totals + reduced
            names = ["loss", *sorted(stats)]
        elapsed = time.perf_counter() - start
        result = {name: (totals[i] / len(loader)).item() for i, name in enumerate(names)}
        result.update(samples_per_s=len(loader) * self.config.batch_size / elapsed, time_s=elapsed)
        return result

    def fit(self, stop_after_epoch: int | None = None) -> list[EpochResult]:
        """Train from ``self.epoch + 1`` to ``config.epochs`` (or ``stop_after_epoch``).

        After every epoch: validation when due, the learning-rate step, a CSV row per split and
        an atomic checkpoint. Raises :class:`NonFiniteLossError` (after which the run can be
        resumed from the last good checkpoint).
        """
        log = MetricsLog(self.run_dir, self.epoch) if self.context.is_main else None
        last = self.config.epochs if stop_after_epoch is None else stop_after_epoch
        results = []
        try:
            for epoch in range(self.epoch + 1, min(last, self.config.epochs) + 1):
                train = self._train_epoch(epoch)
                every = self.config.val_every
                due = every > 0 and (epoch % every == 0 or epoch == self.config.epochs)
                val = self.validate() if self.val_data is not None and due else None
                self.scheduler.step()
                self.epoch = epoch
                if log is not None:
                    log.log(epoch, "train", train)
                    if val is not None:
                        log.log(epoch, "val", val)
                if val is not None and self.config.progress and self.context.is_main:
                    shown = ", ".join(f"{k} {v:.4g}" for k, v in sorted(val.items()))
                    tqdm.write(f"epoch {epoch} val: {shown}")
                self._save()
                results.append(EpochResult(epoch, train, val))
        finally:
            if log is not None:
                log.close()
        return results
