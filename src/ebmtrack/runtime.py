"""Process settings that decide how fast the models run on a CPU: thread counts and how idle
threads wait, which backbone runtime runs, and whether freed memory is kept for reuse."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where used: eval workers of OpenCV trackers need none
    import torch

__all__ = [
    "BACKBONE_RUNTIMES",
    "DEFAULT_THREADS",
    "configure_threads",
    "resolve_backbone_runtime",
    "retain_freed_memory",
    "torch_threads",
]

BACKBONE_RUNTIMES = ("auto", "torch", "onnx", "onnx-int8")
DEFAULT_THREADS = 1
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def configure_threads(threads: int | None = None) -> int:
    """Set how many CPU threads this process's trackers use, and how idle threads wait; every
    entry that runs a tracker (``ebmtrack track``, ``eval``'s workers, ``load_tracker``) calls
    this before building one.

    ``threads``: ``None`` for the default, :data:`DEFAULT_THREADS` (one: on a 2-core machine
    shared with two other busy processes one thread keeps about two thirds of its quiet speed,
    while two threads that wait for each other can lose most of theirs; docs/results/speed.md),
    ``0`` to leave the libraries' own defaults (a thread per core), else that many. It sets the
    intra-op threads of torch and OpenCV where imported, and for libraries imported later
    (torch reads them when imported) ``OMP_NUM_THREADS`` and friends and
    ``OMP_WAIT_POLICY=PASSIVE`` (idle OpenMP threads sleep instead of spinning; an explicit
    setting is kept). ONNX Runtime sessions made afterwards take torch's thread count, without
    spinning (:class:`~ebmtrack.models.backbones.onnx_runtime.OnnxBackbone`). Returns
    ``threads`` resolved (0 stays 0).
    """
    if threads is None:
        threads = DEFAULT_THREADS
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(f"threads must be an int >= 0 (0: the libraries' own), got {threads!r}")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if threads == 0:
        return 0
    for variable in _THREAD_VARIABLES:
        os.environ[variable] = str(threads)
    for module, setter in (("torch", "set_num_threads"), ("cv2", "setNumThreads")):
        if module in sys.modules:
            getattr(sys.modules[module], setter)(threads)
    return threads


def resolve_backbone_runtime(
    runtime: str,
    device: torch.device | str,
    dtype: torch.dtype,
    int8: bool | Callable[[], bool] = False,
) -> str:
    """``torch``, ``onnx`` or ``onnx-int8`` for a tracker's backbone_runtime parameter.

    ``auto``: ONNX Runtime where it is installed, on the CPU in float32, else eager PyTorch (on a
    GPU, and in bfloat16, which ONNX Runtime's CPU kernels do not run). In ONNX Runtime the
    backbone runs in int8 (``onnx-int8``, :mod:`ebmtrack.models.backbones.int8`) where ``int8``
    says it may (a bool, or a function called only then: the caller knows whether ranges ship
    for its backbone's weights; the ATOM tracker asks
    :func:`~ebmtrack.models.backbones.int8.int8_available`), else in float32 (``onnx``): int8 ran
    the default tracker's frame 1.33-1.44x cheaper than float32 in ONNX Runtime (itself 1.7x
    cheaper than eager PyTorch), at the same accuracy (docs/results/speed.md).

    ``onnx-int8`` asked for is refused with a ValueError on a GPU and with a dtype other than
    float32 (bfloat16 already is the fast path there; ``precision="auto"`` resolves to it on CPUs
    with native bfloat16).
    """
    if runtime not in BACKBONE_RUNTIMES:
        raise ValueError(
            f"backbone_runtime must be one of {', '.join(BACKBONE_RUNTIMES)}, got {runtime!r}"
        )
    import torch

    if runtime == "onnx-int8":
        if torch.device(device).type != "cpu":
            raise ValueError(
                f"backbone_runtime='onnx-int8' runs on the CPU, not {device}: use device='cpu'"
            )
        if dtype != torch.float32:
            raise ValueError(
                f"backbone_runtime='onnx-int8' replaces the float32 backbone; the precision "
                f"here is {str(dtype).replace('torch.', '')} (precision='auto' is bfloat16 on "
                "a CPU with native bfloat16): pass precision='float32', or use another "
                "backbone_runtime"
            )
        return runtime
    if runtime != "auto":
        return runtime
    installed = all(importlib.util.find_spec(name) for name in ("onnxruntime", "onnx"))
    on_cpu = torch.device(device).type == "cpu"
    if not (installed and on_cpu and dtype == torch.float32):
        return "torch"
    return "onnx-int8" if (int8() if callable(int8) else int8) else "onnx"


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch CPU threads (``None``: leave them), restoring the
    previous number after."""
    if threads is None:
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
