"""A head's file says which backbone weights its features came from (and how it was trained), and
a tracker whose backbone has other weights refuses it in one line naming both: a head trained on
a randomly initialised backbone is never used on the ImageNet one."""

import hashlib
import re

import pytest
import torch

import ebmtrack
from ebmtrack.cli.main import main
from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.backbones.onnx_files import weights_key
from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.models.serialization import (
    backbone_provenance,
    load_model,
    read_provenance,
    save_model,
)
from ebmtrack.training.presets import preset_config
from ebmtrack.weights import SHIPPED

IMAGENET_KEY = "8cb26be443d89d03"  # the shipped ImageNet MobileNetV2 (weights/README.md)


@pytest.fixture(scope="module")
def random_backbone():
    torch.manual_seed(1)
    return create_backbone("mobilenetv2", pretrained=False)


@pytest.fixture(scope="module")
def heads_on_random_features(random_backbone, tmp_path_factory):
    """An IoU-Net and a DiMP classifier whose files say: trained on a random MobileNetV2."""
    folder = tmp_path_factory.mktemp("heads")
    provenance = backbone_provenance(
        random_backbone, "random initialisation (pretrained: false, seed 1)", "cpu, float32"
    )
    head = save_model(
        AtomIoUNet(IoUNetConfig.for_backbone(random_backbone)), folder / "iou.safetensors",
        provenance,
    )
    classifier = save_model(
        DiMPClassifier(DiMPConfig.for_backbone(random_backbone)), folder / "dimp.safetensors",
        provenance,
    )
    return head, classifier


def test_provenance_is_written_and_read_back(random_backbone, tmp_path):
    provenance = backbone_provenance(random_backbone, "a file", "cpu, float32")
    path = save_model(AtomIoUNet(IoUNetConfig.for_backbone(random_backbone)),
                      tmp_path / "h.safetensors", provenance)
    assert read_provenance(path) == provenance
    assert provenance["backbone_weights"] == weights_key(random_backbone) != IMAGENET_KEY
    load_model(path)  # the header's extra entries change nothing else
    with pytest.raises(ValueError, match="unknown provenance entries"):
        save_model(AtomIoUNet(IoUNetConfig.for_backbone(random_backbone)), path, {"x": "1"})


def test_every_shipped_head_records_the_imagenet_weights():
    assert weights_key(create_backbone("mobilenetv2")) == IMAGENET_KEY
    heads = [e for e in SHIPPED if e.file.endswith(".safetensors")]
    assert len(heads) == 3
    for entry in heads:
        recorded = read_provenance(entry.path)
        assert recorded["backbone_weights"] == IMAGENET_KEY, entry.file
        assert re.match(r"(torch [\d.]+, )?cpu: ", recorded["trained_on"]), entry.file
        # ... and the table's sha256 is the file's, header included.
        assert hashlib.sha256(entry.path.read_bytes()).hexdigest() == entry.sha256


@pytest.mark.parametrize(
    "name, option, which", [("atom-iounet", "weights", 0), ("atom-polished", "weights", 0),
                            ("dimp-nce+", "weights", 0), ("dimp-nce+", "classifier_weights", 1)]
)
def test_a_head_of_other_backbone_weights_is_refused(heads_on_random_features, name, option,
                                                     which):
    path = heads_on_random_features[which]
    with pytest.raises(ValueError) as error:
        ebmtrack.load_tracker(name, runtime="torch", **{option: path})
    line = str(error.value)
    assert "\n" not in line
    assert f"trained on mobilenetv2 weights {weights_key_of(path)}" in line
    assert "random initialisation (pretrained: false" in line
    assert f"the tracker's backbone is mobilenetv2 weights {IMAGENET_KEY}" in line


def weights_key_of(path):
    return read_provenance(path)["backbone_weights"]


def test_the_command_refuses_it_in_one_line(heads_on_random_features, tmp_path, capsys):
    folder = tmp_path / "seq"
    folder.mkdir()
    import cv2
    import numpy as np

    for k in range(2):
        cv2.imwrite(str(folder / f"{k:04d}.png"), np.full((64, 80, 3), 90, np.uint8))
    code = main(["track", str(folder), "--init", "10,10,20,20", "--tracker", "atom-iounet",
                 "--runtime", "torch", "--weights", str(heads_on_random_features[0])])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "the tracker's backbone is mobilenetv2" in lines[0]


def test_training_records_the_backbone_it_read(random_backbone):
    config = preset_config("synthetic-smoke")  # pretrained: false
    module = config.build_module()
    recorded = config.provenance(module)
    assert recorded["backbone_weights"] == weights_key(module.backbone)
    assert recorded["backbone_weights_from"] == (
        f"random initialisation (pretrained: false, seed {config.trainer.seed})"
    )
    assert recorded["trained_on"].startswith(f"torch {torch.__version__.split('+')[0]}, cpu")
    assert recorded["trained_on"].endswith(": backbone eager float32, head float32")
    # A streamed run's features come from the workers' runtime, a bfloat16 step says so.
    streamed = preset_config("pack-stream")
    streamed.trainer.cpu_bf16 = True
    assert streamed.provenance(module)["trained_on"].endswith(
        "cpu: backbone onnx-int8 in the data workers, head bfloat16 autocast"
    )
