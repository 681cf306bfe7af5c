"""The NumPy localisation: PyTorch's bicubic upsampling, and the verdict the torch tracker
reaches on its score tensors (one rule, :func:`ebmtrack.lite.localize.localize`)."""

import numpy as np
import pytest
import torch

from ebmtrack.lite import localize as lite
from ebmtrack.tracking import localize as ref


@pytest.mark.parametrize("shape,factor", [((18, 18), 4), ((7, 11), 3), ((2, 5), 2), ((9, 9), 1)])
def test_upsampling_is_torchs_bicubic(shape, factor):
    scores = np.random.default_rng(factor).normal(size=shape).astype(np.float32)
    got = lite.upsample_scores(scores, factor)
    want = ref.upsample_scores(torch.from_numpy(scores), factor).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def peaks(seed: int) -> np.ndarray:
    """A score map with two bumps of random heights and places, so every status occurs."""
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:69, 0:69]
    out = np.zeros((69, 69), dtype=np.float32)
    for _ in range(2):
        cy, cx = rng.uniform(0, 69, 2)
        out += rng.uniform(0, 1.2) * np.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / 20)
    return out + rng.normal(0, 0.01, out.shape).astype(np.float32)


def test_localize_gives_the_torch_verdict_on_many_maps():
    statuses = set()
    for seed in range(200):
        scores = peaks(seed)
        size = (30.0 + seed % 40, 25.0 + seed % 30)
        got = lite.localize(scores, 4.0, 288, size)
        want = ref.localize(torch.from_numpy(scores), 4.0, 288, size)
        assert got.position == want.position and got.status.value == want.status.value
        assert got.score == pytest.approx(want.score)
        assert got.other_score == pytest.approx(want.other_score, nan_ok=True)
        statuses.add(got.status.value)
    assert statuses >= {"normal", "not_found", "hard_negative", "uncertain"}
