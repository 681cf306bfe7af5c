"""Process settings that decide how fast the models run on a CPU: thread counts and how idle
threads wait, and whether freed memory is kept for reuse. Which runtime runs a backbone is the
tracker's choice (:mod:`ebmtrack.models.backbones.runtime`)."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "DEFAULT_THREADS",
    "configure_threads",
    "configured_threads",
    "retain_freed_memory",
    "torch_threads",
]

DEFAULT_THREADS = 1
_CONFIGURED: list[int] = []  # the last configure_threads's
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def configure_threads(threads: int | None = None) -> int:
    """Set how many CPU threads this process's trackers use, and how idle threads wait; every
    entry that runs a tracker (``ebmtrack track``, ``eval``'s workers, ``load_tracker``) calls
    this before building one.

    ``threads``: ``None`` for the default, :data:`DEFAULT_THREADS` (one: on a 2-core machine
    shared with two other busy processes one thread keeps about two thirds of its quiet speed,
    while two threads that wait for each other can lose most of theirs; docs/results/speed.md),
    ``0`` to leave the libraries' own defaults (a thread per core), else that many. It sets the
    intra-op threads of torch, OpenCV and NumPy's OpenBLAS where imported, and for libraries
    imported later (torch reads them when imported) ``OMP_NUM_THREADS`` and friends and
    ``OMP_WAIT_POLICY=PASSIVE`` (idle OpenMP threads sleep instead of spinning; an explicit
    setting is kept). ONNX Runtime sessions made afterwards take torch's thread count, without
    spinning (:class:`~ebmtrack.models.backbones.onnx_runtime.OnnxBackbone`). Returns
    ``threads`` resolved (0 stays 0).
    """
    if threads is None:
        threads = DEFAULT_THREADS
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(f"threads must be an int >= 0 (0: the libraries' own), got {threads!r}")
    _CONFIGURED[:] = [threads]
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if threads == 0:
        return 0
    for variable in _THREAD_VARIABLES:
        os.environ[variable] = str(threads)
    for module, setter in (("torch", "set_num_threads"), ("cv2", "setNumThreads")):
        if module in sys.modules:
            getattr(sys.modules[module], setter)(threads)
    if "numpy" in sys.modules:  # read OPENBLAS_NUM_THREADS when imported: too late for it
        _set_blas_threads(threads)
    return threads


# The setters of OpenBLAS builds: NumPy's wheels (scipy-openblas, 64-bit ints) and plain ones.
_BLAS_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


def _set_blas_threads(threads: int) -> bool:
    """Set the threads of the OpenBLAS NumPy's wheel ships (``numpy.libs``), already loaded:
    the torch-free runtime's matrix products (the first frame's fit) ran 15x slower with
    OpenBLAS's default, a thread per core, on a busy 2-core machine (docs/results/runtime.md).
    False where there is none to set (another BLAS, another layout)."""
    from pathlib import Path

    numpy = sys.modules["numpy"]
    folder = Path(numpy.__file__).resolve().parent.with_name("numpy.libs")
    for path in sorted(folder.glob("*openblas*.so*")) if folder.is_dir() else ():
        try:
            library = ctypes.CDLL(str(path))
        except OSError:
            continue
        for name in _BLAS_SETTERS:
            setter = getattr(library, name, None)
            if setter is not None:
                setter(ctypes.c_int(threads))
                return True
    return False


def configured_threads() -> int:
    """The threads :func:`configure_threads` last set in this process (0: the libraries' own),
    :data:`DEFAULT_THREADS` before any call: what the torch-free runtime's ONNX Runtime
    sessions take where no count is given."""
    return _CONFIGURED[0] if _CONFIGURED else DEFAULT_THREADS


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch CPU threads (``None``: leave them), restoring the
    previous number after; where PyTorch is not installed there are none to set."""
    import importlib.util

    try:
        installed = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        installed = False
    if threads is None or not installed:
        yield
        return
    import torch

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
