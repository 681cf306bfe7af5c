"""Which floating-point type runs fastest here: the one hardware probe the trackers share."""

from __future__ import annotations

import torch

__all__ = ["PRECISIONS", "fast_dtype", "resolve_precision"]

PRECISIONS = ("auto", "float32", "bfloat16")


def fast_dtype(device: torch.device | str) -> torch.dtype:
    """``torch.bfloat16`` on a CPU with native bfloat16 dot products (the ``avx512_bf16`` or
    ``amx_bf16`` flag of Linux's /proc/cpuinfo), else ``torch.float32``.

    There convolutions and matrix products run about 1.5-4x faster in bfloat16 (8 significant
    bits, float32 accumulation); elsewhere bfloat16 is emulated and no faster, and GPUs run the
    trackers' small products quickly in float32.
    """
    if torch.device(device).type != "cpu":
        return torch.float32
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line.split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:
        return torch.float32
    return torch.bfloat16 if {"avx512_bf16", "amx_bf16"} & set(flags) else torch.float32


def resolve_precision(precision: str, device: torch.device | str) -> torch.dtype:
    """``auto`` -> :func:`fast_dtype`, ``float32`` / ``bfloat16`` -> that dtype."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return fast_dtype(device) if precision == "auto" else getattr(torch, precision)
