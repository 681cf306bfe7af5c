"""Writes NanoTrack v2's networks into the package, for the siamese box estimator
(:mod:`ebmtrack.lite.siamese`), from OpenCV's peer files (Apache-2.0; provenance and licence in
``src/ebmtrack/weights/README.md`` and ``LICENSE-NanoTrack.txt``).

- ``nanotrack_backbone.onnx``: ``nanotrack_backbone_sim.onnx`` with its input's height and width
  made free (the file declares 255 x 255; the template crop is 127 x 127). Nothing else changes:
  the same nodes and initializers.
- ``nanotrack_head.onnx``: ``nanotrack_head_sim.onnx`` byte for byte.

Both sources are checked against their sha256 first. Prints the written files' sha256 for the
weights table. Usage::

    python scripts/ship_nanotrack.py --peers ../shared/peers --dest src/ebmtrack/weights
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from pathlib import Path

import onnx

SOURCES = {
    "nanotrack_backbone_sim.onnx": (
        "530bdd0cd00f19afab79a863e71ba71e3312395a5dc9151af675082bdaaa2fc4"
    ),
    "nanotrack_head_sim.onnx": "0d8c0637be849f092cc7236cae02e55c8b9455ebe37ba50601d6115db4247cd9",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=Path, required=True, help="folder of OpenCV's peer files")
    parser.add_argument("--dest", type=Path, required=True, help="the package's weights folder")
    args = parser.parse_args()
    for name, digest in SOURCES.items():
        if sha256(args.peers / name) != digest:
            raise SystemExit(f"ship_nanotrack: {args.peers / name} is not the expected file")
    model = onnx.load(str(args.peers / "nanotrack_backbone_sim.onnx"))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for dim, name in zip(dims[2:], ("height", "width"), strict=True):
        dim.ClearField("dim_value")
        dim.dim_param = name
    for output in model.graph.output:
        for dim, name in zip(output.type.tensor_type.shape.dim[2:], ("cells_y", "cells_x"),
                             strict=True):
            dim.ClearField("dim_value")
            dim.dim_param = name
    model.graph.ClearField("value_info")  # shapes inferred for 255 x 255 no longer hold
    onnx.checker.check_model(model)
    backbone = args.dest / "nanotrack_backbone.onnx"
    onnx.save(model, str(backbone))
    head = args.dest / "nanotrack_head.onnx"
    shutil.copyfile(args.peers / "nanotrack_head_sim.onnx", head)
    for path in (backbone, head):
        print(f"{path.name}  {path.stat().st_size} bytes  sha256 {sha256(path)}")


if __name__ == "__main__":
    main()
