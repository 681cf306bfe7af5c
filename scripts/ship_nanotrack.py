"""Writes NanoTrack's networks (v2 and v3) into the package, for the siamese box estimator
(:mod:`ebmtrack.lite.siamese`), from the peer files (Apache-2.0; provenance and licence in
``src/ebmtrack/weights/README.md`` and ``LICENSE-NanoTrack.txt``).

- v2 (OpenCV's peer files): ``nanotrack_backbone.onnx`` from ``nanotrack_backbone_sim.onnx``,
  ``nanotrack_head.onnx`` = ``nanotrack_head_sim.onnx``.
- v3 (``nanotrack-v3/`` of the peer files): ``nanotrack3_backbone.onnx`` from its
  ``nanotrack_backbone.onnx``, ``nanotrack3_head.onnx`` = its ``nanotrack_head.onnx``.

Each backbone gets its input's height and width made free (the files declare 255 x 255, the
search crop; the template crop is 127 x 127), and so its output's; nothing else changes: the
same nodes and initializers. Each head is copied byte for byte.

Every source is checked against its sha256 first. Prints the written files' sha256 for the
weights table. Usage::

    python scripts/ship_nanotrack.py --peers ../shared/peers --dest src/ebmtrack/weights
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from pathlib import Path

import onnx

# version -> ((source backbone, sha256), (source head, sha256), written backbone, written head),
# the sources relative to the peer files' folder
SOURCES = {
    "v2": (
        (
            "nanotrack_backbone_sim.onnx",
            "530bdd0cd00f19afab79a863e71ba71e3312395a5dc9151af675082bdaaa2fc4",
        ),
        (
            "nanotrack_head_sim.onnx",
            "0d8c0637be849f092cc7236cae02e55c8b9455ebe37ba50601d6115db4247cd9",
        ),
        "nanotrack_backbone.onnx",
        "nanotrack_head.onnx",
    ),
    "v3": (
        (
            "nanotrack-v3/nanotrack_backbone.onnx",
            "50be1320abf9384fd3479ea829f95e244cf3f3838190c5ab60c750fb8c1ce828",
        ),
        (
            "nanotrack-v3/nanotrack_head.onnx",
            "75357903be3f4817c965af16cb5a11fd32b1467f597a408405a98635ac63f61d",
        ),
        "nanotrack3_backbone.onnx",
        "nanotrack3_head.onnx",
    ),
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def free_backbone(source: Path, dest: Path) -> None:
    """``source``'s backbone with its input's and output's height and width free."""
    model = onnx.load(str(source))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for dim, name in zip(dims[2:], ("height", "width"), strict=True):
        dim.ClearField("dim_value")
        dim.dim_param = name
    for output in model.graph.output:
        for dim, name in zip(
            output.type.tensor_type.shape.dim[2:], ("cells_y", "cells_x"), strict=True
        ):
            dim.ClearField("dim_value")
            dim.dim_param = name
    model.graph.ClearField("value_info")  # shapes inferred for 255 x 255 no longer hold
    onnx.checker.check_model(model)
    onnx.save(model, str(dest))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=Path, required=True, help="folder of the peer files")
    parser.add_argument("--dest", type=Path, required=True, help="the package's weights folder")
    args = parser.parse_args()
    for (backbone, backbone_sha), (head, head_sha), _, _ in SOURCES.values():
        for name, digest in ((backbone, backbone_sha), (head, head_sha)):
            if not (args.peers / name).is_file() or sha256(args.peers / name) != digest:
                raise SystemExit(f"ship_nanotrack: {args.peers / name} is not the expected file")
    for (backbone, _), (head, _), backbone_out, head_out in SOURCES.values():
        free_backbone(args.peers / backbone, args.dest / backbone_out)
        shutil.copyfile(args.peers / head, args.dest / head_out)
        for path in (args.dest / backbone_out, args.dest / head_out):
            print(f"{path.name}  {path.stat().st_size} bytes  sha256 {sha256(path)}")


if __name__ == "__main__":
    main()
