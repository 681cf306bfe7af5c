"""Int8 static quantization of a frozen backbone for ONNX Runtime on the CPU
(``backbone_runtime="onnx-int8"``).

The float32 ONNX file that :class:`~ebmtrack.models.backbones.onnx_runtime.OnnxBackbone` exports
is quantized with ONNX Runtime's ``quantize_static``: QDQ format, int8 weights per output channel,
uint8 activations, the activations' ranges (min and max, per tensor) measured beforehand. The
ranges are the only thing that needs data: developers measure them once on search-region crops of
the training pack and ship them as a small JSON table (``ebmtrack/weights/int8_ranges.json``),
one entry per backbone weights (keyed by :attr:`OnnxBackbone.weights_key`, the hash of the
feature layers' weights); every user builds the int8 file locally from the float export and the
table, once per weights, layers and input size, into the ONNX cache folder::

    python -m ebmtrack.training.int8_calibration --pack ../shared/data/train \\
        --out src/ebmtrack/weights/int8_ranges.json

Ranges are keyed by the node that produces each tensor (``"<node name>:<output index>"``, or
``"input:<name>"`` for a graph input), not by the tensor's name: an export with other output
layers renames the output tensors but not the nodes, so one table serves every layer subset of
the calibrated graph. Building refuses a table that lacks a tensor of the model.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import math
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ebmtrack.files import write_atomic, write_json_atomic

__all__ = [
    "RANGES_FORMAT",
    "ActivationRanges",
    "collect_ranges",
    "find_ranges",
    "load_ranges",
    "quantize_backbone",
    "quantizer_available",
    "save_ranges",
    "tensor_keys",
]

RANGES_FORMAT = "ebmtrack-int8-ranges"
RANGES_VERSION = 1


@dataclass(frozen=True)
class ActivationRanges:
    """Measured activation ranges of one backbone's weights, and how to quantize with them.

    Attributes:
        backbone: the backbone's name, e.g. ``mobilenetv2``.
        weights_key: :attr:`OnnxBackbone.weights_key` of the weights calibrated.
        ranges: ``{tensor key: (lowest, highest)}`` (:func:`tensor_keys`).
        float_layers: backbone layers (e.g. ``features.0``) whose nodes stay float32.
        info: how the ranges were made (data, crops, versions); not used to quantize.
    """

    backbone: str
    weights_key: str
    ranges: Mapping[str, tuple[float, float]]
    float_layers: tuple[str, ...] = ()
    info: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (isinstance(self.backbone, str) and self.backbone):
            raise ValueError(f"backbone must be a non-empty string, got {self.backbone!r}")
        if not (isinstance(self.weights_key, str) and self.weights_key):
            raise ValueError(f"weights_key must be a non-empty string, got {self.weights_key!r}")
        if not self.ranges:
            raise ValueError(f"no ranges for {self.backbone} {self.weights_key}")
        clean = {}
        for key, pair in self.ranges.items():
            values = tuple(pair) if isinstance(pair, list | tuple) else ()
            if not (
                isinstance(key, str)
                and len(values) == 2
                and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
                and all(math.isfinite(v) for v in values)
                and values[0] <= values[1]
            ):
                raise ValueError(
                    f"range of {key!r} must be two finite numbers, lowest <= highest, got {pair!r}"
                )
            clean[key] = (float(values[0]), float(values[1]))
        object.__setattr__(self, "ranges", clean)
        layers = tuple(self.float_layers)
        if not all(isinstance(layer, str) and layer for layer in layers):
            raise ValueError(f"float_layers must be layer names, got {self.float_layers!r}")
        object.__setattr__(self, "float_layers", layers)
        object.__setattr__(self, "info", dict(self.info))

    @property
    def digest(self) -> str:
        """12 hex digits of the sha256 of what quantizing reads (ranges, float layers): the
        int8 file's name carries it, so changed ranges never reuse a stale file."""
        content = {"ranges": sorted(self.ranges.items()), "float_layers": self.float_layers}
        text = json.dumps(content, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def to_json(self) -> dict:
        return {
            "backbone": self.backbone,
            "weights_key": self.weights_key,
            "float_layers": list(self.float_layers),
            "info": dict(self.info),
            "ranges": {key: list(pair) for key, pair in sorted(self.ranges.items())},
        }


def save_ranges(entries: Iterable[ActivationRanges], path: str | Path) -> Path:
    """Write ``entries`` as one JSON table (float32 values written exactly: a Python float
    holds every float32). Raises ValueError for two entries of the same weights."""
    entries = list(entries)
    keys = [(e.backbone, e.weights_key) for e in entries]
    if len(set(keys)) != len(keys):
        raise ValueError(f"two entries for the same backbone weights in {keys}")
    table = {
        "format": RANGES_FORMAT,
        "version": RANGES_VERSION,
        "entries": [e.to_json() for e in entries],
    }
    return write_json_atomic(path, table)


def load_ranges(path: str | Path) -> list[ActivationRanges]:
    """Read a table written by :func:`save_ranges`, checking its format and every entry
    (JSON only: nothing is unpickled). Raises FileNotFoundError or ValueError."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"int8 ranges file not found: {path}")
    try:
        table = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"int8 ranges file {path} is not JSON: {err}") from err
    if not isinstance(table, dict) or table.get("format") != RANGES_FORMAT:
        raise ValueError(f"{path} is not an int8 ranges table (format {RANGES_FORMAT!r})")
    if table.get("version") != RANGES_VERSION:
        raise ValueError(
            f"{path}: int8 ranges table version {table.get('version')!r}, this ebmtrack reads "
            f"version {RANGES_VERSION}"
        )
    entries = table.get("entries")
    if not isinstance(entries, list):
        raise ValueError(f"{path}: 'entries' must be a list")
    result = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("ranges"), dict):
            raise ValueError(f"{path}: entry {index} has no 'ranges' table")
        try:
            result.append(
                ActivationRanges(
                    backbone=entry.get("backbone"),
                    weights_key=entry.get("weights_key"),
                    ranges=entry["ranges"],
                    float_layers=tuple(entry.get("float_layers", ())),
                    info=entry.get("info", {}),
                )
            )
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: entry {index}: {err}") from err
    keys = [(e.backbone, e.weights_key) for e in result]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{path}: two entries for the same backbone weights")
    return result


def shipped_ranges_file(backbone: str = "mobilenetv2") -> Path | None:
    """The table of ``backbone``'s ranges that ships in :mod:`ebmtrack.weights`, or None."""
    from ebmtrack.weights import find_shipped

    shipped = find_shipped("int8-ranges", backbone)
    return shipped.path if shipped is not None else None


def find_ranges(
    backbone: str, weights_key: str, path: str | Path | None = None
) -> ActivationRanges | None:
    """The entry of ``path`` (default: the shipped table) for these weights, or None."""
    path = Path(path) if path is not None else shipped_ranges_file(backbone)
    if path is None or not path.is_file():
        return None
    for entry in load_ranges(path):
        if (entry.backbone, entry.weights_key) == (backbone, weights_key):
            return entry
    return None


# ----------------------------------------------------------------------------- ONNX side
def tensor_keys(model) -> dict[str, str]:
    """``{tensor name: key}`` for the graph inputs (``input:<name>``) and every node output
    (``<node name>:<index>``) of an ``onnx.ModelProto``."""
    keys = {value.name: f"input:{value.name}" for value in model.graph.input}
    for node in model.graph.node:
        for index, name in enumerate(node.output):
            if name:
                keys[name] = f"{node.name}:{index}"
    initializers = {init.name for init in model.graph.initializer}
    return {name: key for name, key in keys.items() if name not in initializers}


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """ONNX Runtime's quantization tools log advice (pre-processing) through the root logger;
    keep it out of a tracker's output for the length of the block."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def quantizer_available() -> bool:
    """Whether the installed ONNX Runtime can quantize (imports ``onnx``: 0.7 s)."""
    try:
        _quantize_static()
    except ImportError:
        return False
    return True


def _quantize_static():
    try:
        from onnxruntime.quantization import quantize_static
    except ImportError as err:
        raise ImportError(
            "backbone_runtime='onnx-int8' needs onnxruntime and onnx: pip install onnxruntime onnx"
        ) from err
    if "calibration_cache_path" not in inspect.signature(quantize_static).parameters:
        import onnxruntime

        raise ImportError(
            "backbone_runtime='onnx-int8' builds the int8 model from stored activation ranges, "
            "which needs an onnxruntime whose quantize_static takes calibration_cache_path "
            f"(1.32.0 does); installed: {onnxruntime.__version__}. Upgrade it, or use "
            "backbone_runtime='onnx' (float32)"
        )
    return quantize_static


def quantize_backbone(
    float_path: str | Path, ranges: ActivationRanges, out_path: str | Path
) -> Path:
    """Write the int8 model of the float ONNX file ``float_path`` to ``out_path``.

    QDQ format, weights int8 per output channel, activations uint8 with ``ranges``; the nodes
    of ``ranges.float_layers`` stay float32. Raises ValueError when ``ranges`` lacks a tensor of
    the model or names a float layer the model does not have.
    """
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType
    from onnxruntime.quantization.calibrate import TensorData, TensorsData, save_tensors_data

    quantize_static = _quantize_static()
    float_path, out_path = Path(float_path), Path(out_path)
    model = onnx.load(str(float_path))
    keys = tensor_keys(model)
    missing = sorted(name for name, key in keys.items() if key not in ranges.ranges)
    if missing:
        raise ValueError(
            f"the int8 ranges of {ranges.backbone} {ranges.weights_key} lack {len(missing)} "
            f"tensor(s) of {float_path.name}, e.g. {missing[:3]}: they were measured on another "
            "export of the backbone (other torch version or layers); measure them again with "
            "python -m ebmtrack.training.int8_calibration"
        )
    excluded = []
    for layer in ranges.float_layers:
        nodes = [node.name for node in model.graph.node if f"/{layer}/" in node.name]
        if not nodes:
            raise ValueError(f"float layer {layer!r} of the int8 ranges is not in {float_path}")
        excluded += nodes
    data = {
        name: TensorData(
            lowest=np.array(ranges.ranges[key][0], dtype=np.float32),
            highest=np.array(ranges.ranges[key][1], dtype=np.float32),
        )
        for name, key in keys.items()
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ebmtrack-int8-") as tmp, _quiet_quantizer():
        cache = Path(tmp) / "ranges.json"
        save_tensors_data(TensorsData(CalibrationMethod.MinMax, data), cache)
        staged = Path(tmp) / "model.onnx"
        quantize_static(
            str(float_path),
            str(staged),
            None,
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=excluded,
            calibrate_method=CalibrationMethod.MinMax,
            calibration_cache_path=str(cache),
        )
        # Concurrent processes never read half a file.
        write_atomic(out_path, lambda tmp: tmp.write_bytes(staged.read_bytes()))
    return out_path


class _Batches:
    """ORT's calibration data reader over (N, 3, H, W) float32 crops."""

    def __init__(self, crops: np.ndarray, batch: int = 8) -> None:
        self._batches = iter([crops[i : i + batch] for i in range(0, len(crops), batch)])

    def get_next(self) -> dict | None:
        batch = next(self._batches, None)
        return None if batch is None else {"images": np.ascontiguousarray(batch)}

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        item = self.get_next()
        if item is None:
            raise StopIteration
        return item


def collect_ranges(float_path: str | Path, crops: np.ndarray) -> dict[str, tuple[float, float]]:
    """Min and max of every activation of the float ONNX model over ``crops`` (N, 3, H, W)
    float RGB in [0, 255] (ONNX Runtime's MinMax calibrator), keyed by :func:`tensor_keys`."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod
    from onnxruntime.quantization.calibrate import create_calibrator

    float_path = Path(float_path)
    keys = tensor_keys(onnx.load(str(float_path)))
    with tempfile.TemporaryDirectory(prefix="ebmtrack-calib-") as tmp, _quiet_quantizer():
        calibrator = create_calibrator(
            float_path,
            [],
            augmented_model_path=str(Path(tmp) / "augmented.onnx"),
            calibrate_method=CalibrationMethod.MinMax,
        )
        calibrator.collect_data(_Batches(np.asarray(crops, dtype=np.float32)))
        data = calibrator.compute_data()
    ranges = {}
    for name, tensor in data.data.items():
        lowest, highest = tensor.range_value
        ranges[keys[name]] = (float(np.asarray(lowest).item()), float(np.asarray(highest).item()))
    missing = sorted(set(keys) - set(data.data))
    if missing:  # e.g. a non-float tensor: the quantizer would need none, but say so
        raise ValueError(f"the calibrator measured no range for {missing[:3]}")
    return ranges
