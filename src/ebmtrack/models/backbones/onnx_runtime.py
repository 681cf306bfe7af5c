"""Run a frozen backbone with ONNX Runtime.

On small CPUs ORT runs the depthwise-convolution networks (MobileNetV2, EfficientNet-Lite) several
times faster than eager PyTorch (see docs/backbones.md). The model is exported once per input size
(H, W), with a dynamic batch dimension, and cached on disk under a name that contains a hash of the
weights, so a changed backbone never reuses a stale file. With ``int8=True`` that file is
quantized to int8 (:mod:`ebmtrack.models.backbones.int8`) with activation ranges measured
beforehand, and the int8 file is cached beside it.
"""

from __future__ import annotations

import copy
import io
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from ebmtrack.files import write_atomic
from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.backbones.int8 import ActivationRanges, find_ranges, quantize_backbone
from ebmtrack.models.backbones.onnx_files import default_cache_dir, state_dict_sha256

OPSET = 17
# (file, intra-op threads) -> session, shared by the OnnxBackbones of this process.
_SESSIONS: dict[tuple[str, int], object] = {}


class _LayerSelector(nn.Module):
    """Wraps a backbone so that ``forward(images)`` returns a tuple of the chosen layers."""

    def __init__(self, backbone: Backbone, layers: tuple[str, ...]) -> None:
        super().__init__()
        self.backbone = backbone
        self.layers = layers

    def forward(self, images: Tensor) -> tuple[Tensor, ...]:
        out = self.backbone(images, self.layers)
        return tuple(out[layer] for layer in self.layers)


