"""The named training presets (:data:`PRESETS`), one function each, by family:

- :mod:`~ebmtrack.training.presets.atom`: ``atom-r18`` (ATOM's recipe on ResNet-18 and the data
  sets given by ``--lasot``, ``--got10k``, ``--trackingnet``, ``--coco``) and ``synthetic-smoke``
  (the same pipeline at toy size on generated sequences; seconds).
- :mod:`~ebmtrack.training.presets.default_cpu`: ``default-cpu`` (the first shipped box head:
  frozen MobileNetV2, features cached once, the shared sequences minus :data:`DEFAULT_HOLDOUT`,
  still frames and textured generated sequences) and ``dimp-cpu`` (DiMP's classifier on the same
  data); they read test sequences, and their models no longer ship.
- :mod:`~ebmtrack.training.presets.pack`: ``pack-cpu`` and ``dimp-pack-cpu`` (the same two on the
  training pack), ``pack-stream`` (``pack-cpu``'s head on the whole pack, every sample a fresh
  pair with worker-made int8 features: the recipe of ``atom-iounet``'s shipped head) and
  ``dimp-pack-clips`` (DiMP's classifier on the whole pack: the recipe of the shipped one) and
  ``dimp-pack-stream`` (the same classifier with the sample engine: fresh sets of frames).

The presets' data lives below the data root (:mod:`~ebmtrack.training.presets.root`:
``$EBMTRACK_DATA``, else :data:`DEFAULT_DATA_ROOT`, the shared data beside the repository).
"""

from __future__ import annotations

from collections.abc import Callable

from ..experiment import Experiment
from .atom import atom_r18, synthetic_smoke
from .default_cpu import DEFAULT_HOLDOUT, default_cpu, dimp_cpu
from .pack import dimp_pack_clips, dimp_pack_cpu, dimp_pack_stream, pack_cpu, pack_stream
from .root import DATA_ROOT_ENV, DEFAULT_DATA_ROOT, data_path, data_root

PRESETS: dict[str, Callable[[], Experiment]] = {
    "atom-r18": atom_r18,
    "synthetic-smoke": synthetic_smoke,
    "default-cpu": default_cpu,
    "dimp-cpu": dimp_cpu,
    "pack-cpu": pack_cpu,
    "pack-stream": pack_stream,
    "dimp-pack-cpu": dimp_pack_cpu,
    "dimp-pack-clips": dimp_pack_clips,
    "dimp-pack-stream": dimp_pack_stream,
}
"""The function that makes each preset's config."""


def preset_config(name: str) -> Experiment:
    """The config of preset ``name`` (an :class:`~ebmtrack.training.experiment.IoUNetExperiment`
    or a :class:`~ebmtrack.training.experiment.DiMPExperiment`); ValueError listing the presets
    otherwise."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[name]()


__all__ = [
    "DATA_ROOT_ENV",
    "DEFAULT_DATA_ROOT",
    "DEFAULT_HOLDOUT",
    "PRESETS",
    "data_path",
    "data_root",
    "preset_config",
]
