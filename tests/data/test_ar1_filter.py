"""The synthetic sequences' AR(1) velocity filter: the numbers scipy's ``lfilter`` gave, to the bit
(the filter replaced that call, so that generating sequences needs no scipy)."""

import numpy as np
import pytest

from ebmtrack.data.synthetic import ar1_filter


@pytest.mark.parametrize("smoothness", [0.0, 0.5, 0.9, 0.99])
def test_ar1_filter_equals_scipy_lfilter(smoothness):
    signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng(3)
    noise = rng.normal(0, 2.0, size=(300, 4))
    previous = rng.normal(0, 2.0, size=4)
    expected, _ = signal.lfilter(
        [1.0], [1.0, -smoothness], noise, axis=0, zi=smoothness * previous[None]
    )
    np.testing.assert_array_equal(ar1_filter(noise, smoothness, previous), expected)


def test_ar1_filter_recursion():
    out = ar1_filter(np.array([[1.0], [0.0], [2.0]]), 0.5, np.array([4.0]))
    np.testing.assert_array_equal(out[:, 0], [3.0, 1.5, 2.75])
