"""The NumPy first-frame augmentation cuts the torch tracker's crops and drops its channels."""

import numpy as np
import torch

from ebmtrack.lite.augment import augmented_crops, dropout_copies, num_augmented_crops
from ebmtrack.lite.torch_random import TorchGenerator
from ebmtrack.tracking import augment as ref
from ebmtrack.tracking.atom.params import AtomParams


def test_crops_and_centres_are_the_torch_trackers():
    params = AtomParams(search_size=96)
    fields = {name: getattr(params, name) for name in AtomParams.names()}
    frame = np.random.default_rng(0).integers(0, 256, (200, 300, 3), dtype=np.uint8)
    got = augmented_crops(frame, (140.5, 90.25), 150.0, fields, np.random.default_rng(4))
    want = ref.augmented_crops(frame, (140.5, 90.25), 150.0, params, np.random.default_rng(4))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert len(got[0]) == num_augmented_crops(fields) == ref.num_augmented_crops(params) == 23


def test_dropout_copies_are_torchs():
    features = np.random.default_rng(1).normal(size=(1, 96, 4, 4)).astype(np.float32)
    got = dropout_copies(features, 7, 0.2, TorchGenerator(5))
    want = ref.dropout_copies(
        torch.from_numpy(features), 7, 0.2, torch.Generator().manual_seed(5)
    ).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    dropped = (got == 0).all(axis=(2, 3)).mean()
    assert 0.1 < dropped < 0.3  # channels are dropped, at about the probability
