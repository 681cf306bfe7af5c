"""The long-term study: runs are kept and resumed, settings are refused on the test set."""

import json
from pathlib import Path

import cv2
import long_term
import numpy as np
import pytest

from ebmtrack.tracking.base import TrackResult, TrackStatus
from ebmtrack.tracking.registry import TRACKERS, register_tracker

CALLS = []


class _Still:
    """Reports the first box with score 1 on every frame."""

    name = "still"

    def __init__(self, **options):
        CALLS.append(options)

    def initialize(self, frame, box):
        self.box = np.asarray(box, dtype=np.float64)

    def track(self, frame):
        return TrackResult(self.box.copy(), 1.0, TrackStatus.NORMAL)


def _otb(root: Path, name: str, frames: int) -> None:
    (root / name / "img").mkdir(parents=True)
    for i in range(frames):
        cv2.imwrite(str(root / name / "img" / f"{i + 1:04d}.png"), np.zeros((24, 32, 3), np.uint8))
    (root / name / "groundtruth_rect.txt").write_text("4,4,8,8\n" * frames)


@pytest.fixture
def study(tmp_path, monkeypatch):
    for name in ("a", "b"):
        _otb(tmp_path / "seqs", name, 30)
    register_tracker("still-test", _Still, replace=True)
    monkeypatch.setattr(long_term, "TRACKERS", {"still": ("still-test", {})})
    CALLS.clear()
    yield tmp_path
    TRACKERS.pop("still-test", None)


def test_runs_are_kept_and_resumed(study):
    argv = ["--out", str(study / "out"), "--set", "test", "--trackers", "still"]
    argv += ["--sequences", str(study / "seqs")]
    assert long_term.main(argv) == 0
    assert len(CALLS) == 4  # two hosts, each spliced twice, one tracker per sequence
    results = json.loads((study / "out" / "test.json").read_text())
    row = results["still"]["0"]
    # The still tracker always predicts the true (constant) box: absent frames cost precision.
    assert row["recall"] == pytest.approx(1.0) and row["precision"] < 1.0
    assert row["median_reacquire"] == 0.0 and row["returns"] == 4
    assert "| still | 1 |" in (study / "out" / "test.md").read_text()
    assert long_term.main(argv) == 0
    assert len(CALLS) == 4  # nothing ran again


def test_settings_are_refused_on_the_test_set(study, capsys):
    argv = ["--out", str(study / "out"), "--set", "test", "--setting", "redetect_threshold=0.5"]
    with pytest.raises(SystemExit) as err:
        long_term.main(argv)
    assert err.value.code == 2 and "never the test sequences" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        long_term.main(["--out", str(study / "out"), "--set", "test", "--trackers", "x"])
    assert err.value.code == 2
