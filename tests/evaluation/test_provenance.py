"""Every results file records what produced it: weights (sha256), precision, backbone runtime,
device, and the versions of torch, ONNX Runtime and OpenCV."""

import json

import cv2
import pytest
import torch
from eval_helpers import eval_argv, sequences_folder

import ebmtrack
from ebmtrack.cli.main import main
from ebmtrack.evaluation.demo import DemoConfig, run_demo
from ebmtrack.evaluation.provenance import environment, tracker_provenance
from ebmtrack.models.backbones.onnx_files import state_dict_sha256
from ebmtrack.weights import shipped_backbone_weights

# the torch tracker on its own backbone (the default runs one pass, the siamese one)
TWO_PASS = {"classifier_features": "backbone"}


def test_the_environment_names_the_versions():
    info = environment()
    assert info["torch"] in torch.__version__
    assert info["opencv"] == cv2.__version__ and info["onnxruntime"]
    assert info["ebmtrack"] and info["python"] and "cpu_flags" in info


@pytest.mark.slow
def test_a_tracker_of_ours_names_its_weights_precision_and_runtime():
    tracker = ebmtrack.load_tracker(
        "atom", runtime="torch", precision="float32", backbone_runtime="torch", **TWO_PASS
    )
    info = tracker_provenance(tracker)
    assert info["backbone"] == "mobilenetv2"
    assert info["backbone_weights_sha256"] == shipped_backbone_weights("mobilenetv2")[1]
    assert info["precision"] == "float32" and info["backbone_runtime"] == "torch"
    assert info["device"] == "cpu"
    polished = ebmtrack.load_tracker("atom-polished", runtime="torch", precision="float32")
    polished = tracker_provenance(polished)
    assert list(polished["heads_state_sha256"]) == ["box_head"]  # ATOM's classifier: online
    assert len(polished["heads_state_sha256"]["box_head"]) == 64
    dimp = ebmtrack.load_tracker("dimp-nce+")
    heads = tracker_provenance(dimp)["heads_state_sha256"]
    assert heads["box_head"] == state_dict_sha256(dimp.box_head)
    assert heads["classifier"] == state_dict_sha256(dimp.classifier.net)  # the learnt one


def test_one_pass_names_the_siamese_backbone_it_runs():
    # the default runs no backbone of the export's: its provenance says which one it runs
    lite = tracker_provenance(ebmtrack.load_tracker("atom"))
    export = ebmtrack.load_tracker("atom").export.manifest
    backbone_file = export["siamese"]["models"]["v3"]["backbone"]
    assert lite["backbone"] == "nanotrack-v3" and lite["backbone_precision"] == "float32"
    assert lite["backbone_weights_sha256"] == export["files"][backbone_file]["sha256"]
    two = tracker_provenance(ebmtrack.load_tracker("atom", **TWO_PASS))
    assert two["backbone"] == "mobilenetv2" and two["backbone_precision"] == "int8"
    assert tracker_provenance(ebmtrack.load_tracker("atom", runtime="torch"))["backbone"] == (
        "nanotrack-v3"
    )


def test_demo_and_eval_metrics_record_what_made_them(tmp_path, drift_tracker):
    config = DemoConfig(tmp_path / "demo", tracker="kcf", max_frames=3, video=False, progress=False)
    run_demo(config)
    demo = json.loads((tmp_path / "demo/metrics.json").read_text())["produced_by"]
    assert demo["tracker"]["class"] == "OpenCVTracker"
    assert demo["environment"]["opencv"] == cv2.__version__
    data = sequences_folder(tmp_path / "data", count=1)
    assert main(eval_argv(data, tmp_path / "out", "drift,kcf")) == 0
    produced = json.loads((tmp_path / "out/metrics.json").read_text())["produced_by"]
    (entry,) = produced["trackers"]["drift"]
    assert entry["tracker"]["class"] == "DriftTracker" and entry["environment"]["torch"]
    assert produced["trackers"]["kcf"][0]["tracker"]["class"] == "OpenCVTracker"
    assert produced["scored_with"]["numpy"]
    # A second call with the same setting adds no entry.
    assert main(eval_argv(data, tmp_path / "out", "drift")) == 0
    again = json.loads((tmp_path / "out/metrics.json").read_text())["produced_by"]
    assert again["trackers"]["drift"] == [entry]


def test_an_interrupted_eval_has_its_provenance(tmp_path, capsys, monkeypatch, drift_tracker):
    # provenance.json is written when the run starts, not at its end: stopped during the first
    # sequence, the run folder has it already.
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("ebmtrack.evaluation.runner.run_job", interrupted)
    data = sequences_folder(tmp_path / "data", count=1)
    assert main(eval_argv(data, tmp_path / "out", "drift")) == 130
    assert capsys.readouterr().err.strip().startswith("ebmtrack eval: interrupted;")
    (entry,) = json.loads((tmp_path / "out/results/drift/provenance.json").read_text())
    assert entry["tracker"]["class"] == "DriftTracker" and entry["environment"]["numpy"]
    assert not list((tmp_path / "out").rglob("*.tmp*"))
