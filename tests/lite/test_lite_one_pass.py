"""One backbone pass (``classifier_features="siamese"``) in both runtimes: an export of such a
tracker carries the option and the runtime runs it so, the shipped export takes the option, and
the torch tracker and the runtime track a real sequence to the same boxes."""

import json
from pathlib import Path

import numpy as np
import pytest

import ebmtrack
from ebmtrack import lite
from ebmtrack.data.io import read_image
from ebmtrack.export import export_tracker

COUPLE = Path(ebmtrack.__file__).parent / "demo_data" / "Couple"


def couple(count: int):
    """The first ``count`` frames of the bundled demo sequence and its first box."""
    paths = sorted((COUPLE / "img").glob("*.jpg"))[:count]
    first = np.loadtxt(COUPLE / "groundtruth_rect.txt", delimiter=",", max_rows=1)
    return [read_image(path) for path in paths], first


def boxes(tracker, frames, first) -> np.ndarray:
    tracker.initialize(frames[0], first)
    return np.array([tracker.track(frame).box for frame in frames[1:]])


@pytest.mark.slow
def test_an_export_of_one_pass_carries_it_and_tracks_as_the_torch_tracker(tmp_path):
    out = export_tracker("atom", tmp_path / "one-pass", classifier_features="siamese")
    assert json.loads((out / "params.json").read_text())["classifier_features"] == "siamese"
    ours = lite.load(out)
    assert ours.one_pass and ours._backbone is None
    frames, first = couple(8)
    theirs = ebmtrack.load_tracker("atom", runtime="torch", classifier_features="siamese")
    np.testing.assert_allclose(boxes(ours, frames, first), boxes(theirs, frames, first), atol=0.1)


@pytest.mark.slow
def test_the_shipped_export_and_the_torch_tracker_give_the_same_boxes():
    """Free-running (no state copied), 30 frames: the classifier's training in float32 on both
    sides leaves the boxes within 0.1 px (0.0 measured)."""
    frames, first = couple(31)
    ours = ebmtrack.load_tracker("atom", classifier_features="siamese")
    theirs = ebmtrack.load_tracker("atom", runtime="torch", classifier_features="siamese")
    assert isinstance(ours, lite.LiteTracker) and ours.one_pass
    mine, reference = boxes(ours, frames, first), boxes(theirs, frames, first)
    np.testing.assert_allclose(mine, reference, atol=0.1)
    truth = np.loadtxt(COUPLE / "groundtruth_rect.txt", delimiter=",")[1:31]
    centers = np.abs((mine[:, :2] + mine[:, 2:] / 2) - (truth[:, :2] + truth[:, 2:] / 2))
    assert centers.max() < 15  # and both follow the target


def test_the_runtime_refuses_one_pass_with_another_box_mode():
    with pytest.raises(
        ValueError, match="box_mode 'scale' needs the classifier on the tracker's own backbone"
    ):
        ebmtrack.load_tracker("atom", classifier_features="siamese", box_mode="scale")
    with pytest.raises(ValueError, match="classifier_features must be one of auto, backbone, sia"):
        ebmtrack.load_tracker("atom", classifier_features="both")
