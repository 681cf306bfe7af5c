"""The exports shipped in the package (:mod:`ebmtrack.exports`): each reads, its stored files are
the weights table's, and a fresh export of its tracker gives the same files.

"The same" is byte for byte wherever the bytes do not depend on the CPU. The ONNX graphs are not
such files: folding BatchNorm into the convolutions, and the int8 quantizer's scales, are float32
arithmetic in CPU-specific kernels, so an Intel Xeon and an AMD EPYC (Zen 4) export weights a
few float32 ulps apart (measured: 1.9e-6 relative at most; two int32 biases of the
int8 graph one step apart). Those files are compared as graphs: the same nodes, inputs, outputs
and attributes exactly, the same initializers by name, dtype and shape, their values within those
rounding steps; the int8 backbone also by what it computes.
"""

import hashlib
import io
import json
import lzma

import numpy as np
import pytest

from ebmtrack.exports import SHIPPED_EXPORTS, shipped_export
from ebmtrack.lite.files import read_export
from ebmtrack.weights.table import FOLDER, SHIPPED

FLOAT_RTOL = 1e-5  # relative to the largest magnitude of the tensor: ~100 float32 ulps
INT_STEPS = 1  # a quantized value rounded the other way at a boundary


def test_every_shipped_export_reads_and_its_stored_files_are_in_the_weights_table():
    table = {entry.file: entry.sha256 for entry in SHIPPED if entry.role == "export"}
    used = set()
    for name in SHIPPED_EXPORTS:
        export = read_export(shipped_export(name))  # every stored sha256 checked
        assert export.manifest["tracker"] == name
        for file, entry in export.manifest["files"].items():
            stored = entry.get("stored")
            if stored is None:
                assert (export.folder / file).is_file()
                continue
            path = export.path(file)
            assert path.parent.resolve() == FOLDER
            if path.suffix == ".xz":
                assert table[path.name] == stored["sha256"]
                used.add(path.name)
                data = lzma.decompress(path.read_bytes())
                assert hashlib.sha256(data).hexdigest() == entry["sha256"]
                assert len(data) == entry["bytes"]
    assert used == set(table)  # no stored file left over


def _graph_differences(fresh: bytes, shipped: bytes) -> list[str]:
    """What differs between two ONNX models beyond float32 rounding (empty: the same graph)."""
    import onnx
    from onnx import numpy_helper

    a, b = onnx.load_from_string(fresh), onnx.load_from_string(shipped)

    def nodes(model):
        return [
            (
                n.name,
                n.op_type,
                n.domain,
                list(n.input),
                list(n.output),
                [str(x) for x in n.attribute],
            )
            for n in model.graph.node
        ]

    def signature(model):
        return [str(x) for x in [*model.graph.input, *model.graph.output]]

    problems = []
    if nodes(a) != nodes(b):
        problems.append("nodes differ")
    if signature(a) != signature(b):
        problems.append("graph inputs or outputs differ")
    if [(o.domain, o.version) for o in a.opset_import] != [
        (o.domain, o.version) for o in b.opset_import
    ]:
        problems.append("opsets differ")
    ia = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
    ib = {t.name: numpy_helper.to_array(t) for t in b.graph.initializer}
    if set(ia) != set(ib):
        problems.append(f"initializers differ: {sorted(set(ia) ^ set(ib))[:3]}")
    for name in sorted(set(ia) & set(ib)):
        x, y = ia[name], ib[name]
        if x.dtype != y.dtype or x.shape != y.shape:
            problems.append(f"{name}: {x.dtype}{x.shape} against {y.dtype}{y.shape}")
        elif x.dtype.kind in "iub":
            steps = np.abs(x.astype(np.int64) - y.astype(np.int64)).max(initial=0)
            if steps > INT_STEPS:
                problems.append(f"{name}: integers {steps} steps apart")
        else:
            scale = np.abs(y.astype(np.float64)).max(initial=0.0)
            worst = np.abs(x.astype(np.float64) - y).max(initial=0.0)
            if worst > FLOAT_RTOL * scale:
                problems.append(f"{name}: {worst:.3g} apart, {worst / scale:.2g} of its largest")
    return problems


def _backbone_outputs(model: bytes, crops: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: crops})[0]


def _demo_crops(size: int) -> np.ndarray:
    """Three frames of the shipped demo clip resized to the backbone's input: (3, 3, size, size)
    float32 in 0..255."""
    import cv2

    from ebmtrack.evaluation.demo import demo_sequence

    clip = demo_sequence()
    frames = [cv2.resize(clip.frame(i), (size, size)) for i in (0, 40, 80)]
    return np.stack(frames).transpose(0, 3, 1, 2).astype(np.float32)


