"""A run's resume point: its latest checkpoint in one small file, to carry a long run to a fresh
machine.

A checkpoint (:mod:`ebmtrack.training.checkpoint`) is a folder of four files, and the optimizer's
moments make it three times the model. A resume point is one gzip-compressed safetensors file: the
model's tensors exact, every other large floating-point tensor (the optimizer's moments) in
bfloat16, the rest (steps, schedule, random states, the experiment's config) exact in its header.
Restored, it is a checkpoint the run continues from with ``--resume``: the same model, epoch, step,
sampler position (an epoch's samples follow from the seed and the epoch) and random states; the
moments rounded to bfloat16 (relative error <= 2**-8), so the continued run is not bit-identical
to one that never stopped.

A resume point larger than :data:`~ebmtrack.weights.packed.PART_BYTES` (4 MiB) is stored as its
parts, ``FILE.part1``, ``FILE.part2``, ... (the file's bytes cut in order, as the shipped
backbone weights are), so that it can be committed where a repository limits the size of one
file; restoring reads the file or its parts joined.

    write_resume_point("runs/pack-stream-nce", "resume/pack-stream-nce.safetensors.gz")
    restore_resume_point("resume/pack-stream-nce.safetensors.gz", "runs/pack-stream-nce")
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load, save

from ebmtrack.models.serialization import canonical_bytes
from ebmtrack.weights.packed import PART_BYTES, packed_bytes, packed_exists, write_parts

from .checkpoint import Checkpoint, latest_checkpoint, read_checkpoint, save_checkpoint

__all__ = ["FORMAT", "restore_resume_point", "write_resume_point"]

FORMAT = "ebmtrack-resume-point"
SMALL = 4096  # floating-point tensors with fewer elements are kept exact
_ROUNDED = torch.bfloat16


def _encode(value: Any, tensors: dict[str, torch.Tensor], where: str, exact: bool) -> Any:
    """``value`` as JSON with its tensors moved to ``tensors`` (named by their place)."""
    if isinstance(value, torch.Tensor):
        name = f"{where}#{len(tensors)}"
        tensor = value.detach().cpu().contiguous()
        if not exact and tensor.is_floating_point() and tensor.numel() >= SMALL:
            tensors[name] = tensor.to(_ROUNDED)
        else:
            tensors[name] = tensor
        return {"tensor": name, "dtype": str(tensor.dtype).removeprefix("torch.")}
    if isinstance(value, dict):
        items = [
            [_encode(k, tensors, where, exact), _encode(v, tensors, f"{where}.{k}", exact)]
            for k, v in value.items()
        ]
        return {"dict": items}
    if isinstance(value, list | tuple):
        key = "list" if isinstance(value, list) else "tuple"
        return {key: [_encode(v, tensors, f"{where}.{i}", exact) for i, v in enumerate(value)]}
    if value is None or isinstance(value, bool | int | float | str):
        return {"value": value}
    raise TypeError(f"cannot store a {type(value).__name__} in a resume point ({where})")


def _decode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    (kind, body), *_ = value.items()
    if kind == "tensor":
        return tensors[body].to(getattr(torch, value["dtype"]))
    if kind == "dict":
        return {_decode(k, tensors): _decode(v, tensors) for k, v in body}
    if kind == "list":
        return [_decode(v, tensors) for v in body]
    if kind == "tuple":
        return tuple(_decode(v, tensors) for v in body)
    if kind == "value":
        return body
    raise ValueError(f"unknown entry {kind!r}")


def write_resume_point(
    run_dir: str | Path, path: str | Path, part_bytes: int | None = None
) -> Checkpoint:
    """Write the latest checkpoint of the run in ``run_dir`` (and its ``config.yaml``) to
    ``path``, or to its parts of at most ``part_bytes`` (default 4 MiB) where it is larger
    (:func:`~ebmtrack.weights.packed.write_parts`: what an earlier call wrote there is
    replaced). Returns the checkpoint.

    Raises:
        ValueError: the run has no checkpoint yet.
    """
    from .experiment import CONFIG_FILE

    run_dir, path = Path(run_dir), Path(path)
    checkpoint = latest_checkpoint(run_dir / "checkpoints")
    if checkpoint is None:
        raise ValueError(f"{run_dir} holds no checkpoint yet (none of its epochs has finished)")
    model_state, training_state, rng_states = read_checkpoint(checkpoint)
    meta = json.loads((checkpoint.path / "meta.json").read_text())
    tensors: dict[str, torch.Tensor] = {}
    tree = {
        "model": _encode(model_state, tensors, "model", exact=True),
        "training_state": _encode(training_state, tensors, "state", exact=False),
        "rng_states": _encode(rng_states, tensors, "rng", exact=True),
    }
    header = {
        "format": FORMAT,
        "epoch": str(checkpoint.epoch),
        "global_step": str(checkpoint.global_step),
        "tree": json.dumps(tree),
        "experiment": json.dumps(meta["config"]),
        "config_file": (run_dir / CONFIG_FILE).read_text(),
    }
    data = gzip.compress(canonical_bytes(save(tensors, metadata=header)), mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_parts(path, data, part_bytes or PART_BYTES)
    return checkpoint


def restore_resume_point(path: str | Path, run_dir: str | Path) -> Checkpoint:
    """Make ``run_dir`` the run the resume point ``path`` was written from, at its checkpoint:
    ``config.yaml`` and ``checkpoints/epoch-NNNN``; ``ebmtrack train --out RUN_DIR --resume``
    continues it.

    Raises:
        ValueError: ``path`` is not a resume point, or ``run_dir`` already holds a run.
        FileNotFoundError: no file ``path`` and no parts of it.
    """
    from .experiment import CONFIG_FILE

    path, run_dir = Path(path), Path(run_dir)
    if not packed_exists(path):
        raise FileNotFoundError(f"no resume point {path} (nor its parts {path.name}.part1, ...)")
    try:
        data = gzip.decompress(packed_bytes(path))
        length = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + length]).get("__metadata__") or {}
        tensors = load(data)
    except Exception as err:  # gzip's, json's and safetensors' errors alike
        raise ValueError(f"{path} is not a resume point ({type(err).__name__}: {err})") from None
    if header.get("format") != FORMAT:
        raise ValueError(f"{path} is not a resume point (header format={header.get('format')!r})")
    if (run_dir / CONFIG_FILE).exists() or latest_checkpoint(run_dir / "checkpoints"):
        raise ValueError(f"{run_dir} already holds a run; restore into an empty folder")
    tree = json.loads(header["tree"])
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = save_checkpoint(
        run_dir / "checkpoints",
        int(header["epoch"]),
        int(header["global_step"]),
        _decode(tree["model"], tensors),
        _decode(tree["training_state"], tensors),
        _decode(tree["rng_states"], tensors),
        json.loads(header["experiment"]),
    )
    (run_dir / CONFIG_FILE).write_text(header["config_file"])
    return checkpoint
