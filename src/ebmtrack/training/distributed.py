"""Process groups for multi-GPU / multi-machine training through ``torchrun``.

``torchrun`` (``python -m torch.distributed.run``) starts one process per device and sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK`` and the rendezvous address in the environment; a plain ``python``
start is a world of one process and needs no process group at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistributedContext:
    """Where this process sits in the run.

    Attributes:
        rank: global index of this process, 0 .. world_size - 1.
        world_size: number of processes.
        local_rank: index of this process on its machine (selects its GPU).
        device: the device this process computes on.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """True on the process that writes checkpoints, logs and progress bars."""
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``"auto"`` -> CUDA when available else CPU; ``"cuda"`` -> this process's GPU."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be one of auto, cpu, cuda; got {device!r}")
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch.cuda.is_available() is False")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def init_distributed(device: str = "auto") -> DistributedContext:
    """Join the process group that ``torchrun`` describes in the environment, if any.

    The backend is NCCL for GPUs and gloo for CPUs. Safe to call when a group already exists.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch_device = resolve_device(device, local_rank)
    if world_size > 1 and not dist.is_initialized():
        if torch_device.type == "cuda":
            torch.cuda.set_device(torch_device)
        backend = "nccl" if torch_device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    return DistributedContext(rank, world_size, local_rank, torch_device)


def shutdown_distributed() -> None:
    """Leave the process group (no-op without one)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_mean(values: torch.Tensor, context: DistributedContext) -> torch.Tensor:
    """The mean of ``values`` over all processes (a copy; ``values`` itself is unchanged)."""
    values = values.detach().clone()
    if context.is_distributed:
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
        values /= context.world_size
    return values


def barrier(context: DistributedContext) -> None:
    """Wait for every process (no-op in a single-process run)."""
    if context.is_distributed:
        dist.barrier()
