"""NanoTrack v2's backbone run from its ONNX file by the torch interpreter: parity with ONNX
Runtime, batches, and clear errors."""

from pathlib import Path

import numpy as np
import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.backbones.nanotrack import NanoTrackBackbone, OnnxGraph

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

PEER_FILE = Path(__file__).resolve().parents[2] / ".." / "shared" / "peers"
PEER_FILE = PEER_FILE / "nanotrack_backbone_sim.onnx"


def _squeeze_excitation_graph(path: Path, op: str = "Conv") -> Path:
    """Conv -> HardSwish -> SE block (GAP, Reshape to (1, C), Gemm, Relu, Gemm, HardSigmoid,
    Reshape back, Mul) -> Add residual: every operator the interpreter knows, exported for
    batch 1 as NanoTrack's file is."""
    rng = np.random.default_rng(0)

    def init(name, array):
        return numpy_helper.from_array(np.asarray(array, dtype=array.dtype), name)

    c = 4
    inits = [
        init("w", rng.normal(size=(c, 3, 3, 3)).astype(np.float32)),
        init("b", rng.normal(size=c).astype(np.float32)),
        init("shape_flat", np.array([1, c], dtype=np.int64)),
        init("shape_map", np.array([1, c, 1, 1], dtype=np.int64)),
        init("fc1_w", rng.normal(size=(2, c)).astype(np.float32)),
        init("fc1_b", rng.normal(size=2).astype(np.float32)),
        init("fc2_w", rng.normal(size=(c, 2)).astype(np.float32)),
        init("fc2_b", rng.normal(size=c).astype(np.float32)),
    ]
    nodes = [
        helper.make_node(op, ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("HardSwish", ["conv"], ["act"]),
        helper.make_node("GlobalAveragePool", ["act"], ["gap"]),
        helper.make_node("Reshape", ["gap", "shape_flat"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc1_w", "fc1_b"], ["fc1"], transB=1),
        helper.make_node("Relu", ["fc1"], ["fc1_relu"]),
        helper.make_node("Gemm", ["fc1_relu", "fc2_w", "fc2_b"], ["fc2"], transB=1),
        helper.make_node("HardSigmoid", ["fc2"], ["gate"], alpha=1 / 6),
        helper.make_node("Reshape", ["gate", "shape_map"], ["gate_map"]),
        helper.make_node("Mul", ["act", "gate_map"], ["scaled"]),
        helper.make_node("Add", ["scaled", "act"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "se",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _ort(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_interpreter_matches_onnx_runtime_per_item_of_a_batch(tmp_path):
    path = _squeeze_excitation_graph(tmp_path / "se.onnx")
    images = np.random.default_rng(1).normal(size=(3, 3, 16, 16)).astype(np.float32)
    ours = OnnxGraph(path)(torch.from_numpy(images)).numpy()
    for i in range(3):  # the file takes batch 1; ours runs the batch at once
        np.testing.assert_allclose(ours[i : i + 1], _ort(path, images[i : i + 1]), atol=1e-5)


def test_unknown_operator_wrong_file_and_missing_weights_are_clear_errors(tmp_path):
    path = _squeeze_excitation_graph(tmp_path / "bad.onnx", op="ConvTranspose")
    with pytest.raises(ValueError, match="operator 'ConvTranspose' is not supported"):
        OnnxGraph(path)
    good = _squeeze_excitation_graph(tmp_path / "se.onnx")
    with pytest.raises(ValueError, match="not NanoTrack v2's backbone"):
        NanoTrackBackbone(good)
    with pytest.raises(ValueError, match="pass weights=PATH"):
        create_backbone("nanotrack")
    with pytest.raises(FileNotFoundError):
        NanoTrackBackbone(tmp_path / "missing.onnx")


@pytest.mark.skipif(not PEER_FILE.is_file(), reason="../shared/peers not present")
def test_nanotrack_backbone_equals_the_onnx_file_run_by_onnx_runtime():
    backbone = create_backbone("nanotrack", weights=PEER_FILE)
    images = torch.rand(2, 3, 255, 255, generator=torch.Generator().manual_seed(0)) * 255
    ours = backbone(images, ("features",))["features"]
    assert ours.shape == (2, 48, 16, 16)
    for i in range(2):  # the original takes BGR 0-255
        reference = _ort(PEER_FILE, images[i : i + 1].flip(1).numpy())
        np.testing.assert_allclose(ours[i : i + 1].numpy(), reference, atol=1e-4, rtol=1e-4)
