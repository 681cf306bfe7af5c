"""PyTorch's CPU random numbers in NumPy: ``torch.Generator().manual_seed(s)`` followed by
``torch.rand`` / ``torch.randn`` of float32 tensors, so that the torch-free runtime draws what the
torch trackers draw (the classifier's initial weights, the channel dropout, the box proposals).

What PyTorch does (``aten``'s CPU generator and distribution kernels):

- the engine is the 32-bit Mersenne Twister MT19937 seeded with ``s mod 2**32`` by the standard
  ``init_genrand`` recursion (NumPy's :class:`numpy.random.MT19937` runs the same engine once its
  state is set to that key);
- a float32 uniform in [0, 1) takes one 32-bit output ``x``: ``(x & (2**24 - 1)) * 2**-24``;
- a float32 normal tensor of at least 16 contiguous values first fills all of them with such
  uniforms, then turns each block of 16 ``u[0:16]`` into normals by Box-Muller: ``r = sqrt(-2
  log(1 - u[j]))``, ``t = 2 pi u[j + 8]``, ``n[j] = r cos t``, ``n[j + 8] = r sin t`` for j < 8;
  when the size is not a multiple of 16 the last 16 values are drawn again (16 new uniforms) and
  transformed the same way.

PyTorch evaluates log, sin and cos in float32 (with vectorised approximations on AVX2 CPUs);
here they are float64, rounded to float32 once: the normals agree to about 1e-6 (tested), the
uniforms exactly. Normal tensors of fewer than 16 values take another path in PyTorch and are
refused here.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TorchGenerator"]

_MASK24 = (1 << 24) - 1


def _init_genrand(seed: int) -> np.ndarray:
    """MT19937's 624-word state for ``seed`` (``init_genrand``)."""
    key = np.empty(624, dtype=np.uint32)
    value = seed & 0xFFFFFFFF
    key[0] = value
    for index in range(1, 624):
        value = (1812433253 * (value ^ (value >> 30)) + index) & 0xFFFFFFFF
        key[index] = value
    return key


class TorchGenerator:
    """The stream of ``torch.Generator().manual_seed(seed)`` on the CPU.

    Args:
        seed: a non-negative int (PyTorch keeps its low 32 bits for this engine).
    """

    def __init__(self, seed: int) -> None:
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self._engine = np.random.MT19937()
        self._engine.state = {
            "bit_generator": "MT19937",
            "state": {"key": _init_genrand(int(seed)), "pos": 624},
        }

    def _uniform(self, count: int) -> np.ndarray:
        """(count,) float32 uniforms in [0, 1), one engine output each."""
        raw = np.asarray(self._engine.random_raw(count), dtype=np.uint64)
        return ((raw & _MASK24).astype(np.float64) * 2.0**-24).astype(np.float32)

    def rand(self, *shape: int) -> np.ndarray:
        """``torch.rand(*shape, generator=g)`` (float32)."""
        count = int(np.prod(shape, dtype=np.int64))
        return self._uniform(count).reshape(shape)

    def randn(self, *shape: int) -> np.ndarray:
        """``torch.randn(*shape, generator=g)`` (float32; at least 16 values)."""
        count = int(np.prod(shape, dtype=np.int64))
        if count < 16:
            raise ValueError(f"randn draws at least 16 values here, got shape {shape}")
        values = self._uniform(count).astype(np.float64)
        out = np.empty(count, dtype=np.float64)
        whole = count // 16 * 16
        out[:whole] = _box_muller(values[:whole].reshape(-1, 16)).reshape(-1)
        if count % 16:
            tail = self._uniform(16).astype(np.float64)
            out[count - 16 :] = _box_muller(tail.reshape(1, 16)).reshape(-1)
        return out.astype(np.float32).reshape(shape)


def _box_muller(blocks: np.ndarray) -> np.ndarray:
    """(N, 16) uniforms -> (N, 16) normals, PyTorch's pairing of j with j + 8."""
    radius = np.sqrt(-2.0 * np.log(1.0 - blocks[:, :8]))
    theta = 2.0 * np.pi * blocks[:, 8:]
    return np.concatenate([radius * np.cos(theta), radius * np.sin(theta)], axis=1)
