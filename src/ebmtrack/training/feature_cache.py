"""Train the box head on a frozen backbone's features computed once, not once per step.

With a frozen backbone the features of a crop never change, so a fixed set of processed pairs can
be passed through the backbone once and stored (float16, in chunk files under the run folder);
every epoch then walks through the stored pairs again with *fresh* proposals (and, for the EBM
losses, fresh noise samples drawn by the loss itself). On a CPU this turns a step that costs 2-3.5
backbone passes into one that costs only the head (docs/training.md, "Throughput").

What is fixed and what is redrawn: the crops (their jitter, grayscale and brightness augmentation)
are drawn once, when the cache is built; the proposals and their IoU are redrawn for every visit
of a pair, seeded by ``(seed, index)``, so a resumed run sees the same proposals.

Cache layout (``folder``): ``chunk-00000.safetensors``, ... each holding ``chunk_size`` pairs as
``ref_feat0``, ``ref_feat1``, ``test_feat0``, ``test_feat1`` (N, C, H, W) float16 and
``ref_box``, ``test_box`` (N, 4) float32, with a ``key`` in the header that names the data, the
processing and the backbone it was made from, and the range of pairs it holds. A chunk is written
to a temporary file and renamed, so an interrupted build resumes at the first missing chunk; a
chunk whose key differs is rebuilt.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file
from torch import Tensor
from torch.utils.data import Dataset
from tqdm import tqdm

from ebmtrack.data.processing import AtomProcessing
from ebmtrack.files import write_atomic
from ebmtrack.ops.boxes import perturb_boxes

from .box_regression import BoxRegressionModule


@dataclass
class FeatureCacheConfig:
    """Whether and how a run caches the frozen backbone's features.

    Attributes:
        enabled: train on cached features (:class:`CachedPairs`) instead of images.
        train_pairs: distinct processed training pairs whose features are stored; set
            ``trainer.samples_per_epoch`` to it for one visit of each pair per epoch.
        folder: where the chunks go (default ``<run>/features``); several runs on the same data
            (e.g. one per loss) can share one folder.
        chunk_size: pairs per chunk file.
        batch_size: crops per backbone call while building.
    """

    enabled: bool = False
    train_pairs: int = 2048
    folder: str | None = None
    chunk_size: int = 256
    batch_size: int = 16

    def __post_init__(self) -> None:
        for name in ("train_pairs", "chunk_size", "batch_size"):
            if int(getattr(self, name)) != getattr(self, name) or getattr(self, name) < 1:
                raise ValueError(f"feature_cache.{name} must be an integer >= 1")


FEATURE_KEYS = ("ref_feat0", "ref_feat1", "test_feat0", "test_feat1")
BOX_KEYS = ("ref_box", "test_box")


def _chunk_path(folder: Path, index: int) -> Path:
    return folder / f"chunk-{index:05d}.safetensors"


def _chunk_key(path: Path) -> str | None:
    try:
        with safe_open(str(path), framework="pt") as handle:
            return (handle.metadata() or {}).get("key")
    except (SafetensorError, OSError):
        return None


@torch.no_grad()
def _encode_chunk(
    samples: Dataset, indices: range, module: BoxRegressionModule, batch_size: int
) -> dict[str, Tensor]:
    parts: dict[str, list[Tensor]] = {name: [] for name in FEATURE_KEYS + BOX_KEYS}
    for start in range(indices.start, indices.stop, batch_size):
        items = [samples[i] for i in range(start, min(start + batch_size, indices.stop))]
        for which in ("ref", "test"):
            images = torch.stack([item[f"{which}_image"] for item in items])
            for level, feat in enumerate(module.features(images)):
                parts[f"{which}_feat{level}"].append(feat.to(torch.float16).contiguous())
            parts[f"{which}_box"].append(torch.stack([item[f"{which}_box"] for item in items]))
    return {name: torch.cat(values).contiguous() for name, values in parts.items()}


def build_chunked_cache(
    num_samples: int,
    encode: Callable[[range], dict[str, Tensor]],
    folder: str | Path,
    key: str,
    chunk_size: int,
    unit: str = "pairs",
    progress: bool = True,
) -> dict[str, Tensor]:
    """Encode samples ``0 .. num_samples - 1`` in chunks of ``chunk_size`` and keep each chunk as
    one safetensors file (``chunk-00000.safetensors``, ...; written atomically, its metadata
    ``key`` = ``f"{key} {unit} {start}-{stop}"``). A chunk whose file holds the same key is read
    back instead of encoded, so an interrupted build resumes at the first missing chunk and a
    change of ``key`` rebuilds everything.

    Args:
        encode: ``indices -> {name: tensor}`` with the samples along dim 0.
        unit: the word in the key (``pairs`` for :func:`build_feature_cache`, whose keys must not
            change so that existing caches stay valid).

    Returns:
        Every chunk's tensors concatenated along dim 0.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    chunks = []
    bar = tqdm(total=num_samples, desc=f"features -> {folder.name}", disable=not progress)
    for index in range(math.ceil(num_samples / chunk_size)):
        path = _chunk_path(folder, index)
        indices = range(index * chunk_size, min((index + 1) * chunk_size, num_samples))
        chunk_key = f"{key} {unit} {indices.start}-{indices.stop}"
        if _chunk_key(path) != chunk_key:
            chunk = encode(indices)
            metadata = {"key": chunk_key}
            write_atomic(path, lambda tmp, c=chunk, m=metadata: save_file(c, str(tmp), metadata=m))
        chunks.append(load_file(str(path)))
        bar.update(len(indices))
    bar.close()
    return {name: torch.cat([chunk[name] for chunk in chunks]) for name in chunks[0]}


