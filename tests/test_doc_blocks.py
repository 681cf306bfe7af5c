"""Every fenced Python and shell block of README.md and docs/*.md runs as written: a doc line that
does not run fails here.

- Python blocks run in document order, one namespace per page (as pasted into one session); the
  README's run on their own, the other pages' fragments with :data:`PRELUDE`'s names
  (``first_frame``, ``frame``, ``x, y, w, h``, ...) defined first.
- Shell blocks: each ``ebmtrack`` command runs in this process (``main``) in one scratch folder,
  with ``../shared/data/sequences`` replaced by four-frame copies of Jumping (the eval commands'
  data set) and Couple,
  ``clip.mp4`` by a short video and the long commands made short by :data:`SHORTER` (the
  documented flags ``--max-frames``, ``--epochs``, ...).
- What cannot run here (a GPU, a camera or a window, a data set that is not in ``../shared``,
  hours of training, installing) is in :data:`NOT_RUN`, with the reason; an entry that matches
  no block fails, and so does a block that neither runs nor is listed.
- Output examples that print numbers (docs/live.md's boxes files) are compared with what the
  command writes today, so they cannot go stale silently.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

# A substring of a command (or of a Python block) -> why it does not run here.
NOT_RUN: dict[str, str] = {
    "bash scripts/setup.sh": "installs the environment (network; what CI itself does)",
    "python3 -m venv": "installs an environment (network)",
    "pip install": "installs packages (network)",
    "pip uninstall": "changes the installed packages",
    "lite/bin/python": "needs the venv the line above installs",
    "python -m pytest": "the test suite itself",
    "benchmarks/bench_backbones.py": "a benchmark of minutes",
    "studies/default_model.py": "trains every loss: hours",
    "track 0 ": "needs a camera",
    "/dev/video2": "needs a capture device",
    "rtsp://": "needs a stream",
    "--show": "opens a window (needs a display and OpenCV's GUI build)",
    "--init select": "draws the box with the mouse",
    ":/data/": "a benchmark data set that is not in ../shared",
    "=/data/": "another tool's results on a benchmark data set that is not in ../shared",
    "../data/": "training data sets that are not in ../shared",
    "--preset default-cpu": "trains for an hour or more",
    "--preset pack-cpu": "trains on the training pack for hours",
    "--preset dimp-pack-cpu": "trains on the training pack for hours",
    "--preset dimp-pack-clips": "trains on the training pack for about half an hour",
    "--preset dimp-pack-stream": "trains on the training pack for hours",
    "ebmtrack export": "exports ONNX graphs: about a minute each, over the doc tests' time",
    "runs/atom-lite": "an export that `ebmtrack export` writes, which does not run here",
    "backbone_runtime=onnx": "exports the backbone to ONNX first (about a minute)",
    "--preset synthetic-smoke": "trains (tests/training/test_cli_train.py runs it short)",
    "regress1d --quick": "the 1-D study's quick run takes about ten minutes",
    "resnet18-f37072fd.pth": "torchvision's ResNet-18 file, which does not ship",
    "train_feats": "a fragment: its features come from a training batch",
    "--preset pack-stream": "trains on the training pack for hours",
    "--preset atom-r18": "trains a ResNet-18 head on LaSOT, GOT-10k, TrackingNet, COCO (days)",
    "--out runs/pack-stream --resume": "resumes a run of hours",
    "ebmtrack train --out runs/pack": "exports or resumes a run of hours",
    "torchrun": "needs GPUs",
    "ray start": "starts a Ray cluster",
    "--ray auto": "needs the Ray cluster `ray start` began (tests/evaluation/test_ray.py: --ray)",
    "--ray 127.0.0.1": "needs the two-node cluster the `ray start` lines before it begin",
    "videos.csv": "a manifest of the reader's own videos",
    "seq 1 4 | xargs": "four shards of a benchmark data set not in ../shared",
    "resnet18.pth": "ImageNet ResNet-18 weights ship with torchvision's download only",
    'weights="head.safetensors"': "names heads the reader trained",
    '"../shared/data/LaSOT"': "training data sets that are not in ../shared",
    "sets[": "the training sets of the block before (not in ../shared)",
    "tiny-imagenet": "the training pack's still images (not in every ../shared)",
    'preset_config("atom-r18")': "builds the ResNet-18 experiment: needs its weights and data",
}

# Long commands made short: (substring, replacement), applied to every block before it runs.
SHORTER: list[tuple[str, str]] = [
    ("ebmtrack demo", "ebmtrack demo --max-frames 6"),
    (
        'DemoConfig(out="runs/demo", threads=1)',
        'DemoConfig(out="runs/demo", threads=1, max_frames=6)',
    ),
    ("demo_sequence()", "demo_sequence(max_frames=6)"),
    (
        "--preset synthetic-smoke",
        "--preset synthetic-smoke --epochs 1 --samples-per-epoch 8 --batch-size 4 "
        "--set trainer.val_samples=4 --no-progress",
    ),
    ("--workers 2", "--workers 0"),
    ("--runs 5", "--runs 1"),
]

PRELUDE = """
import numpy as np
import torch
from ebmtrack.evaluation.demo import demo_sequence
_clip = demo_sequence(max_frames=6)
first_frame, next_frame, frame = _clip.frame(0), _clip.frame(1), _clip.frame(2)
x, y, w, h = (float(v) for v in _clip.init_box)
(x1, y1, w1, h1), (x2, y2, w2, h2) = (x, y, w, h), (x + 60, y, w, h)
images = torch.rand(1, 3, 128, 128) * 255
box1, box2 = (x1, y1, w1, h1), (x2, y2, w2, h2)
bgr_frame = np.ascontiguousarray(frame[:, :, ::-1])
"""


def _blocks():
    """(page, line, language, text) of every Python and shell block."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            language = {"sh": "bash", "shell": "bash"}.get(match.group(1), match.group(1))
            if language in ("python", "bash"):
                line = text[: match.start()].count("\n") + 1
                yield page.relative_to(ROOT).as_posix(), line, language, match.group(2)


