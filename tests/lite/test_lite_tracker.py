"""The torch-free tracker: it runs where ``import torch`` fails, and frame by frame it gives the
torch tracker's boxes on real sequences."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from default_install import EXTRA, TRAIN_MODULES, run_command, run_python

import ebmtrack
from ebmtrack import lite
from ebmtrack.data.io import read_image
from ebmtrack.export import copy_state
from ebmtrack.tracking.base import TrackResult

SEQUENCES = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "sequences"

# Blocked in the child: every name fails to import, as in a virtual environment with NumPy,
# ONNX Runtime and OpenCV only.
LIBRARIES_ONLY = {*TRAIN_MODULES, "PIL", "yaml", "tqdm", "matplotlib"}


def run_child(code: str) -> subprocess.CompletedProcess:
    return run_python(code, LIBRARIES_ONLY)


def test_the_blocker_blocks_torch():
    result = run_child("import torch")
    assert result.returncode != 0 and "No module named 'torch'" in result.stderr


def test_importing_ebmtrack_and_the_runtime_needs_no_torch():
    result = run_child(
        """
        import ebmtrack, ebmtrack.lite
        from ebmtrack.lite import load, OpenCVStyleTracker, TrackResult
        import ebmtrack.lite.tracker, ebmtrack.lite.head, ebmtrack.lite.cv_style
        assert "torch" not in sys.modules
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"


