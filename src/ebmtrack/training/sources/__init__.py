"""Where an experiment's training and validation sequences come from: one class per source,
chosen by ``data.source`` (:data:`SOURCES`), each registered beside its definition with its own
settings (:func:`~ebmtrack.training.sources.base.register_source`); every module of this package
is imported here, so a new source is one module.

- ``datasets`` (:class:`DatasetsSource`): LaSOT, GOT-10k, TrackingNet and COCO from the folders
  of ``data.roots`` (``--lasot``, ``--got10k``, ``--trackingnet``, ``--coco``).
- ``synthetic`` (:class:`SyntheticSource`): ``data.synthetic_sequences`` generated sequences.
- ``folder`` (:class:`FolderSource`): a folder of real sequences (``data.sequence_folder``) minus
  a held-out fold, their still frames and generated sequences textured with their frames.
- ``pack`` (:class:`PackSource`): a training pack (``data.pack``) of tracks, still images and
  clips, plus generated sequences with its objects as targets.

:class:`~ebmtrack.training.sources.config.DataConfig` is the ``data`` section of a config: the
source and that source's settings. :mod:`ebmtrack.training.sources.features` holds the routes by
which samples reach the module (images, the feature cache, the feature stream).
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import SOURCES, DataSource, SourceData, register_source
from .config import COMMON_SETTINGS, DataConfig, data_source, field_defaults

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

from .datasets import DatasetsSource  # noqa: E402 (registered above; named for the API)
from .folder import FolderSource  # noqa: E402
from .pack import PackSource  # noqa: E402
from .synthetic import SyntheticSource  # noqa: E402

__all__ = [
    "COMMON_SETTINGS",
    "SOURCES",
    "DataConfig",
    "DataSource",
    "DatasetsSource",
    "FolderSource",
    "PackSource",
    "SourceData",
    "SyntheticSource",
    "data_source",
    "field_defaults",
    "register_source",
]
