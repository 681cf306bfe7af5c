"""Which data-set indices each process trains on, in each epoch.

A run of ``W`` processes with global batch ``B`` sees exactly the batches a single process with
batch ``B`` sees: global batch ``s`` of an epoch is the slice ``[s*B, (s+1)*B)`` of the epoch's
index order, and process ``r`` takes the ``r``-th of its ``W`` equal parts. With gradients averaged
across processes, the update equals the single-process one (up to floating-point summation order).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


def epoch_order(
    dataset_size: int, num_samples: int, seed: int, epoch: int, shuffle: bool = True
) -> torch.Tensor:
    """The ``num_samples`` data-set indices of one epoch, shape ``(num_samples,)``, int64.

    With ``shuffle`` the indices are consecutive random permutations of ``range(dataset_size)``
    drawn from a generator seeded by ``(seed, epoch)`` (so every epoch has its own order and a
    resumed run reproduces it). Without, epoch ``e`` (1-based) takes the next ``num_samples``
    indices, ``(e - 1) * num_samples, ...`` modulo ``dataset_size``: for data sets whose every
    index is already a random draw (:class:`ebmtrack.data.sampler.TrackingPairs`), so that no
    sample repeats while the data set is long enough.
    """
    if dataset_size < 1:
        raise ValueError(f"the data set is empty (dataset_size={dataset_size})")
    if epoch < 1:
        raise ValueError(f"epoch must be >= 1 (1-based), got {epoch}")
    if not shuffle:
        return (torch.arange(num_samples) + (epoch - 1) * num_samples) % dataset_size
    repeats = -(-num_samples // dataset_size)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perms = [torch.randperm(dataset_size, generator=generator) for _ in range(repeats)]
    return torch.cat(perms)[:num_samples]


class RankBatchSampler(Sampler[list[int]]):
    """Yields this process's share of each global batch of one epoch (the last partial is dropped).

    Args:
        dataset_size: ``len(dataset)``.
        num_samples: samples per epoch over all processes; ``None`` is ``dataset_size``.
        batch_size: the global batch; must be divisible by ``world_size``.
        rank, world_size: this process and the number of processes.
        seed, epoch: select the epoch's order (see :func:`epoch_order`).
        shuffle: random order, or consecutive index ranges (see :func:`epoch_order`).
    """

    def __init__(
        self,
        dataset_size: int,
        num_samples: int | None,
        batch_size: int,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        epoch: int = 1,
        shuffle: bool = True,
    ) -> None:
        if batch_size % world_size:
            raise ValueError(
                f"batch_size={batch_size} must be divisible by the number of processes "
                f"({world_size})"
            )
        num_samples = dataset_size if num_samples is None else num_samples
        if num_samples < batch_size:
            raise ValueError(f"need at least one batch of {batch_size}, got {num_samples} samples")
        self.order = epoch_order(dataset_size, num_samples, seed, epoch, shuffle)
        self.batch_size = batch_size
        self.per_rank = batch_size // world_size
        self.rank = rank

    def __len__(self) -> int:
        return len(self.order) // self.batch_size

    def __iter__(self) -> Iterator[list[int]]:
        for step in range(len(self)):
            start = step * self.batch_size + self.rank * self.per_rank
            yield self.order[start : start + self.per_rank].tolist()