@pytest.mark.slow
def test_an_export_tracks_where_torch_cannot_be_imported(atom_export):
    result = run_child(
        f"""
        import json, numpy as np
        import ebmtrack.lite
        rng = np.random.default_rng(0)
        frame = rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)
        frame[100:140, 120:180] = 255
        tracker = ebmtrack.lite.load({str(atom_export)!r})
        tracker.initialize(frame, (120, 100, 60, 40))
        boxes = [tracker.track(np.roll(frame, 2 * i, axis=1)).box.tolist() for i in range(1, 4)]
        cv = ebmtrack.lite.OpenCVStyleTracker.create({str(atom_export)!r})
        cv.init(frame[:, :, ::-1], (120, 100, 60, 40))
        ok, box = cv.update(frame[:, :, ::-1])
        assert "torch" not in sys.modules and "onnx" not in sys.modules
        print(json.dumps({{"boxes": boxes, "ok": ok, "box": box}}))
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    # the bright block moves right 2 px a frame: the boxes follow it
    xs = [box[0] for box in out["boxes"]]
    assert xs[0] < xs[-1] and abs(xs[-1] - 126) < 4
    assert out["ok"] and abs(out["box"][0] - 120) <= 3


def frames_of(name: str, count: int):
    folder = SEQUENCES / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    paths = sorted((folder / "img").glob("*.jpg"))[:count]
    first = np.loadtxt(folder / "groundtruth_rect.txt", delimiter=",", max_rows=1)
    return [read_image(path) for path in paths], first


def float64_training(monkeypatch) -> None:
    """The torch tracker's classifier trained in float64 (then rounded to float32, as lite's
    ``training_dtype="float64"`` does)."""
    from ebmtrack.models import atom_classifier as ac
    from ebmtrack.tracking.atom import classifier as part

    def fit(model, samples, labels, weights, gn_iters=6, cg_iters=10):
        wide = ac.AtomClassifier(model.config).double()
        with torch.no_grad():
            wide.filter.copy_(model.filter)
            wide.projection.copy_(model.projection)
        ac.fit_classifier(
            wide, samples.double(), labels.double(), weights.double(), gn_iters, cg_iters
        )
        with torch.no_grad():
            model.filter.copy_(wide.filter.float())
            model.projection.copy_(wide.projection.float())

    monkeypatch.setattr(part, "fit_classifier", fit)


@pytest.mark.slow
@pytest.mark.parametrize("sequence", ["Car1", "Jumping", "Skiing"])
def test_the_first_frame_gives_the_torch_trackers_classifier(sequence, atom_export, monkeypatch):
    frames, box = frames_of(sequence, 1)
    float64_training(monkeypatch)
    theirs = ebmtrack.load_tracker("atom", runtime="torch")
    ours = lite.load(atom_export, training_dtype="float64")
    theirs.initialize(frames[0], box)
    ours.initialize(frames[0], box)
    a, b = theirs.state, ours._state
    np.testing.assert_allclose(b.center, a.center)
    np.testing.assert_allclose(b.size, a.size)
    want_filter = a.model.filter.detach().numpy()[0]
    np.testing.assert_allclose(b.filter, want_filter, atol=1e-4 * np.abs(want_filter).max())
    want = a.model.projection.detach().numpy()[:, :, 0, 0]
    np.testing.assert_allclose(b.projection, want, atol=1e-4 * np.abs(want).max())
    np.testing.assert_allclose(b.memory.samples, a.memory.samples.numpy(), atol=1e-3)


def step_by_step(export: Path, name: str, sequence: str, count: int, **options) -> list[tuple]:
    """Each frame tracked by both trackers from the same state (the torch tracker's, copied):
    [(torch result, lite result, lite state's box after the frame)]."""
    frames, box = frames_of(sequence, count)
    theirs = ebmtrack.load_tracker(name, runtime="torch", **options)
    ours = lite.load(export, **{k: v for k, v in options.items() if k != "precision"})
    theirs.initialize(frames[0], box)
    ours.initialize(frames[0], box)
    pairs = []
    for frame in frames[1:]:
        copy_state(theirs, ours)
        pairs.append((theirs.track(frame), ours.track(frame)))
        pairs[-1] += (ours._state.box(),)
    return pairs


@pytest.mark.slow
@pytest.mark.parametrize("sequence", ["Car1", "Jumping", "Skiing"])
def test_each_frame_gives_the_torch_trackers_box(sequence, atom_export):
    pairs = step_by_step(atom_export, "atom", sequence, 12)
    for index, (a, b, _) in enumerate(pairs, start=1):
        assert isinstance(b, TrackResult) and b.status == a.status, index
        assert np.abs(b.box - a.box).max() <= 1.0, (index, a.box, b.box)
        assert b.score == pytest.approx(a.score, rel=1e-3, abs=1e-3)
        assert b.confidence == pytest.approx(a.confidence, abs=1e-3)


@pytest.mark.slow
def test_the_position_rule_is_the_torch_trackers(atom_export):
    """Both trackers read the classifier's bound on the siamese box from one piece
    (:mod:`ebmtrack.lite.position`): with it on, the same boxes frame by frame."""
    rule = {"classifier_weight": 8.0, "distractor_growth": False}
    pairs = step_by_step(atom_export, "atom", "Jumping", 12, **rule)
    for index, (a, b, _) in enumerate(pairs, start=1):
        assert b.status == a.status, index
        assert np.abs(b.box - a.box).max() <= 1.0, (index, a.box, b.box)


@pytest.mark.slow
def test_the_box_head_path_gives_the_torch_trackers_boxes(polished_export):
    pairs = step_by_step(polished_export, "atom-polished", "Car1", 8, precision="float32")
    polished = 0
    for index, (a, b, state_box) in enumerate(pairs, start=1):
        assert b.status == a.status, index
        assert np.abs(b.box - a.box).max() <= 1.0, (index, a.box, b.box)
        polished += np.abs(b.box - state_box).max() > 0.5  # the head's box, not the state's
    assert polished >= len(pairs) // 2


@pytest.mark.slow
def test_a_changed_export_is_refused(atom_export, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(atom_export, copy)
    params = json.loads((copy / "params.json").read_text())
    params["seed"] = 7
    (copy / "params.json").write_text(json.dumps(params))
    with pytest.raises(ValueError, match="params.json: sha256 differs"):
        lite.load(copy)


@pytest.mark.slow
def test_options_are_checked(atom_export):
    with pytest.raises(ValueError, match="search_size is fixed"):
        lite.load(atom_export, search_size=256)
    with pytest.raises(ValueError, match="unknown option 'speed'"):
        lite.load(atom_export, speed=2)
    with pytest.raises(ValueError, match="needs a box head"):
        lite.load(atom_export, box_mode="polished")
    with pytest.raises(ValueError, match="seed must be an integer, got 'one'"):
        lite.load(atom_export, seed="one")
    with pytest.raises(ValueError, match="climbs the box head with ATOM's IoU ascent only"):
        lite.load(atom_export, box_climb="ebm")
    assert lite.load(atom_export, seed=2, box_mode="position").params["seed"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["onnx-int8", "onnx"])
def test_the_first_frame_in_batches_gives_the_features_of_one_batch(atom_export, runtime):
    tracker = lite.load(atom_export, backbone_runtime=runtime, classifier_features="backbone")
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, size=(7, 3, 288, 288)).astype(np.float32)
    batched = tracker._features(images)
    tracker.batch = len(images)
    whole = tracker._features(images)
    np.testing.assert_allclose(batched[tracker.layer], whole[tracker.layer], rtol=0, atol=1e-5)


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """The first 4 frames of the demo clip, as a folder of frames."""
    folder = tmp_path_factory.mktemp("clip")
    source = Path(ebmtrack.__file__).parent / "demo_data" / "Couple" / "img"
    for path in sorted(source.glob("*.jpg"))[:4]:
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


@pytest.mark.parametrize(
    ("args", "needs"),
    [
        (["export", "--tracker", "atom", "--out", "{tmp}/x"], "export needs PyTorch"),
        (["track", "{clip}", "--init", "51,47,25,62", "--tracker", "dimp-nce+"], "needs PyTorch"),
        (["track", "{clip}", "--init", "51,47,25,62", "--runtime", "torch"], "needs PyTorch"),
        (["train", "--preset", "synthetic-smoke", "--out", "{tmp}/t"], "train needs PyTorch"),
        (["regress1d", "--out", "{tmp}/r"], "regress1d needs PyTorch"),
        (["trackers", "dimp-nce+"], "dimp-nce+ needs PyTorch"),
    ],
)
def test_without_torch_a_command_that_needs_it_says_so_in_one_line(args, needs, clip, tmp_path):
    done = run_command([a.format(tmp=tmp_path, clip=clip) for a in args])
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ebmtrack {args[0]}: error: "), lines
    assert needs in lines[0] and lines[0].endswith(EXTRA)


@pytest.mark.slow
def test_without_torch_the_default_commands_track(clip, tmp_path):
    for args in (["--help"], ["trackers"], ["track", "--help"]):
        done = run_command(args)
        assert done.returncode == 0 and not done.stderr, done.stderr[-3000:]
    out = tmp_path / "boxes.txt"
    done = run_command(["track", str(clip), "--init", "51,47,25,62", "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and len(out.read_text().splitlines()) == 4
    demo = tmp_path / "demo"
    done = run_command(["demo", "--out", str(demo), "--max-frames", "3", "--no-progress"])
    assert done.returncode == 0, done.stderr[-3000:]
    # the default install draws the plot: every file written, nothing said
    assert done.stderr.strip() == ""
    assert {p.name for p in demo.iterdir()} == {
        "boxes.txt",
        "metrics.json",
        "demo.mp4",
        "demo.gif",
        "success.png",
    }
    metrics = json.loads((demo / "metrics.json").read_text())
    assert metrics["produced_by"]["tracker"]["runtime"] == "lite"
