import pytest
import torch

from ebmtrack.tracking.memory import SampleMemory


def _memory(capacity=8, num_init=3):
    samples = torch.zeros(num_init, 2, 3, 3)
    labels = torch.zeros(num_init, 3, 3)
    return SampleMemory(samples, labels, capacity, init_minimum_weight=0.25)


def test_memory_weights_follow_the_exponential_forgetting_rule():
    memory = _memory()
    lr = 0.1
    slot = memory.add(torch.ones(2, 3, 3), torch.ones(3, 3), lr)
    assert slot == 3 and memory.num_stored == 4
    # First new sample: the others / (1 - lr), the new one lr, then normalised.
    total = 1 / (1 - lr) + lr
    assert memory.weights[3].item() == pytest.approx(lr / total)
    second = memory.add(torch.ones(2, 3, 3), torch.ones(3, 3), lr)
    assert second == 4
    # Each new sample weighs 1 / (1 - lr) times the previous new one.
    ratio = memory.weights[4] / memory.weights[3]
    assert ratio.item() == pytest.approx(1 / (1 - lr))
    assert memory.weights.sum().item() == pytest.approx(1.0)


def test_memory_replaces_the_lightest_and_keeps_the_initial_samples():
    memory = _memory(capacity=6, num_init=3)
    for i in range(20):
        slot = memory.add(torch.full((2, 3, 3), float(i)), torch.zeros(3, 3), 0.3)
        assert slot >= 3
        assert memory.weights.sum().item() == pytest.approx(1.0)
        assert memory.weights[:3].sum().item() >= 0.25 - 1e-6
    samples, labels, weights = memory.training_set()
    assert samples.shape[0] == 6 and weights.shape == (6,)
    # The newest sample is stored and is the heaviest non-initial one.
    assert samples[int(torch.argmax(weights[3:])) + 3, 0, 0, 0].item() == 19.0
    with pytest.raises(ValueError, match="capacity"):
        _memory(capacity=3, num_init=3)
