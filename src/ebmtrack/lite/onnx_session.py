"""ONNX Runtime sessions as the trackers run them: on the CPU, a fixed number of intra-op
threads whose idle ones sleep (spinning ones take cores from a busy machine's other threads), the
full graph optimisation. The same settings as the torch side's backbone sessions
(:mod:`ebmtrack.models.backbones.onnx_runtime`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["Session", "default_threads"]


def default_threads() -> int:
    """One intra-op thread: on a busy 2-core machine one thread kept its speed best (the torch
    trackers' default too)."""
    return 1


class Session:
    """One ONNX file run by ONNX Runtime on the CPU.

    Args:
        path: the ``.onnx`` file, or its bytes.
        threads: intra-op threads (0: one per core).

    Calling it with ``{input name: array}`` returns ``{output name: float32 array}``;
    ``threads`` is the intra-op thread count it runs with.
    """

    def __init__(self, path: str | Path | bytes, threads: int = 1) -> None:
        import onnxruntime  # here: importing ebmtrack.lite alone does not start ONNX Runtime

        options = onnxruntime.SessionOptions()
        self.threads = threads if threads > 0 else (os.cpu_count() or 1)
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # not the notes on constants an int8 fusion leaves unused
        self.path = None if isinstance(path, bytes) else Path(path)
        self._session = onnxruntime.InferenceSession(
            path if isinstance(path, bytes) else str(path),
            options,
            providers=["CPUExecutionProvider"],
        )
        self.inputs = tuple(node.name for node in self._session.get_inputs())
        self.outputs = tuple(node.name for node in self._session.get_outputs())

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = {
            name: np.ascontiguousarray(value, dtype=np.float32) for name, value in feeds.items()
        }
        return dict(zip(self.outputs, self._session.run(None, arrays), strict=True))
