"""A damaged frame (a JPEG cut short, which libjpeg decodes half grey) or a frame of another size
in a folder is a bad frame: named by its number and path, and handled as --on-bad-frame says
(stop: exit 2, what was written kept as PATH.partial; skip: the frame's status ``skipped``)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from cli_helpers import ebmtrack, error_line

from ebmtrack.data.io import jpeg_ends_early

FLAGS = ["--tracker", "kcf", "--init", "20,20,20,20", "--no-progress"]


def _jpeg_folder(folder, damage=None, size_of=None):
    """Six JPEG frames of a square; frame 4 cut to a third (``damage``) or twice as large."""
    (folder / "img").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k in range(6):
        frame = rng.integers(30, 60, (60, 80, 3), dtype=np.uint8)
        frame[20:40, 20 + k : 40 + k] = 220
        if k == 3 and size_of:
            frame = cv2.resize(frame, (160, 120))
        data = cv2.imencode(".jpg", frame)[1].tobytes()
        if k == 3 and damage:
            data = data[: len(data) // 3]
        (folder / "img" / f"{k + 1:04d}.jpg").write_bytes(data)
    return folder


@pytest.mark.parametrize(
    "kind, reason",
    [("truncated", "the JPEG data ends early"), ("resized", "is 160x120, the first frame 80x60")],
)
def test_a_bad_frame_stops_the_run_and_keeps_the_partial(tmp_path, kind, reason):
    folder = _jpeg_folder(tmp_path / "seq", damage=kind == "truncated", size_of=kind == "resized")
    out = tmp_path / "boxes.txt"
    line = error_line(ebmtrack("track", folder, *FLAGS, "--out", out), "track")
    assert line.startswith("ebmtrack track: error: frame 4: ") and reason in line
    assert str(folder / "img" / "0004.jpg") in line
    assert line.endswith(f"3 of 6 boxes written to {out}.partial")
    assert not out.exists() and len((tmp_path / "boxes.txt.partial").read_text().splitlines()) == 3


@pytest.mark.parametrize("kind", ["truncated", "resized"])
def test_a_bad_frame_is_skipped_when_asked(tmp_path, kind):
    folder = _jpeg_folder(tmp_path / "seq", damage=kind == "truncated", size_of=kind == "resized")
    out = tmp_path / "boxes.csv"
    done = ebmtrack("track", folder, *FLAGS, "--out", out, "--on-bad-frame", "skip")
    assert done.returncode == 0, done.stderr
    rows = [r.split(",") for r in out.read_text().splitlines()[1:]]
    assert [r[7] for r in rows] == ["normal"] * 3 + ["skipped"] + ["normal"] * 2
    warning = done.stderr.splitlines()[0]
    assert warning.startswith("ebmtrack track: warning: frame 4: ") and "0004.jpg" in warning
    assert "decoders reported damaged input" not in done.stderr  # named, not counted


def test_the_end_marker_test_reads_whole_and_cut_files():
    frame = np.random.default_rng(1).integers(0, 255, (40, 50, 3), dtype=np.uint8)
    data = cv2.imencode(".jpg", frame)[1].tobytes()
    assert not jpeg_ends_early(data) and not jpeg_ends_early(data + b"trailing bytes")
    assert all(jpeg_ends_early(data[:cut]) for cut in (len(data) // 3, len(data) - 2))
