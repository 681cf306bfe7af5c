"""The siamese box estimator (:mod:`ebmtrack.lite.siamese`) built from the networks shipped in
:mod:`ebmtrack.weights` (NanoTrack v2's, Apache-2.0), once per process and configuration."""

from __future__ import annotations

import functools

import torch

from ebmtrack.lite.siamese import SiameseBoxConfig, SiameseBoxEstimator
from ebmtrack.weights import shipped_file

__all__ = ["shipped_siamese"]


@functools.lru_cache(maxsize=8)
def _estimator(config: SiameseBoxConfig, threads: int) -> SiameseBoxEstimator:
    backbone = shipped_file("siamese-backbone", "nanotrack")
    head = shipped_file("siamese-head", "nanotrack")
    return SiameseBoxEstimator(backbone.checked_path(), head.checked_path(), config, threads)


def shipped_siamese(config: SiameseBoxConfig) -> SiameseBoxEstimator:
    """The shipped networks as a :class:`~ebmtrack.lite.siamese.SiameseBoxEstimator` decoding
    by ``config``, run on ``torch.get_num_threads()`` ONNX Runtime threads (as the trackers'
    backbones). Its sessions hold no per-target state, so trackers share them."""
    return _estimator(config, torch.get_num_threads())
