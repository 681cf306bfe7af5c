import cv2
import numpy as np
import pytest
import torch

from ebmtrack.cli.main import main
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.models.serialization import save_model


def _frames(n=5):
    rng = np.random.default_rng(3)
    background = cv2.resize(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), (160, 120))
    target = cv2.resize(
        rng.integers(0, 256, (4, 5, 3), dtype=np.uint8), (40, 32), interpolation=cv2.INTER_NEAREST
    )
    frames = []
    for t in range(n):
        frame = background.copy()
        frame[40 + t : 72 + t, 50 + 2 * t : 90 + 2 * t] = target
        frames.append(frame)
    return frames


@pytest.fixture
def sequence(tmp_path):
    folder = tmp_path / "seq" / "img"
    folder.mkdir(parents=True)
    for i, frame in enumerate(_frames(), start=1):
        cv2.imwrite(str(folder / f"{i:04d}.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    return folder.parent


def _error_line(capsys):
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ebmtrack track: error:")
    return lines[0]


def _needs_imagenet_weights():
    from ebmtrack.models.backbones import create_backbone

    try:
        create_backbone("mobilenetv2", pretrained=True)
    except FileNotFoundError as err:
        pytest.skip(str(err))


@pytest.mark.slow
def test_tracks_a_sequence_folder_and_renders(sequence, tmp_path, caplog):
    _needs_imagenet_weights()
    out, video = tmp_path / "boxes.txt", tmp_path / "out.mp4"
    args = [str(sequence), "--init", "50,40,40,32", "--out", str(out), "--render", str(video)]
    code = main(["track", *args, "--no-progress"])  # the default: the runtime
    assert code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 5
    assert lines[0] == "50.00,40.00,40.00,32.00"
    boxes = np.array([[float(v) for v in line.split(",")] for line in lines])
    assert np.all(boxes[:, 2:] > 0)
    capture = cv2.VideoCapture(str(video))
    assert capture.isOpened() and int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 5
    capture.release()
    # The default tracker is a complete parameter set: nothing to warn about.
    assert not [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


@pytest.mark.slow
def test_tracks_a_video_file_to_stdout(tmp_path, capsys):
    _needs_imagenet_weights()
    path = tmp_path / "clip.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (160, 120))
    for frame in _frames(4):
        writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    writer.release()
    code = main(["track", str(path), "--init", "50,40,40,32", "--no-progress"])
    assert code == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 4


@pytest.mark.parametrize(
    "init, message",
    [
        ("500,500,10,10", "outside the first frame"),
        ("10,10,0,5", "positive width"),
        ("10,10,-4,5", "positive width"),
    ],
)
def test_bad_boxes(sequence, capsys, init, message):
    assert main(["track", str(sequence), "--init", init]) == 2
    assert message in _error_line(capsys)


@pytest.mark.parametrize("init", ["1,2,3", "a,b,c,d", "1,2,3,4,5", ""])
def test_malformed_init(sequence, capsys, init):
    assert main(["track", str(sequence), "--init", init]) == 2
    assert "--init must be X,Y,W,H" in _error_line(capsys)


def test_missing_empty_and_unreadable_sources(tmp_path, capsys):
    assert main(["track", str(tmp_path / "nothing"), "--init", "1,1,5,5"]) == 2
    assert "not found" in _error_line(capsys)
    (tmp_path / "empty").mkdir()
    assert main(["track", str(tmp_path / "empty"), "--init", "1,1,5,5"]) == 2
    assert "no image files" in _error_line(capsys)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00" * 100)
    assert main(["track", str(junk), "--init", "1,1,5,5"]) == 2
    assert "cannot open video" in _error_line(capsys)


def test_weights_that_do_not_match(sequence, tmp_path, capsys):
    other = IoUNetConfig(backbone="resnet18", feature_layers=("layer2", "layer3"))
    path = save_model(AtomIoUNet(other), tmp_path / "resnet_head.safetensors")
    base = ["track", str(sequence), "--init", "50,40,40,32", "--tracker", "atom-iounet"]
    base += ["--runtime", "torch"]  # the torch tracker reads --weights
    assert main([*base, "--weights", str(path)]) == 2
    assert "for backbone 'resnet18'" in _error_line(capsys)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"garbage")
    assert main([*base, "--weights", str(junk)]) == 2
    assert "not a safetensors file" in _error_line(capsys)
    missing = tmp_path / "absent.safetensors"
    assert main([*base, "--weights", str(missing)]) == 2
    assert "not found" in _error_line(capsys)


def test_unreadable_frame_keeps_the_boxes_written_so_far(sequence, tmp_path, capsys):
    _needs_imagenet_weights()
    (sequence / "img" / "0004.png").write_bytes(b"broken")
    out = tmp_path / "boxes.txt"
    out.write_text("an earlier run\n")
    args = ["track", str(sequence), "--init", "50,40,40,32", "--out", str(out)]
    assert main([*args, "--no-progress"]) == 2
    assert out.read_text() == "an earlier run\n"  # replaced only by a complete file
    partial = tmp_path / "boxes.txt.partial"
    assert len(partial.read_text().splitlines()) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ebmtrack track: error: frame 4: cannot decode image")
    assert err[-1].endswith(f"3 of 5 boxes written to {partial}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boxes.txt", "boxes.txt.partial", "seq"]


def test_bad_options(sequence, capsys):
    base = ["track", str(sequence), "--init", "50,40,40,32"]
    assert main([*base, "--backbone", "vgg"]) == 2  # the runtime's export fixes it
    assert "only the torch tracker takes" in _error_line(capsys)
    assert main([*base, "--runtime", "torch", "--backbone", "vgg"]) == 2
    assert "unknown backbone 'vgg'" in _error_line(capsys)
    assert main([*base, "--runtime", "torch", "--search-size", "100"]) == 2
    assert "multiple of 16" in _error_line(capsys)
    assert main([*base, "--tracker", "csrt", "--runtime", "lite"]) == 2
    assert "ships no export" in _error_line(capsys)
    assert main([*base, "--tracker", "nope"]) == 2
    assert "unknown tracker 'nope'" in _error_line(capsys)
    if not torch.cuda.is_available():
        assert main([*base, "--device", "cuda"]) == 2
        assert "CUDA is not available" in _error_line(capsys)


def test_max_frames_tracks_the_first_frames_and_completes(sequence, tmp_path, capsys):
    """``--max-frames N`` ends the run after N frames as at the source's end: the complete file
    is written (no .partial), the summary counts N; N below 1 is one argument error line."""
    out, video = tmp_path / "boxes.txt", tmp_path / "boxes.gif"
    args = ["track", str(sequence), "--init", "50,40,40,32", "--tracker", "kcf", "--out", str(out)]
    assert main([*args, "--render", str(video), "--max-frames", "3", "--no-progress"]) == 0
    assert len(out.read_text().splitlines()) == 3 and video.is_file()
    assert "ebmtrack track: 3 frames, 1 target" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boxes.gif", "boxes.txt", "seq"]
    assert main([*args, "--max-frames", "9", "--no-progress"]) == 0  # more than there are
    assert len(out.read_text().splitlines()) == 5
    capsys.readouterr()
    for given in ("0", "-3", "x"):  # one message, the valid range, whatever is wrong
        with pytest.raises(SystemExit) as exit_:
            main([*args, "--max-frames", given])
        assert exit_.value.code == 2
        line = f"argument --max-frames: must be an integer >= 1, got '{given}'"
        assert line in _error_line(capsys)


@pytest.mark.parametrize(
    "command, flag, hint",
    [
        ("track", "--serach-size", " (did you mean --search-size?)"),
        ("track", "--no-such-flag", ""),
        ("eval", "--runz", " (did you mean --runs?)"),
    ],
)
def test_an_unknown_flag_is_the_commands_error(sequence, tmp_path, capsys, command, flag, hint):
    """The line starts ``ebmtrack COMMAND: error:`` as for every other argument error (argparse
    reports unknown words from the top parser, as ``ebmtrack: error:``), names the closest
    flag of that command, and nothing runs."""
    base = {
        "track": ["track", str(sequence), "--init", "50,40,40,32", "--tracker", "kcf"],
        "eval": ["eval", str(sequence.parent), "--trackers", "kcf", "--out", str(tmp_path / "e")],
    }[command]
    with pytest.raises(SystemExit) as exit_:
        main([*base, flag, "3"])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"ebmtrack {command}: error: unrecognized arguments: {flag} 3{hint}"]
    assert not (tmp_path / "e").exists()
