"""``scripts/write_spliced.py``: spliced sequences written as folders that read back the same,
absent frames as NaN boxes."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.splice import splice_set

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "write_spliced.py"


def _sequences(root: Path, count: int = 2, frames: int = 40) -> Path:
    rng = np.random.default_rng(0)
    for k in range(count):
        folder = root / f"seq{k}"
        (folder / "img").mkdir(parents=True)
        for i in range(frames):
            image = rng.integers(0, 255, (60, 80, 3), dtype=np.uint8)
            cv2.imwrite(str(folder / "img" / f"{i + 1:04d}.png"), image)
        (folder / "groundtruth_rect.txt").write_text("20,15,20,16\n" * frames)
    return root


def test_spliced_folders_read_back_with_their_absent_frames(tmp_path):
    data = _sequences(tmp_path / "data")
    spec = importlib.util.spec_from_file_location("write_spliced", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (spliced,) = [s for s in splice_set(load_folder(data), 0.3, 0) if s.name == "seq0-absent"]
    module.write(spliced, tmp_path / "out" / spliced.name)
    (read,) = load_folder(tmp_path / "out")
    assert read.name == "seq0-absent" and len(read) == len(spliced)
    np.testing.assert_array_equal(read.annotated(), spliced.annotated())
    assert (~read.annotated()).sum() == 12  # 30 % of 40 frames, NaN rows
    present = spliced.annotated()
    np.testing.assert_allclose(read.ground_truth[present], spliced.ground_truth[present], atol=0.01)
    # a name that is not a spliced sequence: one line, exit 2, nothing written
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(data), str(tmp_path / "none"), "--only", "seq9-absent"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--only: no spliced sequence seq9-absent" in done.stderr
    assert not (tmp_path / "none").exists()
