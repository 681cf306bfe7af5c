"""What produced a results file: the software's versions and, per tracker, its weights (sha256),
precision, backbone runtime and device. ``metrics.json`` of ``ebmtrack demo`` and of
``ebmtrack eval`` carry it, so that two numbers that differ can be traced to their cause."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import sys
from pathlib import Path

from ebmtrack.files import write_json_atomic

__all__ = ["environment", "record_provenance", "read_provenance", "tracker_provenance"]

_OPENCV = "opencv-contrib-python-headless"
_PACKAGES = ("ebmtrack", "torch", "onnxruntime", _OPENCV, "numpy")
_CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "neon")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    """Versions of Python and the packages that compute the numbers (torch, ONNX Runtime,
    OpenCV, numpy; those installed), the machine and its CPU's vector instructions that change
    speed or precision (bfloat16, int8)."""
    import cv2

    versions = {name: _version(name) for name in _PACKAGES if name != _OPENCV}
    versions = {name: version for name, version in versions.items() if version is not None}
    versions["opencv"] = cv2.__version__  # whichever OpenCV build is imported
    info = {"python": platform.python_version(), **versions, "machine": platform.machine()}
    if "torch" in sys.modules:
        info["torch_cuda"] = sys.modules["torch"].version.cuda
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        flags = next(
            (
                line.split(":", 1)[1].split()
                for line in cpuinfo.read_text().splitlines()
                if line.startswith(("flags", "Features"))
            ),
            [],
        )
        info["cpu_flags"] = [f for f in _CPU_FLAGS if f in flags]
    return info


def _file_sha256(path) -> str | None:
    path = Path(path)
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tracker_provenance(tracker) -> dict:
    """What a built tracker computes with: its class; for ours the backbone, the sha256 of its
    weights file, precision, backbone runtime, device and a sha256 of each head's weights (the
    state dict's names and values: the same weights give the same hash, whatever file held
    them); for the torch-free runtime (``runtime`` ``lite``) the backbone and the sha256 of the
    ONNX file it runs (with one backbone pass the siamese estimator's, ``nanotrack-v3``), the
    precision of the tracker's arithmetic and of its backbone (``int8`` for ``onnx-int8``),
    device ``cpu``, ONNX Runtime's intra-op ``threads`` and the sha256 of each file of its
    export; for OpenCV's DNN trackers the sha256 of their model files."""
    info = {"class": type(tracker).__name__}
    export = getattr(tracker, "export", None)
    if export is not None:  # the torch-free runtime: the export's files say what it computes
        files = export.manifest["files"]
        info["runtime"] = "lite"
        info["tracker"] = tracker.name
        if getattr(tracker, "one_pass", False):  # the siamese backbone's one pass, float32
            model = tracker.params["siamese_model"]
            name = export.manifest["siamese"]["models"][model]["backbone"]
            info["backbone"] = f"nanotrack-{model}"
            info["backbone_weights_sha256"] = files[name]["sha256"]
            info["backbone_precision"] = "float32"
            info["backbone_runtime"] = tracker.backbone_runtime
        else:
            backbone = export.manifest["backbone"]
            runtime = tracker.backbone_runtime
            info["backbone"] = backbone["name"]
            info["backbone_weights_sha256"] = files[backbone["files"][runtime]]["sha256"]
            info["backbone_precision"] = "int8" if runtime == "onnx-int8" else "float32"
            info["backbone_runtime"] = runtime
        info["precision"] = str(tracker.training_dtype)
        info["device"] = "cpu"  # ONNX Runtime's CPU provider
        info["threads"] = tracker.threads
        info["export_files_sha256"] = {
            name: entry["sha256"] for name, entry in sorted(files.items())
        }
        return info
    backbone = getattr(tracker, "backbone", None)
    params = getattr(tracker, "params", None)
    if getattr(params, "one_pass", False):  # the siamese estimator's backbone, not ours
        backbone = None
        info["backbone"] = f"nanotrack-{params.siamese_model}"
    if backbone is not None:
        info["backbone"] = getattr(backbone, "name", type(backbone).__name__)
        info["backbone_weights_sha256"] = getattr(backbone, "weights_sha256", None)
    if params is not None:
        dtype = getattr(tracker, "dtype", None)
        info["precision"] = (
            str(dtype).replace("torch.", "")
            if dtype is not None
            else getattr(params, "precision", None)
        )
        info["backbone_runtime"] = getattr(tracker, "backbone_runtime", None) or getattr(
            params, "backbone_runtime", None
        )
        info["device"] = str(getattr(tracker, "device", getattr(params, "device", "cpu")))
    heads = {}
    classifier = getattr(tracker, "classifier", None)
    modules = {"box_head": getattr(tracker, "box_head", None)}
    modules["classifier"] = getattr(classifier, "net", classifier)  # DiMP's learnt classifier
    for attr, module in modules.items():
        if module is not None and hasattr(module, "state_dict"):
            from ebmtrack.models.backbones.onnx_files import state_dict_sha256

            heads[attr] = state_dict_sha256(module)
    if heads:
        info["heads_state_sha256"] = heads
    files = getattr(tracker, "_model_files", None)
    if files:
        info["model_files_sha256"] = {k: _file_sha256(v) for k, v in sorted(files.items())}
    return info


def record_provenance(out_dir: str | Path, name: str, tracker_info: dict) -> dict:
    """Add ``tracker_info`` (:func:`tracker_provenance` of the tracker filed as ``name``) and
    this environment to ``OUT/results/NAME/provenance.json`` (a list: one entry per distinct
    setting that wrote results there, e.g. shares run on machines with other versions); returns
    the entry."""
    entry = {"tracker": tracker_info, "environment": environment()}
    path = Path(out_dir) / "results" / name / "provenance.json"
    entries = read_provenance(out_dir, name)
    if entry not in entries:
        write_json_atomic(path, [*entries, entry])
    return entry


def read_provenance(out_dir: str | Path, name: str) -> list[dict]:
    """The entries :func:`record_provenance` wrote for ``name`` (empty when none)."""
    path = Path(out_dir) / "results" / name / "provenance.json"
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text())
    except ValueError:
        return []
    return entries if isinstance(entries, list) else []
