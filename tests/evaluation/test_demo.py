import json

import cv2
import numpy as np
import pytest
from PIL import Image

from ebmtrack.cli.main import main
from ebmtrack.data.datasets import read_boxes
from ebmtrack.evaluation import metrics as M
from ebmtrack.evaluation.demo import (
    DEMO_CLIP,
    DemoConfig,
    demo_sequence,
    prepare_output_folder,
    run_demo,
)

FRAMES = 12


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    # OpenCV's KCF keeps this fast; the files and scores do not depend on which tracker runs.
    out = tmp_path_factory.mktemp("demo") / "out"
    result = run_demo(DemoConfig(out=out, tracker="kcf", max_frames=FRAMES, progress=False))
    return out, result


def test_shipped_clip_is_complete_and_colour():
    sequence = demo_sequence()
    assert sequence.name == DEMO_CLIP
    assert len(sequence) == 140
    assert all(path.is_file() for path in sequence.frames)
    first = sequence.frame(0, keep_gray=True)
    assert first.shape == (240, 320, 3)
    assert np.ptp(first.astype(int)[..., 0] - first[..., 2]) > 0, "frames must be in colour"
    total = sum(path.stat().st_size for path in sequence.frames)
    assert total < 5 * 2**20


def test_prefix_keeps_first_frames_and_rejects_too_short():
    sequence, full = demo_sequence(5), demo_sequence()
    assert len(sequence) == 5
    assert sequence.frames == full.frames[:5]
    np.testing.assert_array_equal(sequence.ground_truth, full.ground_truth[:5])
    with pytest.raises(ValueError, match="max_frames"):
        demo_sequence(1)


@pytest.mark.slow
def test_demo_writes_every_file(demo_run):
    out, result = demo_run
    names = {"demo.mp4", "demo.gif", "success.png", "boxes.txt", "metrics.json"}
    assert names <= {p.name for p in out.iterdir()}
    assert {p.name for p in result.files.values()} == names
    assert result.frames == FRAMES


def test_mp4_has_one_frame_per_tracked_frame(demo_run):
    out, _ = demo_run
    capture = cv2.VideoCapture(str(out / "demo.mp4"))
    count = 0
    while capture.read()[0]:
        count += 1
    capture.release()
    assert count == FRAMES


def test_gif_opens(demo_run):
    out, _ = demo_run
    with Image.open(out / "demo.gif") as gif:
        assert gif.format == "GIF"
        assert gif.n_frames == FRAMES  # under the budget's max_frames: every frame kept
        assert max(gif.size) <= DemoConfig().gif.max_side


def test_metrics_match_boxes_file(demo_run):
    out, result = demo_run
    saved = json.loads((out / "metrics.json").read_text())
    boxes = read_boxes(out / "boxes.txt")
    gt = demo_sequence(FRAMES).ground_truth
    assert boxes.shape == (FRAMES, 4)
    np.testing.assert_allclose(boxes[0], gt[0])  # the first line is the initial box
    auc = M.area_under_curve(M.success_curve(M.box_iou(boxes, gt)))
    precision = M.curve_at(
        M.precision_curve(M.center_error(boxes, gt)), M.PRECISION_THRESHOLDS, 20.0
    )
    assert saved["auc"] == pytest.approx(auc, abs=1e-12)
    assert saved["precision_20px"] == pytest.approx(precision, abs=1e-12)
    assert saved["auc"] == pytest.approx(result.auc)
    assert saved["frames"] == FRAMES
    assert saved["fps_loop"] <= saved["fps_tracking"], "the loop includes the tracking time"


def test_no_video_skips_video_files(tmp_path):
    out = tmp_path / "novideo"
    result = run_demo(DemoConfig(out=out, tracker="kcf", max_frames=3, video=False, progress=False))
    assert not (out / "demo.mp4").exists() and not (out / "demo.gif").exists()
    assert set(result.files) == {"boxes", "success", "metrics"}


def test_out_that_is_a_file_is_rejected(tmp_path):
    path = tmp_path / "taken"
    path.write_text("x")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        prepare_output_folder(path)
    with pytest.raises(NotADirectoryError, match="not a folder"):
        prepare_output_folder(path / "below")


def test_unwritable_out_is_a_value_error(tmp_path, monkeypatch):
    # Permissions cannot be relied on here (root writes anywhere), so the write probe fails.
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("ebmtrack.evaluation.demo.tempfile.TemporaryFile", refuse)
    with pytest.raises(ValueError, match="cannot write to .*Permission denied"):
        prepare_output_folder(tmp_path / "demo")


def test_cli_bad_out_is_one_line(tmp_path, capsys):
    path = tmp_path / "file.txt"
    path.write_text("x")
    assert main(["demo", "--out", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ebmtrack demo: error:") and "\n" not in err


def test_backbone_refused_by_a_tracker_without_one(tmp_path):
    with pytest.raises(ValueError, match="tracker 'kcf' has no backbone of ours"):
        run_demo(DemoConfig(out=tmp_path, tracker="kcf", backbone="resnet18", progress=False))


def test_threads_are_validated_and_restored(tmp_path):
    import torch

    with pytest.raises(ValueError, match="threads must be a positive number"):
        run_demo(DemoConfig(out=tmp_path, tracker="kcf", threads=0, progress=False))
    before = torch.get_num_threads()
    run_demo(
        DemoConfig(
            out=tmp_path,
            tracker="kcf",
            max_frames=2,
            video=False,
            threads=before + 1,
            progress=False,
        )
    )
    assert torch.get_num_threads() == before