def _relative(x: np.ndarray, reference: np.ndarray) -> float:
    return float(np.linalg.norm(x - reference) / np.linalg.norm(reference))


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED_EXPORTS)
def test_a_fresh_export_gives_the_shipped_files(name, tmp_path):
    from ebmtrack.export import export_tracker

    fresh = export_tracker(name, tmp_path / name)
    manifest = json.loads((fresh / "manifest.json").read_text())
    shipped_export_ = read_export(shipped_export(name))
    shipped = shipped_export_.manifest
    for key in ("tracker", "options", "backbone", "classifier", "head", "calibrator", "siamese"):
        expected = manifest.get(key)
        if key == "backbone":  # the shipped export keeps the file its runtime runs only
            runtime = expected["runtime"]
            expected = {**expected, "files": {runtime: expected["files"][runtime]}}
        assert shipped.get(key) == expected, key
    assert set(shipped["files"]) <= set(manifest["files"])
    for file, entry in shipped["files"].items():
        if manifest["files"][file]["sha256"] == entry["sha256"]:
            continue
        source = shipped_export_.source(file)
        shipped_bytes = source if isinstance(source, bytes) else source.read_bytes()
        fresh_bytes = (fresh / file).read_bytes()
        # Only ONNX graphs carry CPU-dependent float32 arithmetic (the module's docstring).
        assert file.endswith(".onnx"), (
            f"{file} differs from a fresh export: run python scripts/ship_exports.py"
        )
        problems = _graph_differences(fresh_bytes, shipped_bytes)
        assert not problems, (
            f"{file} differs from a fresh export beyond float rounding ({'; '.join(problems)}): "
            "run python scripts/ship_exports.py"
        )
    # The int8 backbone by what it computes. Its last activations are quantized in steps of
    # ~3 % of their range, so a rounding step upstream moves many outputs by a step: measured
    # on the demo's frames, the Xeon's and the EPYC's files are 8-11 % apart (relative L2), the
    # same size as int8's own error against float32 (10-11 %). What must hold on every CPU: the
    # fresh file quantizes the float32 graph as well as the shipped one does (within a tenth).
    int8 = manifest["backbone"]["files"].get("onnx-int8")
    if int8 is not None and int8 in shipped["files"]:
        crops = _demo_crops(manifest["backbone"]["search_size"])
        float32 = _backbone_outputs(
            (fresh / manifest["backbone"]["files"]["onnx"]).read_bytes(), crops
        )
        shipped_int8 = shipped_export_.source(int8)
        shipped_out = _backbone_outputs(
            shipped_int8 if isinstance(shipped_int8, bytes) else shipped_int8.read_bytes(), crops
        )
        fresh_out = _backbone_outputs((fresh / int8).read_bytes(), crops)
        shipped_error = _relative(shipped_out, float32)
        fresh_error = _relative(fresh_out, float32)
        assert shipped_error < 0.2  # int8 at all: a wrong range table gives errors near 1
        assert abs(fresh_error - shipped_error) <= 0.1 * shipped_error, (fresh_error, shipped_error)


def _tiny_onnx(weight: np.ndarray, zero_point: int = 0) -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["y"], name="mul"),
            helper.make_node("QuantizeLinear", ["y", "s", "z"], ["q"], name="quant"),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("q", TensorProto.UINT8, [4])],
        [
            numpy_helper.from_array(weight.astype(np.float32), "w"),
            numpy_helper.from_array(np.array(0.1, np.float32), "s"),
            numpy_helper.from_array(np.array(zero_point, np.uint8), "z"),
        ],
    )
    buffer = io.BytesIO()
    onnx.save(helper.make_model(graph), buffer)
    return buffer.getvalue()


def test_graphs_compare_equal_up_to_float_rounding_and_no_further():
    weight = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    shipped = _tiny_onnx(weight, zero_point=128)
    one_ulp = np.nextafter(weight, np.float32(np.inf))
    assert _graph_differences(_tiny_onnx(one_ulp, zero_point=129), shipped) == []
    assert _graph_differences(_tiny_onnx(weight * (1 + 1e-3)), shipped) != []  # a real change
    assert _graph_differences(_tiny_onnx(weight, zero_point=130), shipped) != []
    renamed = _tiny_onnx(weight, zero_point=128).replace(b"quant", b"qu4nt")
    assert _graph_differences(renamed, shipped) == ["nodes differ"]


@pytest.mark.parametrize("path", ["/etc/passwd", "../../../x.onnx", "../a/../../../x", ".."])
def test_a_stored_path_outside_the_package_is_refused(tmp_path, path):
    manifest = json.loads((shipped_export("atom") / "manifest.json").read_text())
    entry = next(e for e in manifest["files"].values() if "stored" in e)
    entry["stored"]["path"] = path
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not allowed"):
        read_export(tmp_path)
