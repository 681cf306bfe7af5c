"""The ``nanotrack-v3`` peer: NanoTrack v3 with its authors' tracker logic on the shipped
networks. It is registered without options, follows a moving target, clips its state as
NanoTrack does, and runs in the default install (no PyTorch) through ``load_tracker``,
``ebmtrack track`` and ``ebmtrack eval``."""

import json
from pathlib import Path

import numpy as np
import pytest
from default_install import TRAIN_MODULES, run_command, run_python

import ebmtrack
from ebmtrack.tracking.nanotrack import MIN_SIZE, NanoTrackTracker, clip_state
from ebmtrack.tracking.registry import tracker_kind, tracker_names
from ebmtrack.values import OptionError


def _frame(center, size=(48, 40), seed=0) -> np.ndarray:
    """240 x 320 RGB: smooth noise, a striped ellipse of ``size`` at ``center``."""
    rng = np.random.default_rng(seed)
    frame = np.kron(rng.integers(60, 120, (8, 10, 3)), np.ones((30, 32, 1))).astype(np.float64)
    yy, xx = np.mgrid[:240, :320]
    inside = ((xx - center[0]) / (size[0] / 2)) ** 2 + ((yy - center[1]) / (size[1] / 2)) ** 2 < 1
    stripes = 200 + 55 * np.sign(np.sin((xx - center[0]) / size[0] * 12))
    frame[inside] = np.stack([stripes, 40 + 0 * xx, 255 - stripes], -1)[inside]
    return frame.astype(np.uint8)


def test_it_is_registered_as_a_peer_without_options():
    assert "nanotrack-v3" in tracker_names()
    assert not tracker_kind("nanotrack-v3").backbone  # no PyTorch, no backbone of ours
    tracker = ebmtrack.load_tracker("nanotrack-v3")
    assert isinstance(tracker, NanoTrackTracker) and tracker.name == "nanotrack-v3"
    assert (tracker.estimator.channels, tracker.estimator.cells) == (96, 15)
    config = tracker.estimator.config  # the authors' values for v3
    assert (config.siamese_window, config.penalty, config.size_rate) == (0.455, 0.138, 0.348)
    with pytest.raises(OptionError, match="takes no option"):
        ebmtrack.load_tracker("nanotrack-v3", siamese_penalty=0.1)
    with pytest.raises(ValueError, match="^siamese_model must be one of v2, v3, got 'v9'$"):
        NanoTrackTracker("v9")


def test_it_follows_a_target_that_moves():
    tracker = ebmtrack.load_tracker("nanotrack-v3")
    tracker.initialize(_frame((100, 120)), (76, 100, 48, 40))
    for step in range(1, 9):  # 6 px right, 3 px down a frame
        truth = np.array([100 + 6 * step, 120 + 3 * step], dtype=float)
        result = tracker.track(_frame(truth))
        center = result.box[:2] + result.box[2:] / 2
        assert np.abs(center - truth).max() < 6, (step, center, truth)
        assert np.all(np.abs(result.box[2:] - (48, 40)) < 12)
        assert result.status == "normal" and 0.5 < result.score <= 1


def test_the_state_is_clipped_as_nanotrack_clips_it():
    # the centre inside the frame; width and height between 10 px and the frame's
    center, size = clip_state(np.array([-5.0, 300.0]), np.array([4.0, 900.0]), (240, 320, 3))
    np.testing.assert_array_equal(center, [0.0, 240.0])
    np.testing.assert_array_equal(size, [MIN_SIZE, 240.0])
    center, size = clip_state(np.array([50.0, 60.0]), np.array([30.0, 20.0]), (240, 320))
    np.testing.assert_array_equal(center, [50.0, 60.0])
    np.testing.assert_array_equal(size, [30.0, 20.0])


def test_it_tracks_where_torch_cannot_be_imported():
    done = run_python(
        """
        import json, numpy as np
        import ebmtrack
        frame = np.zeros((120, 160, 3), np.uint8)
        frame[40:70, 50:90] = (250, 30, 30)
        tracker = ebmtrack.load_tracker("nanotrack-v3")
        tracker.initialize(frame, (50, 40, 40, 30))
        box = tracker.track(np.roll(frame, 4, axis=1)).box.tolist()
        assert not {"torch", "onnx", "scipy"} & set(sys.modules)
        print(json.dumps(box))
        """
    )
    assert done.returncode == 0, done.stderr[-3000:]
    box = json.loads(done.stdout)
    assert abs(box[0] - 54) < 4 and abs(box[1] - 40) < 4


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """A data set folder of one sequence: the first 12 frames of the demo clip."""
    folder = tmp_path_factory.mktemp("clips") / "Couple"
    (folder / "img").mkdir(parents=True)
    source = Path(ebmtrack.__file__).parent / "demo_data" / "Couple"
    for path in sorted(source.glob("img/*.jpg"))[:12]:
        (folder / "img" / path.name).write_bytes(path.read_bytes())
    lines = (source / "groundtruth_rect.txt").read_text().splitlines()
    (folder / "groundtruth_rect.txt").write_text("\n".join(lines[:12]) + "\n")
    return folder


@pytest.mark.slow
def test_the_commands_run_it_without_torch(clip, tmp_path):
    out = tmp_path / "boxes.txt"
    done = run_command(
        ["track", clip / "img", "--init", "51,47,25,62", "--tracker", "nanotrack-v3", "--out", out]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(out.read_text().splitlines()) == 12
    # as in the default install: matplotlib (eval's plots) present, PyTorch missing
    missing = [name for name in TRAIN_MODULES if name != "matplotlib"]
    done = run_command(
        [
            "eval",
            clip.parent,
            "--trackers",
            "nanotrack-v3",
            "--out",
            tmp_path / "eval",
            "--no-progress",
        ],
        blocked=missing,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| nanotrack-v3 |" in (tmp_path / "eval" / "report.md").read_text()
