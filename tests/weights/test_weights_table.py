"""The one table of shipped weights: every file of the package's weights folder is in it, each
entry resolves to its file, and a backbone nothing ships for is one line naming what does."""

import hashlib
import json

import pytest

import ebmtrack
from ebmtrack import weights
from ebmtrack.weights.packed import packed_bytes
from ebmtrack.weights.table import FOLDER, ROLES, SHIPPED, find_shipped, shipped_file

NOT_WEIGHTS = {"README.md", "default_model.json", "LICENSE-NanoTrack.txt"}  # records, a licence


def _shipped_names() -> set[str]:
    """The files of the weights folder that hold weights, a packed file's parts as the file."""
    names = set()
    for path in FOLDER.iterdir():
        if path.suffix == ".py" or path.is_dir() or path.name in NOT_WEIGHTS:
            continue
        names.add(path.name.rsplit(".part", 1)[0] if ".part" in path.suffix else path.name)
    return names


def test_every_file_of_the_weights_folder_is_in_the_table():
    assert _shipped_names() == {entry.file for entry in SHIPPED}


def test_the_table_resolves_every_shipped_file():
    keys = [(e.role, e.backbone, e.tag) for e in SHIPPED]
    assert len(set(keys)) == len(keys)
    for entry in SHIPPED:
        assert entry.role in ROLES
        assert shipped_file(entry.role, entry.backbone, entry.tag) == entry
        assert entry.exists(), entry.file
        if entry.sha256 is not None:  # the hash its reader checks is the file's
            assert hashlib.sha256(packed_bytes(entry.path)).hexdigest() == entry.sha256


def test_the_accessors_and_the_record_read_the_table():
    record = weights.default_model()
    assert record.box_head == shipped_file("box-head", "mobilenetv2").path
    with pytest.raises(AttributeError, match="iou_net was renamed DefaultModel.box_head"):
        record.iou_net  # noqa: B018 - the old name, refused with the new one
    assert record.backbone_weights == shipped_file("backbone", "mobilenetv2").path
    digests = {entry["file"]: entry["sha256"] for entry in record.record["files"]}
    backbone = shipped_file("backbone", "mobilenetv2")
    assert digests[backbone.file] == backbone.sha256
    assert weights.shipped_backbone_weights("mobilenetv2") == (backbone.path, backbone.sha256)
    assert weights.pack_box_head() == shipped_file("box-head", "mobilenetv2", "pack").path
    assert weights.dimp_classifier() == shipped_file("dimp-classifier", "mobilenetv2").path
    assert weights.int8_ranges() == shipped_file("int8-ranges", "mobilenetv2").path
    calibrator = shipped_file("calibrator", "mobilenetv2")
    assert weights.confidence_calibrators() == (calibrator.path, calibrator.sha256)
    assert weights.CONFIDENCE_SHA256 == calibrator.sha256
    readme = (FOLDER / "README.md").read_text()
    for entry in SHIPPED:  # the README documents every file
        assert f"`{entry.file}`" in readme, entry.file
    assert json.loads((FOLDER / "default_model.json").read_text())["backbone"] == "mobilenetv2"


def test_an_unknown_backbone_is_one_line_naming_what_ships():
    assert find_shipped("box-head", "resnet18") is None
    assert weights.pack_box_head("resnet18") is None
    with pytest.raises(ValueError) as error:
        shipped_file("box-head", "resnet18", "pack")
    assert str(error.value) == (
        "no box-head weights ship for backbone 'resnet18' (box-head weights ship for "
        "mobilenetv2 (default, pack)): pass weights=FILE"
    )
    with pytest.raises(ValueError, match="no box-head weights tagged 'mse' ship for backbone"):
        shipped_file("box-head", "mobilenetv2", "mse")
    with pytest.raises(ValueError, match="pass backbone_weights=FILE"):
        shipped_file("backbone", "resnet50")
    with pytest.raises(ValueError, match="unknown weights role 'head'; roles: box-head"):
        find_shipped("head", "mobilenetv2")


def test_a_missing_file_is_not_found(monkeypatch, tmp_path):
    monkeypatch.setattr(weights.table, "FOLDER", tmp_path)  # an installation without the files
    assert find_shipped("box-head", "mobilenetv2") is None
    with pytest.raises(ValueError, match=r"ship for none\): pass weights=FILE"):
        shipped_file("box-head", "mobilenetv2")


@pytest.mark.parametrize("name", ["atom-polished", "atom-iounet"])
def test_a_variant_on_another_backbone_names_that_backbone(name):
    # The head is looked up when the tracker is built, before the backbone (which for resnet18
    # needs a file): the line names resnet18, not the backbone the shipped head was made for.
    with pytest.raises(ValueError) as error:
        ebmtrack.load_tracker(name, runtime="torch", backbone="resnet18")
    assert str(error.value).startswith("no box-head weights ship for backbone 'resnet18'")
    assert "pass weights=FILE" in str(error.value)
