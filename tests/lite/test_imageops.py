"""The NumPy image operations against OpenCV's, and the runtime without OpenCV: it loads, starts
and tracks where ``import cv2`` fails."""

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
from test_lite_tracker import run_child

import ebmtrack
import ebmtrack.lite
from ebmtrack.lite import imageops
from ebmtrack.lite.crop import CropSpec, crop_squares

COUPLE = Path(ebmtrack.__file__).resolve().parent / "demo_data" / "Couple"

# (H, W, C or None): odd and even sides, one and three channels
SHAPES = [(37, 53, 3), (64, 48, None), (101, 77, 1), (160, 211, 3)]
# largest difference from OpenCV: grey levels for uint8, absolute for float32 in [0, 255]
TOLERANCE = {np.uint8: 1, np.float32: 1e-4}


@pytest.fixture
def numpy_path(monkeypatch):
    monkeypatch.setattr(imageops, "cv2", None)


def images():
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        shape = tuple(n for n in shape if n is not None)
        yield rng.integers(0, 256, shape, dtype=np.uint8)
        yield (rng.random(shape) * 255).astype(np.float32)


def assert_close(ours: np.ndarray, reference: np.ndarray) -> None:
    reference = reference.reshape(reference.shape[:2] + ours.shape[2:])
    assert ours.dtype == reference.dtype and ours.shape == reference.shape
    diff = np.abs(ours.astype(np.float64) - reference).max()
    assert diff <= TOLERANCE[ours.dtype.type], diff


@pytest.mark.parametrize("factors", [(2, 2), (3, 2), (2.5, 3.7), (1.3, 1.0), (5.2, 4.1)])
def test_area_resize_is_opencvs(numpy_path, factors):
    for image in images():
        height, width = image.shape[:2]
        size = (max(round(width / factors[0]), 1), max(round(height / factors[1]), 1))
        expected = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        assert_close(imageops.resize_area(image, size), expected)


def test_area_resize_halves_uint8_as_opencv_does(numpy_path):
    image = np.random.default_rng(1).integers(0, 256, (96, 128, 3), dtype=np.uint8)
    expected = cv2.resize(image, (64, 48), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(imageops.resize_area(image, (64, 48)), expected)


def test_area_resize_refuses_to_enlarge(numpy_path):
    with pytest.raises(ValueError, match="shrinks only"):
        imageops.resize_area(np.zeros((10, 10), np.uint8), (12, 8))


def affine_maps():
    rng = np.random.default_rng(2)
    for _ in range(6):
        angle, scale = rng.uniform(0, 2 * math.pi), rng.uniform(0.3, 2.5)
        cos, sin = math.cos(angle) * scale, math.sin(angle) * scale
        yield np.array([[cos, sin, rng.uniform(-60, 60)], [-sin, cos, rng.uniform(-60, 60)]])
    yield np.array([[-1.0, 0.0, 60.0], [0.0, 1.0, 0.0]])  # a flip
    yield np.array([[0.31, 0.0, -4.2], [0.0, 0.31, -7.9]])  # a crop's shrinking map


def test_affine_warp_is_opencvs(numpy_path):
    for image in images():
        for matrix in affine_maps():
            expected = cv2.warpAffine(
                image, matrix, (71, 64), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
            )
            assert_close(imageops.warp_affine(image, matrix, (71, 64)), expected)


@pytest.mark.parametrize(
    "ksize, sigmas",
    [((5, 5), (1.0, 0.0)), ((7, 3), (1.5, 0.6)), ((0, 0), (0.8, 1.7)), ((3, 7), (0.0, 0.0)),
     ((13, 13), (2.0, 2.0)), ((9, 9), (0.0, 0.0))],
)  # fmt: skip
def test_gaussian_blur_is_opencvs(numpy_path, ksize, sigmas):
    for image in images():
        expected = cv2.GaussianBlur(
            image, ksize, sigmaX=sigmas[0], sigmaY=sigmas[1], borderType=cv2.BORDER_REPLICATE
        )
        assert_close(imageops.gaussian_blur(image, ksize, *sigmas), expected)


def test_padding_and_inverse_are_opencvs(numpy_path):
    for image in images():
        expected = cv2.copyMakeBorder(image, 1, 2, 0, 3, cv2.BORDER_REPLICATE)
        padded = imageops.pad_replicate(image, 1, 2, 0, 3)
        np.testing.assert_array_equal(padded, expected.reshape(padded.shape))
    for matrix in affine_maps():
        np.testing.assert_allclose(
            imageops.invert_affine_transform(matrix),
            cv2.invertAffineTransform(matrix),
            rtol=0,
            atol=1e-12,
        )


def test_crops_are_opencvs_within_a_grey_level(monkeypatch):
    """The tracker's crops (pyramid, blur, warp) of a real frame, both paths."""
    frame = cv2.imread(str(COUPLE / "img" / "0001.jpg"))
    specs = [
        CropSpec((60.0, 80.0), side, angle, flip)
        for side in (40.0, 150.0, 410.0)
        for angle, flip in ((0.0, False), (10.0, True))
    ]
    expected, matrices = crop_squares(frame, specs, 96)
    monkeypatch.setattr(imageops, "cv2", None)
    patches, same = crop_squares(frame, specs, 96)
    np.testing.assert_array_equal(same, matrices)
    assert np.abs(patches.astype(int) - expected).max() <= 1


@pytest.mark.slow
def test_the_runtime_tracks_without_opencv(atom_export, tmp_path):
    """A child where cv2 fails to import besides torch tracks the demo clip near the boxes of
    the OpenCV path. Not within a pixel: ATOM's first-frame fit turns the NumPy crops' rare
    one-grey-level differences into another classifier (as it does a frame with 0.3 % of its
    pixels one level brighter), and the boxes part by up to 5.9 px over these 7 frames."""
    paths = [COUPLE / "img" / f"{i:04d}.jpg" for i in range(1, 9)]
    frames = np.stack([cv2.imread(str(path))[:, :, ::-1] for path in paths])
    np.save(tmp_path / "frames.npy", frames)
    first = np.loadtxt(COUPLE / "groundtruth_rect.txt", delimiter=",", max_rows=1)
    result = run_child(
        f"""
        BLOCKED.add("cv2")
        import json, numpy as np
        import ebmtrack.lite
        frames = np.load({str(tmp_path / "frames.npy")!r})
        tracker = ebmtrack.lite.load({str(atom_export)!r})
        tracker.initialize(frames[0], {first.tolist()!r})
        boxes = [tracker.track(frame).box.tolist() for frame in frames[1:]]
        assert "cv2" not in sys.modules and "torch" not in sys.modules
        print(json.dumps(boxes))
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    tracker = ebmtrack.lite.load(atom_export)
    tracker.initialize(frames[0], first)
    expected = [tracker.track(frame).box for frame in frames[1:]]
    diff = np.abs(np.array(json.loads(result.stdout)) - expected).max()
    assert diff <= 0.25 * math.sqrt(first[2] * first[3]), diff
