"""Process settings that decide how fast the models run on a CPU: torch's thread count, and
whether freed memory is kept for reuse."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["retain_freed_memory", "torch_threads"]


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch CPU threads (``None``: leave them), restoring the
    previous number after."""
    if threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def retain_freed_memory() -> bool:
    """Make glibc's malloc keep freed blocks of up to 32 MiB for reuse in this process.

    By default glibc hands blocks of a megabyte or so back to the kernel on free (the mmap
    threshold, heap trimming), so a loop that allocates and frees tensors of that size
    page-faults them in again, zero-filled, at every iteration: about 25 % of a training step of
    the 1-D study, which frees twenty 1.3 MB tensors per step, on the machine this was measured
    on. Returns False (and changes nothing) where the C library has no ``mallopt``.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):
        return False
    trim_threshold, top_pad, mmap_threshold = -1, -2, -3  # glibc's M_* constants
    settings = ((mmap_threshold, 32 << 20), (trim_threshold, 256 << 20), (top_pad, 16 << 20))
    return all(mallopt(option, value) == 1 for option, value in settings)
