import math

import numpy as np
import torch

from ebmtrack.ops.crop import crop_square
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.augment import augmented_crops, dropout_copies


def test_augmentation_labels_follow_the_target():
    rng_image = np.random.default_rng(0)
    frame = rng_image.integers(0, 256, (200, 260, 3), dtype=np.uint8)
    params = AtomParams(search_size=96)
    center, side = (130.0, 100.0), 120.0
    crops, centers = augmented_crops(frame, center, side, params, np.random.default_rng(1))
    assert crops.shape == (params.num_init_samples - params.aug_dropout[0], 96, 96, 3)
    assert params.num_init_samples == 30
    np.testing.assert_allclose(centers[0], (48.0, 48.0))
    identity, _ = crop_square(frame, center, side, 96)
    np.testing.assert_array_equal(crops[0], identity)
    shift = 0.6 * 96 / 2
    np.testing.assert_allclose(centers[1], (48.0 + shift, 48.0 + shift))
    # Random shifts are within +-1/6 of the crop per axis, in whole crop pixels (flip and
    # blur); rotations turn the shift with the crop, keeping its length.
    offsets = centers[5:] - 48.0
    assert np.all(np.hypot(*offsets.T) <= math.sqrt(2) * 96 / 6 + 1e-9)
    np.testing.assert_allclose(offsets[:6], np.round(offsets[:6]), atol=1e-6)


def test_dropout_copies_drop_whole_channels_and_rescale():
    features = torch.ones(1, 50, 3, 3)
    copies = dropout_copies(features, 7, 0.2, torch.Generator().manual_seed(0))
    assert copies.shape == (7, 50, 3, 3)
    values = set(torch.unique(copies).tolist())
    assert values <= {0.0, 1.25}
    per_channel = copies.amax(dim=(2, 3)) == copies.amin(dim=(2, 3))
    assert per_channel.all()
