"""PyTorch's CPU random streams, drawn in NumPy."""

import numpy as np
import pytest
import torch

from ebmtrack.lite.torch_random import TorchGenerator


@pytest.mark.parametrize("seed", [0, 1, 12345, 100_003 * 7 + 42, 2**32 + 5])
def test_rand_is_torchs_bit_for_bit(seed):
    ours = TorchGenerator(seed)
    theirs = torch.Generator().manual_seed(seed)
    for shape in [(7, 96, 1, 1), (9, 4), (3,)]:
        np.testing.assert_array_equal(
            ours.rand(*shape), torch.rand(*shape, generator=theirs).numpy()
        )


@pytest.mark.parametrize("shape", [(64, 96), (64, 4, 4), (5, 7), (33,)])
def test_randn_is_torchs_after_other_draws(shape):
    ours, theirs = TorchGenerator(3), torch.Generator().manual_seed(3)
    ours.rand(7, 96, 1, 1)
    torch.rand(7, 96, 1, 1, generator=theirs)
    got = ours.randn(*shape)
    want = torch.randn(*shape, generator=theirs).numpy()
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    # the streams stay in step after a size that is not a multiple of 16
    np.testing.assert_array_equal(ours.rand(4), torch.rand(4, generator=theirs).numpy())


def test_refuses_what_it_does_not_reproduce():
    with pytest.raises(ValueError, match="at least 16"):
        TorchGenerator(0).randn(3, 5)
    with pytest.raises(ValueError, match="seed"):
        TorchGenerator(-1)
