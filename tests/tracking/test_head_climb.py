"""A box head is climbed as what it was trained to score: the file records its loss (the shipped
heads, written before, by the table), and a tracker that would climb it as the other kind
refuses it in one line: the MSE head of atom-iounet given to dimp-nce+, the NCE+ head given to
atom-iounet."""

import logging
import re

import pytest
import torch

import ebmtrack
from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.models.serialization import backbone_provenance, head_loss, save_model
from ebmtrack.tracking.head_climb import check_head_climb
from ebmtrack.training.presets import preset_config
from ebmtrack.weights import shipped_file

MSE_HEAD = shipped_file("box-head", "mobilenetv2", "default").path  # atom-iounet's
NCE_HEAD = shipped_file("box-head", "mobilenetv2", "pack").path  # atom-polished's, dimp-nce+'s


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    """Heads for a random MobileNetV2 that record mse, nce+ and no loss."""
    torch.manual_seed(0)
    backbone = create_backbone("mobilenetv2", pretrained=False)
    folder = tmp_path_factory.mktemp("heads")
    provenance = backbone_provenance(backbone, "random", "cpu, float32")
    made = {}
    for loss in ("mse", "nce+", None):
        extra = {"loss": loss} if loss else {}
        made[loss] = save_model(AtomIoUNet(IoUNetConfig.for_backbone(backbone)),
                                folder / f"{loss}.safetensors", {**provenance, **extra})
    return made


def test_the_loss_is_recorded_and_the_shipped_heads_are_known_by_their_bytes(heads):
    assert head_loss(heads["mse"]) == "mse" and head_loss(heads["nce+"]) == "nce+"
    assert head_loss(heads[None]) is None
    assert head_loss(MSE_HEAD) == "mse" and head_loss(NCE_HEAD) == "nce+"
    config = preset_config("pack-stream")  # a box-head run writes its loss into the file
    assert config.provenance(config.build_module())["loss"] == config.loss.name == "mse"


@pytest.mark.parametrize(
    "loss, climb, mode, refused",
    [
        ("mse", "iou", "refine", None),
        ("nce+", "ebm", "refine", None),
        ("nce+", "iou", "polished", None),  # atom-polished: the box is reported only
        ("mse", "ebm", "refine", "it predicts IoU, and ATOM climbs an energy f(x, y)"),
        ("mse", "ebm", "polished", "it predicts IoU"),
        ("nce+", "iou", "refine", "it scores an energy f(x, y), not IoU"),
        ("nce+", "iou", "gated", None),  # the scale search tracks; measured so
        ("nce+", "iou", "refine", "--option box_climb=ebm"),
    ],
)
def test_a_head_is_climbed_as_what_it_scores(heads, loss, climb, mode, refused):
    if refused is None:
        check_head_climb(heads[loss], climb, mode, "ATOM")
        return
    with pytest.raises(ValueError, match=re.escape(refused)) as error:
        check_head_climb(heads[loss], climb, mode, "ATOM")
    assert "\n" not in str(error.value) and f"trained with {loss}" in str(error.value)


def test_a_head_without_a_record_is_climbed_with_one_warning(heads, caplog):
    with caplog.at_level(logging.WARNING):
        check_head_climb(heads[None], "ebm", "refine", "dimp-nce+")
    assert len(caplog.records) == 1 and "records no training loss" in caplog.text


def test_trackers_refuse_the_other_kinds_shipped_head():
    with pytest.raises(ValueError, match="dimp-nce\\+ climbs an energy f.x, y.") as error:
        ebmtrack.load_tracker("dimp-nce+", weights=MSE_HEAD)
    assert "(or --option box_climb" not in str(error.value)  # dimp-nce+ has one climb
    with pytest.raises(ValueError, match="not IoU, and ATOM climbs a predicted IoU"):
        ebmtrack.load_tracker("atom-iounet", weights=NCE_HEAD, runtime="torch")
    with pytest.raises(ValueError, match="trained with mse: it predicts IoU"):
        ebmtrack.load_tracker("atom-iounet", weights=MSE_HEAD, box_climb="ebm", runtime="torch")
