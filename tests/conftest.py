"""Fixtures every test module may use.

- ``one_thread`` (automatic): each test starts with one torch intra-op thread. The suite's models
  are small, and the CI machine has two cores shared with the worker processes some tests start:
  more threads make eager PyTorch many times slower there. A test that changes the count is
  undone after it.
- ``device``: ``cpu``, and also ``cuda`` where a GPU is present, so that tests of the CUDA paths
  run wherever they can.
"""

import pytest
import torch

torch.set_num_threads(1)  # also for module-scoped fixtures, built before any test runs

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    return torch.device(request.param)
