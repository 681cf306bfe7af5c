"""Export a tracker for the torch-free runtime (:mod:`ebmtrack.lite`): ``ebmtrack export``.

The tracker is built as ``load_tracker`` builds it (its registered name and options), then read
from outside: its parameters, its backbone (exported to ONNX for the layers the tracker reads,
in float32 and, where activation ranges ship for its weights, in int8: the files the torch
tracker itself runs with ONNX Runtime), its classifier's layer and stride, its box head (the
reference and test branches' convolutions as ONNX graphs, the predictor's folded layers as
arrays, :mod:`ebmtrack.lite.head`) and its confidence calibrator. A tracker of one backbone pass
(``classifier_features`` ``auto`` or ``siamese`` with box mode ``siamese``), which builds no
backbone, is exported with the backbone of its two-pass twin all the same, so that the runtime
runs either (``params.json`` says which).
:mod:`ebmtrack.lite.files` describes the folder; the manifest holds every file's sha256 and the
versions it was exported with.

The folder is written beside its destination and moved there when complete. An existing
destination is replaced only when it is an earlier export and holds nothing else
(:func:`ebmtrack.lite.files.is_export`); anything else is refused, so no file of the user's is
ever lost.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import os
import platform
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ebmtrack.lite.files import FORMAT, MANIFEST, PARAMS, VERSION, file_sha256, is_export
from ebmtrack.lite.params import BOX_MODES, SIAMESE_MODES
from ebmtrack.lite.siamese import SIAMESE_MODELS
from ebmtrack.models.backbones.onnx_files import state_dict_sha256
from ebmtrack.models.backbones.onnx_runtime import OPSET, OnnxBackbone
from ebmtrack.models.backbones.runtime import int8_available
from ebmtrack.tracking.atom import AtomTracker
from ebmtrack.tracking.atom.longterm import AtomLTTracker
from ebmtrack.weights import siamese_networks

__all__ = ["EXPORTABLE", "check_destination", "export_tracker"]

EXPORTABLE = "atom and its box modes (atom, atom-iounet, atom-polished), and atom-lt"
CALIBRATOR = "calibrator.json"
BACKBONE_FILES = {"onnx": "backbone-float32.onnx", "onnx-int8": "backbone-int8.onnx"}
HEAD_FILES = {
    "reference": "head-reference.onnx",
    "modulation": "head-modulation.onnx",
    "test": "head-test.onnx",
    "predictor": "head-predictor.npz",
}


def check_destination(out: Path) -> None:
    """Refuse (ValueError) a destination that is a file, or a folder that holds anything but an
    earlier export."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not is_export(out):
        raise ValueError(
            f"--out {out}: a folder that is not empty and not an earlier export (files of "
            "yours are never replaced): choose a new or empty folder"
        )


def _versions() -> dict[str, str]:
    import cv2
    import onnx
    import onnxruntime

    from ebmtrack import __version__

    return {
        "ebmtrack": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "opencv": cv2.__version__,
    }


def _json_value(value):
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    return value


def _onnx(module: nn.Module, inputs: tuple, names: list[str], outputs: list[str], path: Path):
    """``module`` exported to ``path`` with the spatial axes of every 4-D tensor dynamic."""
    dynamic = {}
    for name, example in zip(names, inputs, strict=True):
        if example.dim() == 4:
            dynamic[name] = {2: f"{name}_height", 3: f"{name}_width"}
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notes
        torch.onnx.export(
            module.eval(),
            inputs,
            buffer,
            dynamo=False,
            input_names=names,
            output_names=outputs,
            dynamic_axes=dynamic,
            opset_version=OPSET,
        )
    path.write_bytes(buffer.getvalue())


class _Reference(nn.Module):
    """The reference branch's convolutions: (fine, coarse) -> the maps it pools."""

    def __init__(self, net) -> None:
        super().__init__()
        self.fine, self.coarse = net.ref_conv_fine, net.ref_conv_coarse

    def forward(self, fine, coarse):
        return self.fine(fine), self.coarse(coarse)


class _Modulation(nn.Module):
    """The pooled reference maps -> the two modulation vectors."""

    def __init__(self, net) -> None:
        super().__init__()
        self.pool_conv = net.ref_pool_conv_fine
        self.fine, self.coarse = net.ref_modulation_fine, net.ref_modulation_coarse

    def forward(self, pooled_fine, pooled_coarse):
        joint = torch.cat([self.pool_conv(pooled_fine), pooled_coarse], dim=1)
        return self.fine(joint).flatten(1), self.coarse(joint).flatten(1)


class _Test(nn.Module):
    """The test branch's convolutions on a window of the features."""

    def __init__(self, net) -> None:
        super().__init__()
        self.fine, self.coarse = net.test_conv_fine, net.test_conv_coarse

    def forward(self, fine, coarse):
        return self.fine(fine), self.coarse(coarse)


