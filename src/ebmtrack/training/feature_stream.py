"""Fresh training pairs with their backbone features, made by DataLoader workers: the sample
engine of the box head (:class:`StreamedPairs`) and of DiMP's classifier
(:class:`StreamedFrameSets`, the same for sets of frames).

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
        tests_per_reference: training pairs that share one reference crop (its frame, crop and
            backbone pass; :meth:`~ebmtrack.data.sampler.TrackingPairs.group`): 1 makes every
            pair an independent draw; k > 1 saves k - 1 reference crops' backbone passes and
            draws per k pairs, at the price of pairs that are no longer independent. Validation
            pairs are always independent draws.
    """

    enabled: bool = False
    runtime: str = "onnx-int8"
    threads: int = 1
    tests_per_reference: int = 1

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(
                f"feature_stream.runtime must be one of {', '.join(RUNTIMES)}, got {self.runtime!r}"
            )
        for name in ("threads", "tests_per_reference"):
            value = getattr(self, name)
            if int(value) != value or value < 1:
                raise ValueError(f"feature_stream.{name} must be an integer >= 1, got {value}")


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


class _BackboneInWorkers(Dataset):
    """Samples whose crops go through ``backbone``'s ``layers`` in ``runtime`` where they are
    read. The runtime is created on first use in each process (an ONNX Runtime session cannot
    cross a fork), with ``threads`` intra-op threads."""

    def __init__(
        self,
        samples: Dataset,
        backbone: torch.nn.Module,
        layers: tuple[str, ...],
        runtime: str,
        threads: int,
    ) -> None:
        FeatureStreamConfig(enabled=True, runtime=runtime, threads=threads)  # validates
        self.samples = samples
        self.backbone = backbone.eval()
        self.layers = tuple(layers)
        self.runtime = runtime
        self.threads = int(threads)
        self._extract: Callable | None = None
        self._owner: int | None = None

    def _extractor(self) -> Callable[[Tensor], dict[str, Tensor]]:
        if self._extract is None or self._owner != os.getpid():
            self._extract = stream_extractor(self.backbone, self.layers, self.runtime, self.threads)
            self._owner = os.getpid()
        return self._extract

    def __len__(self) -> int:
        return len(self.samples)


class StreamedPairs(_BackboneInWorkers):
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
        tests_per_reference: k; item ``i`` is then member ``i % k`` of ``samples.group(i // k,
            k)``, whose k + 1 crops go through the backbone in one batch the first time one of
            its members is asked for (see :class:`FeatureStreamConfig`).
    """

    def __init__(
        self,
        samples: Dataset,
        backbone: torch.nn.Module,
        layers: tuple[str, str],
        runtime: str = "onnx-int8",
        threads: int = 1,
        tests_per_reference: int = 1,
    ) -> None:
        FeatureStreamConfig(tests_per_reference=tests_per_reference)  # validates
        super().__init__(samples, backbone, layers, runtime, threads)
        if tests_per_reference > 1 and not hasattr(samples, "group"):
            raise ValueError(f"tests_per_reference > 1 needs samples with group(), not {samples}")
        self.tests_per_reference = int(tests_per_reference)
        self._group: tuple[int, list[dict[str, Tensor]]] | None = None

    def _with_features(self, items: list[dict[str, Tensor]]) -> list[dict[str, Tensor]]:
        """Items of one reference (all share its ``ref_image``) with their images replaced by
        the backbone's features: one batch of the reference and every test crop."""
        items = [dict(item) for item in items]
        reference = items[0]["ref_image"]
        images = torch.stack([reference] + [item.pop("test_image") for item in items])
        features = self._extractor()(images)
        for item in items:
            item.pop("ref_image")
        for level, layer in enumerate(self.layers):
            feat = features[layer].to(torch.float16)
            for row, item in enumerate(items, start=1):
                item[f"ref_feat{level}"] = feat[0].contiguous()
                item[f"test_feat{level}"] = feat[row].contiguous()
        return items

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        size = self.tests_per_reference
        if size == 1:
            (item,) = self._with_features([self.samples[index]])
        else:
            group, member = divmod(int(index), size)
            if self._group is None or self._group[0] != group:
                self._group = (group, self._with_features(self.samples.group(group, size)))
            item = self._group[1][member]
        missing = sorted(set(FEATURE_KEYS + BOX_KEYS) - set(item))
        if missing:
            raise ValueError(f"samples[{index}] lacks {missing}")
        return item


class StreamedFrameSets(_BackboneInWorkers):
    """Processed frame sets (``samples[i]``: DiMP's N training and M test crops) with their
    images replaced by the backbone's features of one layer.

    Item ``i``: ``train_feat`` (N, C, H, W) and ``test_feat`` (M, C, H, W) float16,
    ``train_boxes`` (N, 4) and ``test_boxes`` (M, 4): the keys of a
    :class:`~ebmtrack.training.dimp.CachedFrameSets` item, what
    :class:`~ebmtrack.training.dimp.CachedDiMPTrainingModule` trains on. The N + M crops go
    through the backbone in one batch.

    Args:
        samples: e.g. a :class:`~ebmtrack.data.sampler.TrackingFrameSets` with a
            :class:`~ebmtrack.data.processing.DiMPProcessing`.
        backbone: the frozen backbone (eval mode).
        layer: the layer the classifier reads (the backbone's ``classifier_layer``).
        runtime: see :class:`FeatureStreamConfig`; a DiMP tracker runs its backbone in ``onnx``
            (float32) by default.
        threads: backbone threads per process.
    """

    def __init__(
        self,
        samples: Dataset,
        backbone: torch.nn.Module,
        layer: str,
        runtime: str = "onnx",
        threads: int = 1,
    ) -> None:
        super().__init__(samples, backbone, (layer,), runtime, threads)
        self.layer = layer

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        item = self.samples[index]
        missing = sorted({"train_images", "test_images", "train_boxes", "test_boxes"} - set(item))
        if missing:
            raise ValueError(f"samples[{index}] lacks {missing}")
        num_train = item["train_images"].shape[0]
        images = torch.cat([item["train_images"], item["test_images"]])
        feat = self._extractor()(images)[self.layer].to(torch.float16)
        return {
            "train_feat": feat[:num_train].contiguous(),
            "test_feat": feat[num_train:].contiguous(),
            "train_boxes": item["train_boxes"],
            "test_boxes": item["test_boxes"],
        }
