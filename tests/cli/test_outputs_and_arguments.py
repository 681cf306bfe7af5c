"""Outputs never replace an input, and argument errors are one line: what a user types by
mistake (``--out`` on the source, a negative first x) gets one line, exit 2, and every file
that was there stays as it was."""

from __future__ import annotations

import subprocess

import pytest
from cli_helpers import ebmtrack, error_line, generated_sequences, snapshot

from ebmtrack.cli.main import main

INIT = "15,20,20,20"  # the first box of generated_sequences


@pytest.fixture
def data(tmp_path):
    return generated_sequences(tmp_path / "data", count=1, frames=4)


@pytest.fixture
def sequence(data):
    return data / "Square0"


@pytest.fixture
def cli(capsys):
    def run(*args) -> subprocess.CompletedProcess:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exit_:  # argparse's errors exit
            code = exit_.code
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def _video(path, frames=4):
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (120, 90))
    for k in range(frames):
        writer.write(np.full((90, 120, 3), 40 * k, np.uint8))
    writer.release()
    return path


# 1. outputs never replace an input ------------------------------------------------------


def test_out_or_render_onto_the_source_video_is_refused(tmp_path, cli):
    video = _video(tmp_path / "victim.avi")
    before = video.read_bytes()
    base = ["track", video, "--init", INIT, "--tracker", "kcf"]
    for flags in (["--out", video], ["--render", video], ["--out", tmp_path / "." / "victim.avi"]):
        line = error_line(cli(*base, *flags), "track")
        assert "its input" in line and "victim.avi" in line
    assert video.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.avi"]


@pytest.mark.parametrize("where", ["img/0001.png", "img/boxes.txt", "groundtruth_rect.txt"])
def test_out_inside_the_source_folder_is_refused(sequence, where, cli):
    before = snapshot(sequence)
    line = error_line(cli("track", sequence, "--init", INIT, "--tracker", "kcf", "--out",
                          sequence / where), "track")
    assert "lies inside the source" in line
    assert snapshot(sequence) == before


def test_out_and_render_are_not_one_file(sequence, tmp_path, cli):
    base = ["track", sequence, "--init", INIT, "--tracker", "kcf"]
    line = error_line(cli(*base, "--out", tmp_path / "a.mp4", "--render", tmp_path / "a.mp4"),
                      "track")
    assert "a.mp4" in line
    assert not (tmp_path / "a.mp4").exists()


@pytest.mark.parametrize(
    "out, fmt, message",
    [
        ("x.mp4", "auto", "a boxes file is text, not .mp4"),
        ("x.png", "txt", "a boxes file is text, not .png"),
        ("x.txt", "csv", "the suffix says txt, --format says csv"),
        ("x.csv", "jsonl", "the suffix says csv, --format says jsonl"),
    ],
)
def test_out_suffix_must_fit_the_format(sequence, tmp_path, out, fmt, message, cli):
    done = cli("track", sequence, "--init", INIT, "--tracker", "kcf", "--format", fmt,
               "--out", tmp_path / out)
    assert message in error_line(done, "track")
    assert not (tmp_path / out).exists()


def test_eval_out_inside_the_data_set_is_refused(data, cli):
    before = snapshot(data)
    line = error_line(cli("eval", data, "--trackers", "kcf", "--out", data / "runs"), "eval")
    assert "lies inside the data set" in line
    assert snapshot(data) == before


@pytest.fixture
def linked(data, tmp_path):
    """A data set ``linked`` whose one sequence is a link to ``data/Square0``."""
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "Square0").symlink_to(data / "Square0")
    return tmp_path / "linked"


@pytest.mark.parametrize("through", ["link", "real path"])
def test_eval_out_inside_a_linked_sequence_is_refused(data, linked, through, cli):
    """The sequences' real folders are compared, not the data set's: results written through
    a link (or by the real path, with the links as the data set) would land in the sequence."""
    before = snapshot(data)
    out = (linked if through == "link" else data) / "Square0" / "res"
    line = error_line(cli("eval", linked, "--trackers", "kcf", "--out", out), "eval")
    assert f"lies inside the sequence folder of Square0 {data.resolve() / 'Square0'}" in line
    assert snapshot(data) == before and not out.exists()


@pytest.mark.parametrize("source", ["img", "linked img"])
def test_track_out_onto_the_ground_truth_beside_img_is_refused(sequence, linked, source, cli):
    """Frames in ``img/`` are a sequence's: its folder, with the ground truth, is an input."""
    frames = sequence / "img" if source == "img" else linked / "Square0" / "img"
    before = snapshot(sequence)
    for out in (sequence / "groundtruth_rect.txt", linked / "Square0" / "boxes.txt"):
        line = error_line(cli("track", frames, "--init", INIT, "--tracker", "kcf", "--out", out),
                          "track")
        assert f"lies inside the sequence folder {sequence.resolve()}" in line
    assert snapshot(sequence) == before


# 2. negative numbers, and argument errors in one line -------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [["--init", "-5,20,20,20"], ["--init", "-5 20 20 20"], ["--init=-5,20,20,20"]],
)
def test_a_first_box_with_a_negative_x_in_every_spelling(sequence, tmp_path, spelling, cli):
    out = tmp_path / "boxes.txt"
    done = cli("track", sequence, *spelling, "--tracker", "kcf", "--out", out, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines()[0] == "0.00,20.00,15.00,20.00"  # clipped to the frame


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--threads", "-1"], "argument --threads: must be an integer >= 0, got '-1'"),
        (["--format", "xml"], "argument --format: invalid choice: 'xml'"),
        (["--threads"], "argument --threads: expected one argument"),
    ],
)
def test_argument_errors_are_one_line_without_the_usage(sequence, flags, message, cli):
    line = error_line(cli("track", sequence, "--init", INIT, *flags), "track")
    assert message in line


def test_the_real_command_refuses_in_one_line(sequence):
    # Through the console script: exit 2, one line, no usage dump.
    assert "--threads" in error_line(ebmtrack("track", sequence, "--threads", "-1"), "track")
