"""Lines that libjpeg prints to stderr itself never reach the user between ebmtrack's lines."""

import cv2
import numpy as np
from cli_helpers import ebmtrack, error_line

from ebmtrack.cli.native_output import LIBRARY_LINE


def _jpeg_frames(folder, damage):
    """Six JPEG frames of a square; ``damage(index, data)`` may change a frame's bytes."""
    (folder / "img").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k in range(6):
        frame = rng.integers(30, 60, (60, 80, 3), dtype=np.uint8)  # texture: scan data to cut
        frame[20:40, 20 + k : 40 + k] = 220
        data = cv2.imencode(".jpg", frame)[1].tobytes()
        (folder / "img" / f"{k + 1:04d}.jpg").write_bytes(damage(k, data))
    return folder


def _extraneous(data: bytes) -> bytes:
    """A whole JPEG with 16 stray bytes before its end marker: it decodes, and libjpeg
    prints "Corrupt JPEG data: 10 extraneous bytes before marker 0xd9" itself. (A JPEG cut short
    is a bad frame of ours: tests/cli/test_bad_frames.py.)"""
    return data[:-2] + bytes(16) + data[-2:]


def test_a_damaged_jpeg_is_one_warning_of_ours(tmp_path):
    folder = _jpeg_frames(tmp_path / "seq", lambda k, d: _extraneous(d) if k == 3 else d)
    flags = ["--tracker", "kcf", "--init", "20,20,20,20", "--no-progress"]
    done = ebmtrack("track", folder, *flags)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 6
    lines = done.stderr.strip().splitlines()
    assert all(line.startswith("ebmtrack track: ") for line in lines), lines  # ours only
    warning = (
        "ebmtrack track: warning: the image / video decoders reported damaged input 1 time(s), "
        "first: Corrupt JPEG data: "
    )
    assert lines[-1].startswith(warning) and done.stderr.count("Corrupt JPEG data") == 1


def test_an_undecodable_jpeg_is_the_error_line_alone(tmp_path):
    folder = _jpeg_frames(tmp_path / "seq", lambda k, d: d[:4] + bytes(512) if k == 4 else d)
    out = tmp_path / "boxes.txt"
    flags = ["--tracker", "kcf", "--init", "20,20,20,20", "--no-progress", "--out", out]
    done = ebmtrack("track", folder, *flags)
    line = error_line(done, "track")
    assert "cannot decode image" in line and "JPEG" not in line.split("cannot")[0]


def test_the_patterns_hold_library_lines_only():
    held = (
        b"Premature end of JPEG file\n",
        b"Corrupt JPEG data: 12 extraneous bytes\n",
        b"[mov,mp4,m4a,3gp,3g2,mj2 @ 0x55d0c8a0] moov atom not found\n",
    )
    for line in held:
        assert LIBRARY_LINE.match(line), line
    for line in (b"ebmtrack track: warning: x\n", b"eval: 10%|#  | 5/50\r", b"Traceback\n"):
        assert not LIBRARY_LINE.match(line), line
