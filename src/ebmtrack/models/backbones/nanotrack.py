"""NanoTrack v2's backbone (Apache-2.0, trained for tracking), read from its ONNX file into PyTorch.

The file is OpenCV's ``nanotrack_backbone_sim.onnx`` (HonglinChu/SiamTrackers): a small
MobileNetV3-style network with squeeze-excitation blocks, 255 x 255 input, one 48-channel
stride-16 output (16 x 16 cells). Its graph uses nine operators only, so it is run here by a small
interpreter over ordinary tensor functions (no ONNX Runtime, differentiable, any device); the
weights are the file's initializers, read with ``onnx`` (protobuf, no pickle) and checked by
sha256.

Input convention of the original: BGR, raw 0-255 values, no mean or std. :meth:`normalize` turns
the library's RGB 0-255 images into that. Any input size works (the convolutions do not care), but
the network was trained on 255 x 255 search crops.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ebmtrack.models.backbones.base import Backbone, FeatureInfo, Stage
from ebmtrack.models.backbones.spec import BackboneSpec, register_backbone

NANOTRACK_BACKBONE_SHA256 = "530bdd0cd00f19afab79a863e71ba71e3312395a5dc9151af675082bdaaa2fc4"


def _conv(x: Tensor, w: Tensor, b: Tensor | None = None, **attrs) -> Tensor:
    pads = attrs.get("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:]:
        raise ValueError(f"asymmetric Conv padding {pads} is not supported")
    return F.conv2d(
        x,
        w,
        b,
        stride=attrs.get("strides", 1),
        padding=pads[:2],
        dilation=attrs.get("dilations", 1),
        groups=attrs.get("group", 1),
    )


def _gemm(a: Tensor, b: Tensor, c: Tensor | None = None, **attrs) -> Tensor:
    if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
        raise ValueError(f"Gemm attributes {attrs} are not supported")
    return F.linear(a, b if attrs.get("transB", 0) else b.t(), c)


def _reshape(x: Tensor, shape: Tensor, **attrs) -> Tensor:
    # ONNX: 0 copies the input's dimension (allowzero = 0), -1 is inferred. The file was
    # exported for batch 1 and its Reshapes (around the squeeze-excitation blocks) keep the batch
    # dimension first, so that dimension follows the input's batch.
    dims = [x.shape[i] if d == 0 else d for i, d in enumerate(shape.tolist())]
    dims[0] = x.shape[0]
    return x.reshape(dims)


def _hard_sigmoid(x: Tensor, **attrs) -> Tensor:
    return (attrs.get("alpha", 0.2) * x + attrs.get("beta", 0.5)).clamp(0.0, 1.0)


_OPERATORS: dict[str, Callable[..., Tensor]] = {
    "Conv": _conv,
    "Gemm": _gemm,
    "Reshape": _reshape,
    "Relu": lambda x: F.relu(x),
    "HardSwish": lambda x: F.hardswish(x),
    "HardSigmoid": _hard_sigmoid,
    "GlobalAveragePool": lambda x: x.mean(dim=(2, 3), keepdim=True),
    "Mul": torch.mul,
    "Add": torch.add,
}


def read_onnx_graph(
    path: str | Path, sha256: str | None = None
) -> tuple[list[tuple[str, list[str], list[str], dict[str, Any]]], dict[str, Tensor], str, str]:
    """The nodes ``[(op, inputs, outputs, attributes)]``, the initializers, and the input and
    output names of a one-input, one-output ONNX file.

    Raises ValueError when the file's sha256 differs from ``sha256`` or it uses an operator
    this interpreter does not know; FileNotFoundError when it does not exist.
    """
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as err:
        raise ImportError("reading an ONNX file needs onnx: pip install 'ebmtrack[onnx]'") from err

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"NanoTrack backbone file not found: {path}")
    data = path.read_bytes()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{path} is not NanoTrack v2's backbone (sha256 differs from {sha256})")
    graph = onnx.load_from_string(data).graph
    tensors = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in graph.initializer}
    nodes = []
    for node in graph.node:
        if node.op_type not in _OPERATORS:
            raise ValueError(f"{path}: ONNX operator {node.op_type!r} is not supported")
        attributes: dict[str, Any] = {
            a.name: onnx.helper.get_attribute_value(a) for a in node.attribute
        }
        nodes.append((node.op_type, list(node.input), list(node.output), attributes))
    if len(graph.input) != 1 or len(graph.output) != 1:
        raise ValueError(f"{path}: expected one input and one output")
    return nodes, tensors, graph.input[0].name, graph.output[0].name


class OnnxGraph(nn.Module):
    """A one-input, one-output ONNX graph of the operators in ``_OPERATORS``, run with torch.

    The initializers become buffers (``initializer_<i>``, in file order), so ``.to()`` and
    ``state_dict()`` work as for any module; outputs match ONNX Runtime's to float rounding.
    """

    def __init__(self, path: str | Path, sha256: str | None = None) -> None:
        super().__init__()
        self._nodes, tensors, self._input, self._output = read_onnx_graph(path, sha256)
        # Initializer names hold dots and slashes: registered under indices, looked up by name.
        self._tensor_index = {name: i for i, name in enumerate(tensors)}
        for i, tensor in enumerate(tensors.values()):
            self.register_buffer(f"initializer_{i}", tensor)

    def _value(self, name: str, values: dict[str, Tensor]) -> Tensor | None:
        if not name:
            return None  # an omitted optional input
        if name in values:
            return values[name]
        return getattr(self, f"initializer_{self._tensor_index[name]}")

    def forward(self, x: Tensor) -> Tensor:
        values = {self._input: x}
        for op, inputs, outputs, attributes in self._nodes:
            args = [self._value(name, values) for name in inputs]
            values[outputs[0]] = _OPERATORS[op](*args, **attributes)
        return values[self._output]


class NanoTrackBackbone(Backbone):
    """NanoTrack v2's backbone as a :class:`Backbone`: one layer, ``"features"`` (stride 16,
    48 channels). It has no ImageNet head (``classify`` refuses) and only one feature level,
    which an IoU-Net reads as both its levels (``default_layers``).

    Args:
        path: the ``nanotrack_backbone_sim.onnx`` file (see ``../shared/peers/PROVENANCE.md`` or
            OpenCV's tracking samples for where it comes from).
        check_sha256: refuse a file other than the known one.
    """

    name = "nanotrack"
    feature_info = {"features": FeatureInfo(stride=16, channels=48)}
    default_layers = ("features", "features")
    classifier_layer = "features"
    classifier_prefixes = ()

    def __init__(self, path: str | Path, check_sha256: bool = True) -> None:
        super().__init__(mean_rgb=(0.0, 0.0, 0.0), std_rgb=(1.0, 1.0, 1.0))
        sha = NANOTRACK_BACKBONE_SHA256 if check_sha256 else None
        self.graph = OnnxGraph(path, sha)
        self.has_classifier = False
        self.weights_sha256 = sha

    def normalize(self, images: Tensor) -> Tensor:
        return super().normalize(images).flip(1)  # RGB -> BGR, raw 0-255 values

    def stages(self) -> list[Stage]:
        return [("features", self.graph)]

    def logits_from(self, last_features: Tensor) -> Tensor:
        raise ValueError("the NanoTrack backbone has no ImageNet classifier")


# Read from NanoTrack v2's own file (no ImageNet weights): --peer-models DIR holding it will do.
SPEC = register_backbone(
    BackboneSpec("nanotrack", NanoTrackBackbone, weights_file="nanotrack_backbone_sim.onnx")
)

__all__ = [
    "NANOTRACK_BACKBONE_SHA256",
    "SPEC",
    "NanoTrackBackbone",
    "OnnxGraph",
    "read_onnx_graph",
]
