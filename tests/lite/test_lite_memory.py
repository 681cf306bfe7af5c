"""The NumPy sample memory keeps the torch memory's slots and weights."""

import numpy as np
import torch

from ebmtrack.lite.memory import SampleMemory
from ebmtrack.tracking.memory import SampleMemory as TorchMemory


def test_slots_and_weights_follow_the_torch_memory():
    rng = np.random.default_rng(0)
    init = rng.normal(size=(5, 2, 3, 3)).astype(np.float32)
    labels = rng.uniform(size=(5, 3, 3)).astype(np.float32)
    ours = SampleMemory(init, labels, capacity=9, init_minimum_weight=0.4)
    theirs = TorchMemory(torch.from_numpy(init), torch.from_numpy(labels), 9, 0.4)
    for step in range(20):
        sample = rng.normal(size=(2, 3, 3)).astype(np.float32)
        label = rng.uniform(size=(3, 3)).astype(np.float32)
        rate = 0.02 if step % 3 == 0 else 0.01
        assert ours.add(sample, label, rate) == theirs.add(
            torch.from_numpy(sample), torch.from_numpy(label), rate
        )
        for a, b in zip(ours.training_set(), theirs.training_set(), strict=True):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-6, atol=1e-7)
    assert abs(float(ours.weights.sum()) - 1.0) < 1e-5
    assert ours.weights[:5].sum() >= 0.4 - 1e-6  # the first-frame floor held