def _commands(block: str) -> list[str]:
    """The shell lines of a block, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = (line.strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _skip_reason(text: str) -> str | None:
    return next((why for key, why in NOT_RUN.items() if key in text), None)


def _shorter(text: str) -> str:
    for old, new in SHORTER:
        text = text.replace(old, new)
    return text


def test_every_block_runs_or_says_why_not():
    used, unrunnable = set(), []
    for page, line, language, text in _blocks():
        pieces = [text] if language == "python" else _commands(text)
        for piece in pieces:
            keys = [key for key in NOT_RUN if key in piece]
            used.update(keys)
            words = piece.split()
            runnable = language == "python" or (words and words[0].endswith("ebmtrack"))
            if not keys and not runnable:
                unrunnable.append(f"{page}:{line}: {piece}")
    assert not unrunnable, "neither run nor listed in NOT_RUN:\n" + "\n".join(unrunnable)
    assert not set(NOT_RUN) - used, f"NOT_RUN entries that match no block: {set(NOT_RUN) - used}"


def _short_sequence(name: str, folder: Path, frames: int = 4) -> None:
    """The first ``frames`` frames of a sequence of ../shared/data/sequences, in ``folder``."""
    source = SHARED / "data" / "sequences" / name
    (folder / name / "img").mkdir(parents=True)
    for image in sorted((source / "img").iterdir())[:frames]:
        (folder / name / "img" / image.name).write_bytes(image.read_bytes())
    boxes = (source / "groundtruth_rect.txt").read_text().splitlines()[:frames]
    (folder / name / "groundtruth_rect.txt").write_text("\n".join(boxes) + "\n")


def _clip(path: Path) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (320, 240))
    for k in range(6):
        frame = np.full((240, 320, 3), 70, np.uint8)
        frame[80 + k : 120 + k, 120 + 2 * k : 180 + 2 * k] = (40, 90, 220)
        writer.write(frame)
    writer.release()
    return path


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    if not (SHARED / "data" / "sequences" / "Jumping").is_dir():
        pytest.skip("../shared/data/sequences is missing")
    folder = tmp_path_factory.mktemp("docs")
    _short_sequence("Jumping", folder / "sequences")  # the data set of the eval commands
    _short_sequence("Couple", folder / "more")
    _clip(folder / "clip.mp4")
    (folder / "first-boxes.txt").write_text("120,80,60,40\n")
    return folder


def _local(text: str, scratch: Path) -> str:
    text = text.replace("../shared/data/sequences/Couple", str(scratch / "more" / "Couple"))
    text = text.replace("../shared/data/sequences", str(scratch / "sequences"))
    return text.replace("../shared/", f"{SHARED}/")


def _run_shell(page, line, text, scratch, capsys) -> list[str]:
    from ebmtrack.cli.main import main

    ran = []
    for command in _commands(text):
        if _skip_reason(command):
            continue
        words = shlex.split(_local(_shorter(command), scratch), comments=True)
        capsys.readouterr()
        code = main(words[1:])
        out, err = capsys.readouterr()
        assert code == 0, f"{page}:{line}: `{command}` exited {code}:\n{err}"
        ran.append(command)
    return ran


def _pages() -> list[str]:
    return sorted({page for page, *_ in _blocks()})


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages())
def test_the_blocks_of_a_page_run(page, scratch, capsys, monkeypatch):
    monkeypatch.chdir(scratch)
    namespace: dict = {}
    if page != "README.md":  # the README's example runs on its own, as pasted
        exec(PRELUDE, namespace)
    tic = time.perf_counter()
    for name, line, language, text in _blocks():
        if name != page:
            continue
        if language == "bash":
            _run_shell(name, line, text, scratch, capsys)
        elif not _skip_reason(text):
            code = compile(_local(_shorter(text), scratch), f"{name}:{line}", "exec")
            exec(code, namespace)
    print(f"{page}: {time.perf_counter() - tic:.1f} s")


def _example_lines(page: str, heading: str) -> dict[str, list[str]]:
    """The first ``text`` block under ``heading`` of ``page``: its lines by the file each
    ``# runs/NAME: ...`` comment names."""
    text = (ROOT / page).read_text(encoding="utf-8").split(f"## {heading}", 1)[1]
    block = next(FENCE.finditer(text)).group(2)
    lines: dict[str, list[str]] = {}
    name = ""
    for line in block.splitlines():
        named = re.match(r"# (runs/\S+):", line)
        if named:
            name = named.group(1)
        elif line and not line.startswith("#"):
            lines.setdefault(name, []).append(line)
    return lines


