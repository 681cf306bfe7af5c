import os
import platform
import sys

import cv2
import pytest
import torch

from ebmtrack.process import (
    DEFAULT_THREADS,
    configure_threads,
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
