"""Atomic, resumable training checkpoints.

One checkpoint is a folder ``<run>/checkpoints/epoch-NNNN/`` holding

- ``model.safetensors``: the trained weights (frozen sub-modules left out),
- ``training_state.pt``: optimizer, learning-rate schedule and gradient-scaler state (plain
  tensors, numbers and dicts; read back with ``torch.load(weights_only=True)``),
- ``rng.pt``: every process's random-number-generator states, same format,
- ``meta.json``: the epoch, the global step and the experiment config.

It is written into a temporary folder and renamed into place, and only then does the file
``<run>/checkpoints/latest`` (itself replaced atomically) name it: a run killed at any moment
leaves the previous checkpoint intact and ``latest`` pointing at a complete one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

MODEL_FILE = "model.safetensors"
STATE_FILE = "training_state.pt"
RNG_FILE = "rng.pt"
META_FILE = "meta.json"
LATEST_FILE = "latest"


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint on disk: its folder, the number of finished epochs and optimizer steps."""

    path: Path
    epoch: int
    global_step: int


def trainable_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """``module.state_dict()`` without the sub-modules named in ``module.frozen_submodules``.

    A training module lists there what is fixed and rebuilt from elsewhere (e.g. a pretrained
    backbone), so that checkpoints hold only what training changes.
    """
    frozen = tuple(f"{name}." for name in getattr(module, "frozen_submodules", ()))
    return {
        key: value.detach().cpu().contiguous()
        for key, value in module.state_dict().items()
        if not key.startswith(frozen)
    }


def load_trainable_state_dict(module: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load what :func:`trainable_state_dict` saved; every non-frozen key must be present."""
    expected = trainable_state_dict(module)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"checkpoint does not match the model: missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}"
        )
    for key, value in state.items():
        if value.shape != expected[key].shape:
            raise ValueError(
                f"checkpoint tensor {key} has shape {tuple(value.shape)}, the model expects "
                f"{tuple(expected[key].shape)}"
            )
    module.load_state_dict(state, strict=False)


def capture_rng_state() -> dict[str, Any]:
    """This process's Python, NumPy, torch (and CUDA) generator states, as plain data."""
    # The legacy global generator is the state to save: it is what third-party code draws from.
    mt_name, mt_keys, mt_pos, has_gauss, cached = np.random.get_state()  # noqa: NPY002
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "name": mt_name,
            "keys": torch.from_numpy(mt_keys.astype(np.int64)),
            "pos": int(mt_pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy_state = state["numpy"]
    np.random.set_state(  # noqa: NPY002
        (
            numpy_state["name"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _fsync_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def save_checkpoint(
    checkpoint_dir: str | Path,
    epoch: int,
    global_step: int,
    model_state: dict[str, torch.Tensor],
    training_state: dict[str, Any],
    rng_states: list[dict[str, Any]],
    config: dict[str, Any],
    keep: int = 2,
) -> Checkpoint:
    """Write a checkpoint atomically and point ``latest`` at it; keep the ``keep`` newest.

    Args:
        checkpoint_dir: ``<run>/checkpoints``.
        epoch: finished epochs (1-based: the checkpoint after the first epoch is ``epoch-0001``).
        global_step: optimizer steps so far.
        model_state: tensors to store in ``model.safetensors``.
        training_state: optimizer / scheduler / scaler state dicts.
        rng_states: one :func:`capture_rng_state` per process, in rank order.
        config: the experiment config (plain data), stored in ``meta.json``.
        keep: how many epoch folders to keep.
    """
    root = Path(checkpoint_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"epoch-{epoch:04d}"
    tmp = root / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file(model_state, str(tmp / MODEL_FILE))
    torch.save(training_state, tmp / STATE_FILE)
    torch.save(rng_states, tmp / RNG_FILE)
    meta = {"epoch": epoch, "global_step": global_step, "config": config}
    _fsync_write(tmp / META_FILE, (json.dumps(meta, indent=2) + "\n").encode())
    if final.exists():  # a rerun of this epoch after a crash right after the rename
        shutil.rmtree(final)
    os.replace(tmp, final)
    pointer = root / f".{LATEST_FILE}.tmp-{os.getpid()}"
    _fsync_write(pointer, final.name.encode())
    os.replace(pointer, root / LATEST_FILE)
    kept = sorted(p for p in root.glob("epoch-*") if p.is_dir())
    for old in kept[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return Checkpoint(final, epoch, global_step)


def latest_checkpoint(checkpoint_dir: str | Path) -> Checkpoint | None:
    """The checkpoint ``latest`` names, or None when the run has none yet."""
    root = Path(checkpoint_dir)
    pointer = root / LATEST_FILE
    if not pointer.is_file():
        return None
    path = root / pointer.read_text().strip()
    if not (path / META_FILE).is_file():
        raise FileNotFoundError(f"{pointer} names {path.name}, which is incomplete or missing")
    return _checkpoint(path)


def checkpoint_at(checkpoint_dir: str | Path, epoch: int) -> Checkpoint | None:
    """The complete checkpoint after ``epoch`` epochs, or None where the run no longer (or not
    yet) keeps it."""
    path = Path(checkpoint_dir) / f"epoch-{epoch:04d}"
    return _checkpoint(path) if (path / META_FILE).is_file() else None


def _checkpoint(path: Path) -> Checkpoint:
    meta = json.loads((path / META_FILE).read_text())
    return Checkpoint(path, int(meta["epoch"]), int(meta["global_step"]))


def read_checkpoint(
    checkpoint: Checkpoint, device: torch.device | str = "cpu"
) -> tuple[dict[str, torch.Tensor], dict[str, Any], list[dict[str, Any]]]:
    """``(model_state, training_state, rng_states)`` of a checkpoint, read safely."""
    model_state = load_file(str(checkpoint.path / MODEL_FILE), device=str(device))
    training_state = torch.load(
        checkpoint.path / STATE_FILE, map_location=device, weights_only=True
    )
    rng_states = torch.load(checkpoint.path / RNG_FILE, map_location="cpu", weights_only=True)
    return model_state, training_state, rng_states


def read_checkpoint_config(checkpoint: Checkpoint) -> dict[str, Any]:
    """The experiment config stored with a checkpoint."""
    return json.loads((checkpoint.path / META_FILE).read_text())["config"]
