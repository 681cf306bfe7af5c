import importlib.util
import os
import platform
import sys

import cv2
import pytest
import torch

from ebmtrack.runtime import (
    DEFAULT_THREADS,
    configure_threads,
    resolve_backbone_runtime,
    retain_freed_memory,
    torch_threads,
)


@pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)
def test_glibc_accepts_the_allocator_settings():
    # every mallopt call must succeed (an out-of-range value returns 0); the effect on training
    # speed is measured by benchmarks/bench_regression1d.py, where page faults are countable
    # without other processes' memory reclaim making them noisy
    assert retain_freed_memory()


def test_torch_threads_sets_and_restores_the_thread_count():
    before = torch.get_num_threads()
    other = 1 if before != 1 else 2
    with torch_threads(other):
        assert torch.get_num_threads() == other
        with torch_threads(None):
            assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(other):
        raise RuntimeError
    assert torch.get_num_threads() == before


def test_configure_threads_sets_the_default_an_explicit_count_or_leaves_them(monkeypatch):
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)  # restored after the test
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    cv2_threads = cv2.getNumThreads()
    with torch_threads(torch.get_num_threads()):  # restored after
        assert configure_threads() == DEFAULT_THREADS == torch.get_num_threads() == 1
        assert os.environ["OMP_NUM_THREADS"] == "1"
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"  # for a torch imported later
        assert configure_threads(2) == torch.get_num_threads() == 2
        assert configure_threads(0) == 0 and torch.get_num_threads() == 2  # left as it was
        assert cv2.getNumThreads() == 2
    cv2.setNumThreads(cv2_threads)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    configure_threads(0)
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # the user's own setting is kept
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads must be an int >= 0"):
            configure_threads(bad)


def test_auto_backbone_runtime_is_onnx_exactly_on_a_cpu_in_float32(monkeypatch):
    installed = all(importlib.util.find_spec(m) for m in ("onnxruntime", "onnx"))
    assert resolve_backbone_runtime("auto", "cpu", torch.float32) == (
        "onnx" if installed else "torch"
    )
    assert resolve_backbone_runtime("auto", "cpu", torch.bfloat16) == "torch"
    assert resolve_backbone_runtime("auto", "cuda", torch.float32) == "torch"
    assert resolve_backbone_runtime("torch", "cpu", torch.float32) == "torch"
    assert resolve_backbone_runtime("onnx", "cpu", torch.bfloat16) == "onnx"  # as asked
    # int8 where the caller says its weights have ranges; the function is asked only then.
    assert resolve_backbone_runtime("auto", "cpu", torch.float32, int8=True) == (
        "onnx-int8" if installed else "torch"
    )
    assert resolve_backbone_runtime("auto", "cpu", torch.float32, int8=lambda: False) == (
        "onnx" if installed else "torch"
    )
    never = lambda: pytest.fail("asked")  # noqa: E731
    assert resolve_backbone_runtime("auto", "cpu", torch.bfloat16, int8=never) == "torch"
    assert resolve_backbone_runtime("auto", "cuda", torch.float32, int8=never) == "torch"
    assert resolve_backbone_runtime("onnx", "cpu", torch.float32, int8=never) == "onnx"
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "onnxruntime" else real_find_spec(name, *args),
    )
    assert resolve_backbone_runtime("auto", "cpu", torch.float32) == "torch"  # not installed
    assert resolve_backbone_runtime("auto", "cpu", torch.float32, int8=True) == "torch"
    # int8 is asked for, never picked (tests/models/test_backbones_int8.py for its refusals).
    assert resolve_backbone_runtime("onnx-int8", "cpu", torch.float32) == "onnx-int8"
    match = "backbone_runtime must be one of auto, torch, onnx, onnx-int8"
    with pytest.raises(ValueError, match=match):
        resolve_backbone_runtime("tensorrt", "cpu", torch.float32)