def build_feature_cache(
    samples: Dataset,
    module: BoxRegressionModule,
    folder: str | Path,
    key: str,
    chunk_size: int = 256,
    batch_size: int = 16,
    progress: bool = True,
) -> dict[str, Tensor]:
    """Pass every sample of ``samples`` through ``module``'s frozen backbone once; see the module
    docstring for the files. Existing chunks with the same ``key`` are reused.

    Args:
        samples: processed pairs (dicts with ``ref_image``, ``test_image`` (3, S, S), ``ref_box``,
            ``test_box`` (4,)), e.g. a :class:`~ebmtrack.data.sampler.TrackingPairs` with an
            :class:`~ebmtrack.data.processing.AtomProcessing`.
        module: supplies the backbone and its layers (:meth:`BoxRegressionModule.features`).
        folder: where the chunk files go.
        key: identifies how the samples were made; chunks with another key are rebuilt.
        chunk_size: pairs per file (the unit of resumption).
        batch_size: crops per backbone call.
        progress: show a tqdm bar.

    Returns:
        The whole cache: ``ref_feat0`` ... (N, C, H, W) float16, ``ref_box``, ``test_box`` (N, 4).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return build_chunked_cache(
        len(samples),
        lambda indices: _encode_chunk(samples, indices, module, batch_size),
        folder,
        key,
        chunk_size,
        progress=progress,
    )


class CachedPairs(Dataset):
    """``num_pairs`` training samples that cycle through a feature cache with fresh proposals.

    Samples ``k N .. (k + 1) N - 1`` visit the N cached pairs once each, in a random order
    seeded by ``(seed, k)``. Sample ``i`` gets proposals drawn around its test box by ATOM's
    recipe (``processing.num_proposals`` boxes of IoU above ``processing.proposal_min_iou``)
    from a generator seeded by ``(seed, i)``. Use it with the trainer's ``shuffle=False``.

    Args:
        cache: the output of :func:`build_feature_cache`.
        processing: supplies the proposal settings.
        num_pairs: length; ``epochs * samples_per_epoch`` for a training run.
        seed: seed of the proposals.
    """

    def __init__(
        self, cache: dict[str, Tensor], processing: AtomProcessing, num_pairs: int, seed: int = 0
    ):
        missing = sorted(set(FEATURE_KEYS + BOX_KEYS) - set(cache))
        if missing:
            raise ValueError(f"cache lacks {missing}; build it with build_feature_cache")
        if num_pairs < 1:
            raise ValueError(f"num_pairs must be >= 1, got {num_pairs}")
        self.cache = cache
        self.processing = processing
        self.num_pairs = int(num_pairs)
        self.seed = int(seed)
        self.num_cached = len(cache["ref_box"])

    def __len__(self) -> int:
        return self.num_pairs

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        if not 0 <= index < self.num_pairs:
            raise IndexError(f"pair index {index} out of range for {self.num_pairs}")
        # Every pass over the cache visits each pair once, in its own random order.
        visit, position = divmod(int(index), self.num_cached)
        order = torch.randperm(
            self.num_cached, generator=torch.Generator().manual_seed(self.seed * 1_000_003 + visit)
        )
        item = {name: self.cache[name][order[position]] for name in self.cache}
        seed = int(np.random.default_rng([self.seed, int(index)]).integers(2**63))
        proposals, iou = perturb_boxes(
            item["test_box"],
            self.processing.num_proposals,
            self.processing.proposal_min_iou,
            self.processing.proposal_sigma_factors,
            generator=torch.Generator().manual_seed(seed),
        )
        return {**item, "proposals": proposals, "proposal_iou": 2 * iou - 1}


class CachedBoxRegressionModule(BoxRegressionModule):
    """:class:`BoxRegressionModule` that reads the backbone's features from a :class:`CachedPairs`
    batch (``ref_feat0`` ... float16) instead of computing them from images."""

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        ref = [batch[f"ref_feat{level}"].float() for level in range(2)]
        test = [batch[f"test_feat{level}"].float() for level in range(2)]
        return self.head_loss(ref, test, batch)
