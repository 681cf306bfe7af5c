"""The classifier's sample memory: feature maps, their labels and weights gamma_j.

A label is whatever the classifier trains against, one tensor per sample: ATOM stores Gaussian
label maps (H, W), DiMP the target box (4,) from which its optimizer builds its own labels.

The weighting is the reference's exponential forgetting: each new sample gets weight ``lr``
relative to the sum of the others (which shrink by ``1 - lr``), and replaces the lightest sample
that is not a first-frame one. The first-frame samples together never weigh less than
``init_minimum_weight``, so the tracker cannot drift away from what it was given.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["SampleMemory"]


class SampleMemory:
    """Fixed-capacity memory of (sample, label) pairs with weights that sum to one.

    Args:
        samples: (M0, D, H, W) first-frame samples; they take slots 0..M0-1 with weight 1 / M0.
        labels: (M0, ...) their labels.
        capacity: total number of slots (> M0).
        init_minimum_weight: minimum total weight of the first-frame samples.
    """

    def __init__(
        self, samples: Tensor, labels: Tensor, capacity: int, init_minimum_weight: float = 0.25
    ) -> None:
        num_init = samples.shape[0]
        if capacity <= num_init:
            raise ValueError(f"capacity must exceed the {num_init} initial samples, got {capacity}")
        self.num_init = num_init
        self.init_minimum_weight = init_minimum_weight
        self.samples = samples.new_zeros((capacity, *samples.shape[1:]))
        self.labels = labels.new_zeros((capacity, *labels.shape[1:]))
        self.weights = samples.new_zeros(capacity)
        self.samples[:num_init] = samples
        self.labels[:num_init] = labels
        self.weights[:num_init] = 1.0 / num_init
        self.num_stored = num_init
        self._previous_slot: int | None = None

    @property
    def capacity(self) -> int:
        return self.samples.shape[0]

    def add(self, sample: Tensor, label: Tensor, learning_rate: float) -> int:
        """Store ``sample`` (D, H, W) with its ``label``; returns the slot it took."""
        weights = self.weights
        # Empty slots weigh 0, so they fill first.
        slot = int(torch.argmin(weights[self.num_init :]).item()) + self.num_init
        if self._previous_slot is None:
            weights /= 1.0 - learning_rate
            weights[slot] = learning_rate
        else:
            weights[slot] = weights[self._previous_slot] / (1.0 - learning_rate)
        weights /= weights.sum()
        init_total = weights[: self.num_init].sum()
        if init_total < self.init_minimum_weight:
            # The reference divides by (minimum + rest), which leaves a sum != 1; we rescale the
            # rest to 1 - minimum so that the weights stay normalised.
            rest = weights[self.num_init :]
            rest *= (1.0 - self.init_minimum_weight) / rest.sum()
            weights[: self.num_init] = self.init_minimum_weight / self.num_init
        self.samples[slot] = sample
        self.labels[slot] = label
        self.num_stored = min(self.num_stored + 1, self.capacity)
        self._previous_slot = slot
        return slot

    def training_set(self) -> tuple[Tensor, Tensor, Tensor]:
        """(samples, labels, weights) of the filled slots."""
        n = self.num_stored
        return self.samples[:n], self.labels[:n], self.weights[:n]
