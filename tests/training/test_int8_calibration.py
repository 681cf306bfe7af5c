"""Measuring the int8 ranges on a training pack: the crops, and the command end to end."""

import cv2
import numpy as np
import pytest

from ebmtrack.models.backbones.int8 import load_ranges
from ebmtrack.training.int8_calibration import calibration_crops, main
from ebmtrack.training.sources.pack import PACK_HOLDOUT
from ebmtrack.weights import int8_ranges


def _pack(root, tracks):
    """A pack with OTB-layout tracks whose frames are filled with ``value``."""
    for name, value in tracks.items():
        folder = root / "sequences" / name
        (folder / "img").mkdir(parents=True)
        for k in range(4):
            cv2.imwrite(str(folder / "img" / f"{k + 1:04d}.png"), np.full((90, 120, 3), value))
        (folder / "groundtruth_rect.txt").write_text("40,30,30,20\n" * 4)
    return root


def test_crops_come_from_the_training_tracks_only(tmp_path):
    pack = _pack(tmp_path, {"train_a": 100, "train_b": 150, PACK_HOLDOUT[0]: 250})
    crops, info = calibration_crops(pack, count=6, seed=0, size=64)
    assert crops.shape == (6, 3, 64, 64) and crops.dtype == np.float32
    assert set(np.unique(crops)) <= {100.0, 150.0}  # never the held-out track's 250
    assert {100.0, 150.0} <= set(np.unique(crops))  # tracks take turns
    assert info["tracks"] == 2 and info["crops"] == 6 and info["data"].startswith("training pack")
    again, _ = calibration_crops(pack, count=6, seed=0, size=64)
    np.testing.assert_array_equal(crops, again)  # seeded
    with pytest.raises(ValueError, match="no training tracks"):
        calibration_crops(_pack(tmp_path / "held", {PACK_HOLDOUT[1]: 10}), count=2)


@pytest.mark.slow
def test_the_command_writes_the_table_the_package_ships(tmp_path):
    rng = np.random.default_rng(0)
    pack = tmp_path / "pack"
    for name in ("train_a", "train_b"):
        folder = pack / "sequences" / name
        (folder / "img").mkdir(parents=True)
        for k in range(2):
            image = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
            cv2.imwrite(str(folder / "img" / f"{k + 1:04d}.png"), image)
        (folder / "groundtruth_rect.txt").write_text("60,40,30,30\n" * 2)
    out = tmp_path / "ranges.json"
    main(["--pack", str(pack), "--out", str(out), "--crops", "2", "--float-layers", "features.0"])
    written = {entry.weights_key: entry for entry in load_ranges(out)}
    shipped = {entry.weights_key: entry for entry in load_ranges(int8_ranges())}
    # each source of the ImageNet weights installed here (the shipped copy at least)
    assert written and written.keys() <= shipped.keys()
    for key, entry in written.items():
        assert entry.ranges.keys() == shipped[key].ranges.keys()  # the same tensors
        assert entry.float_layers == ("features.0",) and entry.info["crops"] == 2
