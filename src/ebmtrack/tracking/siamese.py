"""The siamese box estimator (:mod:`ebmtrack.lite.siamese`) built from the networks shipped in
:mod:`ebmtrack.weights` (NanoTrack's, v2 or v3 by ``siamese_model``; Apache-2.0), once per
process and configuration."""

from __future__ import annotations

import functools

import torch

from ebmtrack.lite.siamese import SiameseBoxConfig, SiameseBoxEstimator
from ebmtrack.weights import siamese_networks

__all__ = ["shipped_siamese"]


@functools.lru_cache(maxsize=8)
def _estimator(config: SiameseBoxConfig, threads: int) -> SiameseBoxEstimator:
    backbone, head = siamese_networks(config.siamese_model)
    return SiameseBoxEstimator(backbone, head, config, threads)


def shipped_siamese(config: SiameseBoxConfig) -> SiameseBoxEstimator:
    """The shipped networks of ``config.siamese_model`` as a
    :class:`~ebmtrack.lite.siamese.SiameseBoxEstimator` decoding by ``config``, run on
    ``torch.get_num_threads()`` ONNX Runtime threads (as the trackers' backbones). Its sessions
    hold no per-target state, so trackers share them."""
    return _estimator(config, torch.get_num_threads())
