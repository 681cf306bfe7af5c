"""Where the presets' training data lives: one folder, the data root.

The presets read their data below it: ``sequences/`` (``default-cpu``, ``dimp-cpu``) and the
training pack ``train/`` (``pack-cpu``, ``pack-stream``, ``dimp-pack-cpu``). The root is the
environment variable :data:`DATA_ROOT_ENV` (``EBMTRACK_DATA``) where it is set, else
:data:`DEFAULT_DATA_ROOT` (``../shared/data``), relative to the working directory: run from the
repository root beside the shared data, or set ``EBMTRACK_DATA``. The root is read when a preset
is made, and kept as given (a relative root stays relative in ``config.yaml`` and in the feature
cache's key). One run's folders can still be changed with ``--set data.pack=DIR`` or
``--set data.sequence_folder=DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_ROOT_ENV = "EBMTRACK_DATA"
"""The environment variable that names the data root."""
DEFAULT_DATA_ROOT = "../shared/data"
"""The data root where :data:`DATA_ROOT_ENV` is not set (relative to the working directory)."""


def data_root() -> str:
    """The data root: ``$EBMTRACK_DATA``, else :data:`DEFAULT_DATA_ROOT`."""
    return os.environ.get(DATA_ROOT_ENV) or DEFAULT_DATA_ROOT


def data_path(*parts: str) -> str:
    """The path of ``parts`` below :func:`data_root`, as a config stores it."""
    return str(Path(data_root(), *parts))
