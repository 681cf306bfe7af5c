import platform
import sys

import pytest
import torch

from ebmtrack.runtime import retain_freed_memory, torch_threads


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
