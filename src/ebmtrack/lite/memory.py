"""The classifier's sample memory in NumPy (:mod:`ebmtrack.tracking.memory`'s rules; tested
equal): fixed capacity, weights that sum to one with exponential forgetting, a new sample in the
lightest slot after the first-frame ones, the first-frame samples never below a total weight."""

from __future__ import annotations

import numpy as np

__all__ = ["SampleMemory"]


class SampleMemory:
    """Fixed-capacity memory of (sample, label) pairs with weights that sum to one.

    Args:
        samples: (M0, D, H, W) first-frame samples, weight 1 / M0 each.
        labels: (M0, H, W) their labels.
        capacity: total slots (> M0).
        init_minimum_weight: least total weight of the first-frame samples.
    """

    def __init__(
        self,
        samples: np.ndarray,
        labels: np.ndarray,
        capacity: int,
        init_minimum_weight: float = 0.25,
    ) -> None:
        num_init = samples.shape[0]
        if capacity <= num_init:
            raise ValueError(f"capacity must exceed the {num_init} initial samples, got {capacity}")
        self.num_init = num_init
        self.init_minimum_weight = init_minimum_weight
        self.samples = np.zeros((capacity, *samples.shape[1:]), dtype=samples.dtype)
        self.labels = np.zeros((capacity, *labels.shape[1:]), dtype=labels.dtype)
        self.weights = np.zeros(capacity, dtype=samples.dtype)
        self.samples[:num_init] = samples
        self.labels[:num_init] = labels
        self.weights[:num_init] = 1.0 / num_init
        self.num_stored = num_init
        self._previous_slot: int | None = None

    @property
    def capacity(self) -> int:
        return self.samples.shape[0]

    def add(self, sample: np.ndarray, label: np.ndarray, learning_rate: float) -> int:
        """Store ``sample`` (D, H, W) with its ``label``; returns the slot it took."""
        weights = self.weights
        slot = int(np.argmin(weights[self.num_init :])) + self.num_init
        if self._previous_slot is None:
            weights /= weights.dtype.type(1.0 - learning_rate)
            weights[slot] = learning_rate
        else:
            weights[slot] = weights[self._previous_slot] / weights.dtype.type(1.0 - learning_rate)
        weights /= weights.sum()
        if weights[: self.num_init].sum() < self.init_minimum_weight:
            rest = weights[self.num_init :]
            rest *= weights.dtype.type(1.0 - self.init_minimum_weight) / rest.sum()
            weights[: self.num_init] = self.init_minimum_weight / self.num_init
        self.samples[slot] = sample
        self.labels[slot] = label
        self.num_stored = min(self.num_stored + 1, self.capacity)
        self._previous_slot = slot
        return slot

    def training_set(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(samples, labels, weights) of the filled slots."""
        n = self.num_stored
        return self.samples[:n], self.labels[:n], self.weights[:n]
