"""Exact float32 weights in fewer bytes: a safetensors file of byte planes, gzip-compressed.

A float32 tensor is stored as a uint8 tensor (4, N), plane k holding byte k of every value
(little-endian). The sign-and-exponent planes repeat a lot, so deflate shrinks the file to about
85 % of the plain float32 one, with every value unchanged to the bit. The shapes are in the
safetensors metadata (one JSON entry); nothing is unpickled; the same tensors give the same
bytes. ``read_packed`` returns plain float32 tensors.

A packed file may also be stored split into parts of at most :data:`PART_BYTES`
(``NAME.safetensors.gz.part1``, ``.part2``, ...: the file's bytes cut in order, as ``split``
does; the shipped copies are, so that no file of the package is large): :func:`packed_bytes`
and :func:`packed_exists` read a path that way when the whole file is not there, and the file's
sha256 is the sha256 of the joined parts.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

__all__ = [
    "PACKED_SUFFIX",
    "PART_BYTES",
    "packed_bytes",
    "packed_exists",
    "read_packed",
    "split_packed",
    "stored_files",
    "write_packed",
    "write_parts",
]

PACKED_SUFFIX = ".safetensors.gz"
PART_BYTES = 4 << 20  # 4 MiB
_FORMAT = "float32-byte-planes"
_KEY = "ebmtrack.packed"


def write_packed(state: dict, path: str | Path, metadata: dict[str, str] | None = None) -> Path:
    """Write float32 tensors ``{name: Tensor}`` to ``path`` (ending in :data:`PACKED_SUFFIX`),
    reproducibly (no time stamp). Raises ValueError for a tensor that is not float32."""
    import numpy as np
    import torch
    from safetensors.torch import save

    planes, shapes = {}, {}
    for name, tensor in state.items():
        if tensor.dtype != torch.float32:
            raise ValueError(f"{name}: only float32 tensors are packed, got {tensor.dtype}")
        values = np.ascontiguousarray(tensor.detach().cpu().numpy(), dtype="<f4").reshape(-1)
        planes[name] = torch.from_numpy(values.view(np.uint8).reshape(-1, 4).T.copy())
        shapes[name] = ",".join(str(d) for d in tensor.shape)
    # One metadata entry: safetensors keeps metadata in a hash map, whose order varies.
    meta = {**(metadata or {}), "format": _FORMAT, "shapes": shapes}
    text = json.dumps(meta, sort_keys=True)
    path = Path(path)
    path.write_bytes(gzip.compress(save(planes, metadata={_KEY: text}), compresslevel=9, mtime=0))
    return path


def stored_files(path: str | Path) -> list[Path]:
    """``path`` itself where it is a file, else its parts in order (none if there are none)."""
    path = Path(path)
    if path.is_file():
        return [path]
    parts, index = [], 1
    while (part := _part(path, index)).is_file():
        parts.append(part)
        index += 1
    return parts


def packed_exists(path: str | Path) -> bool:
    """Whether ``path`` is a file or stored as parts."""
    return bool(stored_files(path))


def packed_bytes(path: str | Path) -> bytes:
    """The bytes of ``path``, or of its parts joined; FileNotFoundError if neither exists."""
    parts = stored_files(path)
    if not parts:
        raise FileNotFoundError(f"weights file not found: {path}")
    return b"".join(part.read_bytes() for part in parts)


def split_packed(path: str | Path, part_bytes: int = PART_BYTES) -> list[Path]:
    """Replace the file ``path`` by its parts of at most ``part_bytes`` where it is larger (see
    the module docstring); returns the files that hold it now."""
    path = Path(path)
    return write_parts(path, path.read_bytes(), part_bytes)


def write_parts(path: str | Path, data: bytes, part_bytes: int = PART_BYTES) -> list[Path]:
    """Write ``data`` to ``path``, or to its parts of at most ``part_bytes`` where it is
    larger, replacing what an earlier call left there (a whole file, or parts beyond the new
    count). The new bytes are written under temporary names first, then renamed. Returns the
    files written, in order."""
    path = Path(path)
    pieces = [data[i : i + part_bytes] for i in range(0, len(data), part_bytes)] or [b""]
    split = len(pieces) > 1
    names = [_part(path, k) for k in range(1, len(pieces) + 1)] if split else [path]
    for name, piece in zip(names, pieces):
        name.with_name(f".{name.name}.partial").write_bytes(piece)
    stale = [path] if split else []
    index = len(names) + 1 if split else 1
    while _part(path, index).exists():
        stale.append(_part(path, index))
        index += 1
    for name in stale:
        name.unlink(missing_ok=True)
    for name in names:
        name.with_name(f".{name.name}.partial").replace(name)
    return names


def _part(path: Path, index: int) -> Path:
    return path.with_name(f"{path.name}.part{index}")


def read_packed(path: str | Path) -> dict:
    """The float32 tensors ``{name: Tensor}`` of a file :func:`write_packed` wrote; ValueError
    for a file of another format."""
    import numpy as np
    import torch
    from safetensors.torch import load

    path = Path(path)
    try:
        data = gzip.decompress(packed_bytes(path))
        state = load(data)
    except Exception as err:  # gzip, safetensors and OS errors share no base class
        raise ValueError(f"weights file {path} is not a packed safetensors file: {err}") from err
    try:
        header = json.loads(_metadata(data).get(_KEY, "{}"))
    except ValueError:
        header = {}
    if header.get("format") != _FORMAT:
        raise ValueError(f"weights file {path} is not in the {_FORMAT} format")
    if sys.byteorder != "little":
        raise ValueError("packed weights are read on little-endian machines only")
    out = {}
    for name, planes in state.items():
        shape = header.get("shapes", {}).get(name)
        if planes.dtype != torch.uint8 or planes.dim() != 2 or planes.shape[0] != 4 or not shape:
            raise ValueError(f"weights file {path}: {name} is not a float32 byte-plane tensor")
        values = np.ascontiguousarray(planes.numpy().T).view("<f4").reshape(-1)
        dims = tuple(int(d) for d in str(shape).split(","))
        out[name] = torch.from_numpy(values.copy()).reshape(dims)
    return out


def _metadata(data: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file's bytes (its JSON header)."""
    size = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + size]).get("__metadata__", {}) or {}