def _export_head(tracker: AtomTracker, folder: Path) -> dict:
    head = tracker.box_estimator.head
    net, folded = head.net, head.folded
    config = net.config
    size = tracker.params.search_size
    fine_stride, coarse_stride = config.strides
    fine_channels, coarse_channels = config.input_channels
    fine = torch.zeros(1, fine_channels, size // fine_stride, size // fine_stride)
    coarse = torch.zeros(1, coarse_channels, size // coarse_stride, size // coarse_stride)
    _onnx(
        _Reference(net),
        (fine, coarse),
        ["fine", "coarse"],
        ["reference_fine", "reference_coarse"],
        folder / HEAD_FILES["reference"],
    )
    with torch.no_grad():
        maps = _Reference(net).eval()(fine, coarse)
    pooled = (torch.zeros(1, maps[0].shape[1], 3, 3), torch.zeros(1, maps[1].shape[1], 1, 1))
    _onnx(
        _Modulation(net),
        pooled,
        ["pooled_fine", "pooled_coarse"],
        ["modulation_fine", "modulation_coarse"],
        folder / HEAD_FILES["modulation"],
    )
    _onnx(
        _Test(folded),
        (fine, coarse),
        ["fine", "coarse"],
        ["test_fine", "test_coarse"],
        folder / HEAD_FILES["test"],
    )
    blocks = (folded.predictor_fine, folded.predictor_coarse)
    out = folded.iou_predictor
    arrays = {
        "fine_weight": blocks[0][1].weight,
        "fine_bias": blocks[0][1].bias,
        "coarse_weight": blocks[1][1].weight,
        "coarse_bias": blocks[1][1].bias,
        "out_weight": out.weight[0],
        "out_bias": out.bias,
    }
    with open(folder / HEAD_FILES["predictor"], "wb") as handle:
        np.savez(handle, **{k: v.detach().cpu().float().numpy() for k, v in arrays.items()})
    test_pools = (
        round((blocks[0][1].in_features / config.pred_input_dim[0]) ** 0.5),
        round((blocks[1][1].in_features / config.pred_input_dim[1]) ** 0.5),
    )
    return {
        "layers": list(head.layers),
        "strides": list(config.strides),
        "pools": list(test_pools),
        "files": dict(HEAD_FILES),
        "weights_sha256": state_dict_sha256(net),
    }


def _export_siamese(folder: Path) -> dict:
    """The shipped siamese networks of every ``siamese_model`` (NanoTrack v2's and v3's,
    Apache-2.0), copied with their licence: ``{"models": {model: {"backbone": file, "head":
    file}}, "licence": file}``, so that the export runs either."""
    models = {}
    for model in SIAMESE_MODELS:
        backbone, head = siamese_networks(model)
        for source in (backbone, head):
            shutil.copyfile(source, folder / source.name)
        models[model] = {"backbone": backbone.name, "head": head.name}
    licence = backbone.with_name("LICENSE-NanoTrack.txt")
    shutil.copyfile(licence, folder / licence.name)
    return {"models": models, "licence": licence.name}


def _export_backbone(tracker: AtomTracker, folder: Path, cache: Path) -> dict:
    size = tracker.params.search_size
    layers = tracker.search.layers
    backbone = tracker.backbone
    files = {}
    float_model = OnnxBackbone(backbone, layers=layers, cache_dir=cache, num_threads=1)
    float_model.session(size, size)
    shutil.copyfile(float_model.model_path(size, size), folder / BACKBONE_FILES["onnx"])
    files["onnx"] = BACKBONE_FILES["onnx"]
    if int8_available(backbone, cache_dir=cache):
        int8_model = OnnxBackbone(
            backbone, layers=layers, cache_dir=cache, num_threads=1, int8=True
        )
        int8_model.session(size, size)
        shutil.copyfile(int8_model.int8_path(size, size), folder / BACKBONE_FILES["onnx-int8"])
        files["onnx-int8"] = BACKBONE_FILES["onnx-int8"]
    used = tracker.backbone_runtime
    return {
        "name": backbone.name,
        "weights_key": float_model.weights_key,
        "layers": list(layers),
        "search_size": size,
        "files": files,
        # What the lite runtime runs by default: the torch tracker's own file; float32 where
        # the torch tracker ran the eager backbone.
        "runtime": used if used in files else "onnx",
        "torch_runtime": used,
        "torch_dtype": str(tracker.dtype).replace("torch.", ""),
    }


def export_tracker(name: str, out: str | Path, **options) -> Path:
    """Write the export of tracker ``name`` (built with ``options``) to the folder ``out``.

    Raises:
        ValueError: a tracker the runtime cannot run (it runs :data:`EXPORTABLE`), a box mode
            it does not know, a CUDA device, or a destination holding anything but an earlier
            export.
    """
    from ebmtrack.tracking.registry import create_tracker

    out = Path(out)
    check_destination(out)
    tracker = create_tracker(name, **options)
    if type(tracker) not in (AtomTracker, AtomLTTracker):
        raise ValueError(f"tracker {name!r} cannot be exported: the lite runtime runs {EXPORTABLE}")
    params = tracker.params
    if params.box_mode not in BOX_MODES:
        raise ValueError(
            f"box_mode {params.box_mode!r} is not one the lite runtime runs "
            f"({', '.join(BOX_MODES)})"
        )
    if params.box_climb != "iou":
        raise ValueError(
            f"box_climb {params.box_climb!r} is not one the lite runtime runs (iou): export with"
            " box_climb=iou"
        )
    if params.device != "cpu":
        raise ValueError(f"device {params.device!r}: the export runs on the CPU, pass device=cpu")
    # One backbone pass runs no backbone of ours; its export holds the backbone all the same
    # (the tracker's with classifier_features=backbone), so that the runtime can run either.
    two_pass = tracker
    if params.one_pass:
        two_pass = create_tracker(name, **{**options, "classifier_features": "backbone"})
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        staging = work / "export"
        staging.mkdir()
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "tracker": name,
            "options": {k: str(v) for k, v in sorted(options.items())},
            "exported": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "versions": _versions(),
            "backbone": _export_backbone(two_pass, staging, work / "cache"),
            "classifier": {
                "layer": two_pass.classifier.layer,
                "stride": two_pass.classifier.stride,
                "channels": two_pass.classifier.config.in_channels,
            },
            "head": None,
            "calibrator": None,
        }
        if tracker.box_estimator.head is not None:
            manifest["head"] = _export_head(tracker, staging)
        if params.box_mode in SIAMESE_MODES:
            manifest["siamese"] = _export_siamese(staging)
        values = {f.name: _json_value(getattr(params, f.name)) for f in dataclasses.fields(params)}
        (staging / PARAMS).write_text(json.dumps(values, indent=1, sort_keys=True) + "\n")
        calibrator = tracker.calibrator
        if calibrator is not None:
            entry = _json_value(dataclasses.asdict(calibrator))
            (staging / CALIBRATOR).write_text(json.dumps(entry, indent=1, sort_keys=True) + "\n")
            manifest["calibrator"] = CALIBRATOR
        manifest["files"] = {
            path.name: {"sha256": file_sha256(path), "bytes": path.stat().st_size}
            for path in sorted(staging.iterdir())
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        _replace(staging, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _replace(staging: Path, out: Path) -> None:
    """Move the finished ``staging`` folder to ``out``: an earlier export there is removed
    first (checked again: only its own files), an empty folder replaced."""
    check_destination(out)
    if out.is_dir():
        for entry in out.iterdir():  # an earlier export's files only (checked above)
            entry.unlink()
        out.rmdir()
    os.replace(staging, out)


def copy_state(source: AtomTracker, target) -> None:
    """Put a torch tracker's state between frames into a lite tracker of its export (centre,
    size, frame count, sample memory, classifier weights, the box head's modulation, the siamese
    template, the confidence's running peak), so that the next ``track`` of both starts from the
    same state: how a check compares the two frame by frame without the float32 rounding of
    earlier frames (docs/results/runtime.md)."""
    from ebmtrack.lite.memory import SampleMemory

    state = source.state
    if state is None:
        raise ValueError("the torch tracker is not initialised")
    lite_state = target._state
    if lite_state is None:
        raise ValueError("the lite tracker is not initialised")
    lite_state.center = state.center.copy()
    lite_state.size = state.size.copy()
    lite_state.min_size = state.min_size.copy()
    lite_state.frame_index = state.frame_index
    memory = SampleMemory.__new__(SampleMemory)
    memory.num_init = state.memory.num_init
    memory.init_minimum_weight = state.memory.init_minimum_weight
    memory.samples = state.memory.samples.detach().cpu().numpy().copy()
    memory.labels = state.memory.labels.detach().cpu().numpy().copy()
    memory.weights = state.memory.weights.detach().cpu().numpy().copy()
    memory.num_stored = state.memory.num_stored
    memory._previous_slot = state.memory._previous_slot
    lite_state.memory = memory
    lite_state.projection = state.model.projection.detach().cpu().numpy()[:, :, 0, 0].copy()
    lite_state.filter = state.model.filter.detach().cpu().numpy()[0].copy()
    if state.modulation is not None:
        lite_state.modulation = [m.detach().cpu().numpy()[0].copy() for m in state.modulation]
    if state.box_model is not None:  # the siamese estimator's template features
        lite_state.template = state.box_model.copy()
    target.confidence._peak_level = source.confidence_estimator._peak_level
    if lite_state.lost is not None and state.mode is not None:  # the long-term mode's state
        lite_state.lost.lost, lite_state.lost.misses = state.mode.lost, state.mode.misses
        lite_state.lost.search.frames = state.mode.search.frames