def _numbers_close(shown: str, written: str) -> bool:
    """The same line but for the last digits of its numbers: boxes to 0.05 px, scores and
    confidences to 0.005 (the int8 backbone's result moves with the CPU); a stale example
    (0.7960 where the tracker now says 0.8553) is not close."""
    pattern = r"-?\d+\.\d+"
    if re.sub(pattern, "#", shown) != re.sub(pattern, "#", written):
        return False
    pairs = zip(map(float, re.findall(pattern, shown)), map(float, re.findall(pattern, written)))
    return all(abs(a - b) <= (0.05 if abs(a) > 1 else 0.005) for a, b in pairs)


@pytest.mark.slow
def test_the_boxes_file_examples_are_what_track_writes(scratch, capsys, monkeypatch):
    """docs/live.md's example lines of runs/jumping.txt, .csv and .jsonl are what
    ``ebmtrack track`` writes on Jumping's first frames today, line for line."""
    from ebmtrack.cli.main import main

    monkeypatch.chdir(scratch)
    examples = _example_lines("docs/live.md", "What is written")
    assert set(examples) == {"runs/jumping.txt", "runs/jumping.csv", "runs/jumping.jsonl"}
    for name, shown in examples.items():
        args = ["track", "sequences/Jumping", "--init", "147,110,34,33", "--out", name]
        assert main([*args, "--max-frames", "2", "--no-progress"]) == 0, capsys.readouterr().err
        written = (scratch / name).read_text().splitlines()
        for line in shown:
            assert any(_numbers_close(line, w) for w in written), (name, line, written)


# What a virtual environment of NumPy and ONNX Runtime lacks: the default install's other
# dependencies and PyTorch's (OpenCV too, unless the block's install line names it).
ABSENT = ("torch", "torchvision", "onnx", "scipy", "PIL", "safetensors", "yaml", "matplotlib",
          "tqdm")


def _blocker(names: set[str]) -> str:
    """Python that makes ``import NAME`` fail for every top-level name in ``names``."""
    return (
        "import importlib.abc, sys\n"
        "class Blocker(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {sorted(names)!r}:\n"
        "            raise ImportError(f'{name} is not installed in this environment')\n"
        "sys.meta_path.insert(0, Blocker())\n"
    )


@pytest.mark.slow
def test_the_runtime_alone_tracks_with_what_its_install_line_installs():
    """Each ``lite/bin/python -c "..."`` line (docs/lite.md's runtime alone, in a virtual
    environment of NumPy and ONNX Runtime, with OpenCV where the block installs it) runs here
    where everything else fails to import, and prints the tracked frame's ``TrackResult``."""
    ran = []
    for page, line, language, text in _blocks():
        if language != "bash" or "lite/bin/python -c" not in text:
            continue
        installs = " ".join(re.findall(r"pip install (?!--no-deps)([^&]+)", text))
        absent = set(ABSENT) | (set() if "opencv" in installs else {"cv2"})
        for command in _commands(text):
            if not command.startswith("lite/bin/python -c "):
                continue
            code = shlex.split(command)[2]
            result = subprocess.run(
                [sys.executable, "-c", _blocker(absent) + code],
                cwd=ROOT, capture_output=True, text=True, timeout=300,
            )
            assert result.returncode == 0 and "TrackResult(box=" in result.stdout, (
                f"{page}:{line}: {command}\n{result.stderr[-2000:]}"
            )
            ran.append((page, "cv2" in absent))
    assert ("docs/lite.md", True) in ran and ("docs/lite.md", False) in ran, ran
    # lite.md: load_tracker("atom") and TrackerATOM run there too
    code = (
        "import numpy as np, ebmtrack\n"
        "f = np.full((240, 320, 3), 60, np.uint8); f[100:160, 120:150] = 230\n"
        "t = ebmtrack.load_tracker('atom'); t.initialize(f, (120, 100, 30, 60))\n"
        "cv = ebmtrack.TrackerATOM.create(); cv.init(f, (120, 100, 30, 60))\n"
        "print(t.track(np.roll(f, 3, axis=1)), cv.update(np.roll(f, 3, axis=1)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", _blocker(set(ABSENT) | {"cv2"}) + code],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0 and "TrackResult(box=" in result.stdout, result.stderr[-2000:]
