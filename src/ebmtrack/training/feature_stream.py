"""Fresh training pairs with their backbone features, made by DataLoader workers: the sample
engine of the box head.

A head trained on a frozen backbone needs the backbone's features of every crop it sees. The
feature cache (:mod:`ebmtrack.training.feature_cache`) computes them once for a fixed set of
pairs, so every epoch revisits the same crops; this module makes every training sample a *new*
pair instead: pair ``i`` of a :class:`~ebmtrack.data.sampler.TrackingPairs` (its frames, jitter
and proposals a function of ``(seed, i)``) is cropped and passed through the backbone inside a
DataLoader worker, in the runtime the trackers use (ONNX Runtime int8 by default: about 7 ms a
288 x 288 crop on one core, against 25 ms or more for eager PyTorch), and reaches the training
process as float16 features. The training step then costs only the head, and the worker
processes make the next batches meanwhile.

What a run sees: with the trainer's ``shuffle=False`` and a data set at least as long as the run
(``epochs * samples_per_epoch``), every training sample is a distinct index, i.e. a distinct
draw of (sequence, frames, jitter, colour, proposals); the trainer logs their count
(``pairs_seen``). A resumed run continues at the next index, so it sees exactly the stream the
uninterrupted run would have seen, and nothing is stored on disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.utils.data import Dataset

from .feature_cache import BOX_KEYS, FEATURE_KEYS

RUNTIMES = ("onnx-int8", "onnx", "torch")


@dataclass
class FeatureStreamConfig:
    """Whether a box-head run streams fresh pairs with features made by its DataLoader workers.

    Attributes:
        enabled: train on :class:`StreamedPairs` (needs ``trainer.num_workers`` >= 1 to overlap
            the backbone with the head's steps; 0 runs it in the training process).
        runtime: the backbone's runtime in the workers: ``onnx-int8`` (the trackers' default
            backbone path), ``onnx`` (float32) or ``torch`` (float32, eager).
        threads: intra-op threads of the backbone in each worker.
    """

    enabled: bool = False
    runtime: str = "onnx-int8"
    threads: int = 1

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(
                f"feature_stream.runtime must be one of {', '.join(RUNTIMES)}, got {self.runtime!r}"
            )
        if int(self.threads) != self.threads or self.threads < 1:
            raise ValueError(f"feature_stream.threads must be an integer >= 1, got {self.threads}")


def stream_extractor(
    backbone: torch.nn.Module, layers: tuple[str, str], runtime: str, threads: int
) -> Callable[[Tensor], dict[str, Tensor]]:
    """``images (B, 3, S, S) float 0-255 -> {layer: float32 features}`` in ``runtime``
    (see :class:`FeatureStreamConfig`)."""
    if runtime in ("onnx", "onnx-int8"):
        from ebmtrack.models.backbones.onnx_runtime import OnnxBackbone

        int8 = runtime == "onnx-int8"
        return OnnxBackbone(backbone, layers=layers, num_threads=threads, int8=int8)

    def extract(images: Tensor) -> dict[str, Tensor]:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            with torch.no_grad():
                return backbone(images, layers)
        finally:
            torch.set_num_threads(previous)

    return extract


class StreamedPairs(Dataset):
    """Processed pairs (``samples[i]``) with their images replaced by backbone features.

    Item ``i``: ``ref_feat0``, ``ref_feat1``, ``test_feat0``, ``test_feat1`` (C, H, W) float16
    (the keys of a feature-cache item), ``ref_box``, ``test_box`` (4,) and every other entry of
    ``samples[i]`` (``proposals``, ``proposal_iou``, ...) unchanged; what
    :class:`~ebmtrack.training.feature_cache.CachedBoxRegressionModule` trains on.

    The backbone runtime is created on first use in each process (an ONNX Runtime session
    cannot cross a fork), with ``threads`` intra-op threads.

    Args:
        samples: e.g. a :class:`~ebmtrack.data.sampler.TrackingPairs` with an
            :class:`~ebmtrack.data.processing.AtomProcessing`.
        backbone: the frozen backbone (eval mode).
        layers: its two layers the head reads (fine, coarse).
        runtime: see :class:`FeatureStreamConfig`.
        threads: backbone threads per process.
    """

    def __init__(
        self,
        samples: Dataset,
        backbone: torch.nn.Module,
        layers: tuple[str, str],
        runtime: str = "onnx-int8",
        threads: int = 1,
    ) -> None:
        FeatureStreamConfig(enabled=True, runtime=runtime, threads=threads)  # validates
        self.samples = samples
        self.backbone = backbone.eval()
        self.layers = tuple(layers)
        self.runtime = runtime
        self.threads = int(threads)
        self._extract: Callable | None = None
        self._owner: int | None = None

    def __len__(self) -> int:
        return len(self.samples)

    def _extractor(self) -> Callable[[Tensor], dict[str, Tensor]]:
        if self._extract is None or self._owner != os.getpid():
            self._extract = stream_extractor(self.backbone, self.layers, self.runtime, self.threads)
            self._owner = os.getpid()
        return self._extract

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        item = dict(self.samples[index])
        images = torch.stack([item.pop("ref_image"), item.pop("test_image")])
        features = self._extractor()(images)
        for level, layer in enumerate(self.layers):
            feat = features[layer].to(torch.float16)
            item[f"ref_feat{level}"] = feat[0].contiguous()
            item[f"test_feat{level}"] = feat[1].contiguous()
        missing = sorted(set(FEATURE_KEYS + BOX_KEYS) - set(item))
        if missing:
            raise ValueError(f"samples[{index}] lacks {missing}")
        return item
