import random

import numpy as np
import pytest
import torch
from torch import nn

from ebmtrack.training.checkpoint import (
    capture_rng_state,
    latest_checkpoint,
    load_trainable_state_dict,
    read_checkpoint,
    read_checkpoint_config,
    restore_rng_state,
    save_checkpoint,
    trainable_state_dict,
)


class WithFrozen(nn.Module):
    frozen_submodules = ("backbone",)

    def __init__(self, width: int = 3):
        super().__init__()
        self.backbone = nn.Linear(2, 2)
        self.head = nn.Linear(2, width)


def draw() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(1).item()  # noqa: NPY002


def test_rng_states_round_trip():
    state = capture_rng_state()
    expected = draw()
    draw()
    restore_rng_state(state)
    assert draw() == expected


def write(root, epoch, module, keep=2):
    return save_checkpoint(
        root,
        epoch,
        10 * epoch,
        trainable_state_dict(module),
        {"step": torch.tensor(epoch)},
        [capture_rng_state()],
        {"name": "test"},
        keep=keep,
    )


def test_checkpoints_are_found_read_and_pruned(tmp_path):
    module = WithFrozen()
    assert latest_checkpoint(tmp_path) is None
    for epoch in (1, 2, 3):
        write(tmp_path, epoch, module)
    (tmp_path / ".tmp-epoch-0004-7").mkdir()  # a write that was killed half-way
    found = latest_checkpoint(tmp_path)
    assert (found.epoch, found.global_step) == (3, 30)
    assert sorted(p.name for p in tmp_path.glob("epoch-*")) == ["epoch-0002", "epoch-0003"]
    model_state, training_state, rng = read_checkpoint(found)
    assert set(model_state) == {"head.weight", "head.bias"}  # frozen backbone left out
    assert training_state["step"].item() == 3 and len(rng) == 1
    assert read_checkpoint_config(found) == {"name": "test"}

    other = WithFrozen()
    load_trainable_state_dict(other, model_state)
    torch.testing.assert_close(other.head.weight, module.head.weight)


def test_loading_a_checkpoint_of_another_model_fails_clearly(tmp_path):
    write(tmp_path, 1, WithFrozen(width=3))
    state, _, _ = read_checkpoint(latest_checkpoint(tmp_path))
    with pytest.raises(
        ValueError, match=r"tensor head\.\w+ has shape \(3.*\), the model expects \(4"
    ):
        load_trainable_state_dict(WithFrozen(width=4), state)
    with pytest.raises(ValueError, match="missing"):
        load_trainable_state_dict(WithFrozen(), {})