class OnnxBackbone:
    """Same contract as :meth:`Backbone.forward`, run by ONNX Runtime on the CPU.

    Args:
        backbone: the (frozen) backbone to export; it is copied, so later changes to it are not
            seen.
        layers: the layers to return (default ``backbone.default_layers``); fixed at export.
        cache_dir: where exported files are kept (default :func:`default_cache_dir`,
            ``$XDG_CACHE_HOME/ebmtrack/onnx`` or ``~/.cache/ebmtrack/onnx``).
        num_threads: ORT intra-op threads (default ``torch.get_num_threads()``).
        int8: run the int8 model (:func:`~ebmtrack.models.backbones.int8.quantize_backbone`)
            built from the float export and the activation ranges of these weights.
        ranges: those ranges: an :class:`~ebmtrack.models.backbones.int8.ActivationRanges`, or
            a ranges table file to look the weights up in (default: the table shipped in
            :mod:`ebmtrack.weights`). Raises ValueError where none are for these weights.

    Calling it with ``images`` (B, 3, H, W), RGB in [0, 255], as a float numpy array or a torch
    tensor, returns ``{layer: features}`` of the same kind (torch tensors on the CPU).
    """

    def __init__(
        self,
        backbone: Backbone,
        layers: Iterable[str] | None = None,
        cache_dir: str | Path | None = None,
        num_threads: int | None = None,
        int8: bool = False,
        ranges=None,
    ) -> None:
        try:
            import onnxruntime
        except ImportError as err:
            raise ImportError(
                "OnnxBackbone needs onnxruntime and onnx: pip install 'ebmtrack[onnx]'"
            ) from err
        self._ort = onnxruntime
        self.name = backbone.name
        self.layers = backbone.check_layers(layers)
        self.feature_info = {layer: backbone.feature_info[layer] for layer in self.layers}
        self.cache_dir = Path(cache_dir if cache_dir is not None else default_cache_dir())
        self.cache_dir = self.cache_dir.expanduser()
        self.num_threads = num_threads or torch.get_num_threads()
        # A private copy: files exported later (new sizes) must hold the hashed weights.
        snapshot = copy.deepcopy(backbone).requires_grad_(False)
        self._export_module = _LayerSelector(snapshot, self.layers)
        # The ImageNet head is never exported: left out, its random initialisation (no
        # checkpoint of the feature layers carries it) would make every backbone a new file.
        self.weights_key = state_dict_sha256(snapshot, skip=backbone.classifier_prefixes)[:16]
        self._sessions: dict[tuple[int, int], object] = {}
        self.int8 = bool(int8)
        self.ranges = self._int8_ranges(ranges) if self.int8 else None
        if ranges is not None and not self.int8:
            raise ValueError("ranges are for the int8 model: pass int8=True with them")

    def _int8_ranges(self, ranges):
        if ranges is None or isinstance(ranges, str | Path):
            found = find_ranges(self.name, self.weights_key, ranges)
            if found is None:
                where = ranges if ranges is not None else "the table shipped in ebmtrack.weights"
                raise ValueError(
                    f"no int8 activation ranges for backbone {self.name!r} with weights key "
                    f"{self.weights_key} in {where}: these weights were never calibrated (ranges "
                    "ship for the ImageNet weights of mobilenetv2). Use backbone_runtime='onnx' "
                    "(float32), or measure them with python -m ebmtrack.training.int8_calibration"
                )
            return found
        if not isinstance(ranges, ActivationRanges):
            raise TypeError(f"ranges must be ActivationRanges or a path, got {type(ranges)}")
        if (ranges.backbone, ranges.weights_key) != (self.name, self.weights_key):
            raise ValueError(
                f"int8 ranges of {ranges.backbone} {ranges.weights_key} given to backbone "
                f"{self.name} with weights key {self.weights_key}"
            )
        return ranges

    def model_path(self, height: int, width: int) -> Path:
        """The cached ONNX file for inputs of size ``height`` x ``width`` (float32; the int8
        model is :meth:`int8_path`)."""
        layers = "+".join(self.layers).replace(".", "_")
        return self.cache_dir / f"{self.name}-{self.weights_key}-{layers}-{height}x{width}.onnx"

    def int8_path(self, height: int, width: int) -> Path:
        """The cached int8 file, named after the float file and the ranges' digest."""
        if self.ranges is None:
            raise ValueError("this OnnxBackbone runs float32 (int8=False)")
        float_path = self.model_path(height, width)
        return float_path.with_name(f"{float_path.stem}-int8-{self.ranges.digest}.onnx")

    def _export(self, path: Path, height: int, width: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        example = torch.zeros(1, 3, height, width)
        with warnings.catch_warnings(), torch.no_grad():
            # The TorchScript exporter is deprecated in favour of the dynamo one, which needs
            # onnxscript; it still exports these plain CNNs exactly.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                self._export_module,
                (example,),
                buffer,
                dynamo=False,
                input_names=["images"],
                output_names=list(self.layers),
                dynamic_axes={name: {0: "batch"} for name in ("images", *self.layers)},
                opset_version=OPSET,
            )
        # Concurrent processes never read half a file.
        write_atomic(path, lambda tmp: tmp.write_bytes(buffer.getvalue()))

    def session(self, height: int, width: int):
        """The ORT session for ``height`` x ``width`` inputs, exported on first use; one per
        file and thread count in a process (a tracker per sequence reuses it)."""
        key = (height, width)
        if key not in self._sessions:
            path = self.int8_path(height, width) if self.int8 else self.model_path(height, width)
            shared_key = (str(path), self.num_threads)
            if shared_key in _SESSIONS and path.is_file():
                self._sessions[key] = _SESSIONS[shared_key]
                return self._sessions[key]
            float_path = self.model_path(height, width)
            if not path.is_file() and not float_path.is_file():
                self._export(float_path, height, width)
            if not path.is_file():
                quantize_backbone(float_path, self.ranges, path)
            options = self._ort.SessionOptions()
            options.intra_op_num_threads = self.num_threads
            options.inter_op_num_threads = 1
            # Idle pool threads sleep: spinning ones take cores from the other threads of a
            # busy machine, including this process's own.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
            options.graph_optimization_level = self._ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if self.int8:  # not the notes on constants the QDQ fusion leaves unused
                options.log_severity_level = 3
            self._sessions[key] = _SESSIONS[shared_key] = self._ort.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
        return self._sessions[key]

    def __call__(self, images: np.ndarray | Tensor) -> dict[str, np.ndarray | Tensor]:
        as_torch = isinstance(images, Tensor)
        array = images.detach().cpu().numpy() if as_torch else np.asarray(images)
        if array.ndim != 4 or array.shape[1] != 3 or not np.issubdtype(array.dtype, np.floating):
            raise ValueError(
                f"images must be a float array (B, 3, H, W) with RGB values in [0, 255], "
                f"got dtype {array.dtype} and shape {array.shape}"
            )
        array = np.ascontiguousarray(array, dtype=np.float32)
        outputs = self.session(*array.shape[2:]).run(None, {"images": array})
        if as_torch:
            outputs = [torch.from_numpy(out) for out in outputs]
        return dict(zip(self.layers, outputs))
