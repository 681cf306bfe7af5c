"""crop_squares: several crops of one frame from one shared pyramid, against crop_square."""

import functools

import cv2
import numpy as np
import pytest

from ebmtrack.ops.crop import (
    CropSpec,
    crop_matrix,
    crop_square,
    crop_squares,
    halve,
    pyramid_level,
    residual_sigma,
)

SIZE = 48


@functools.cache
def photo_like(height: int, width: int, seed: int = 0) -> np.ndarray:
    """A generated frame with a photo's spectrum: noise at every scale from 2 to 256 px, each
    octave with the same energy (uint8 (H, W, 3))."""
    rng = np.random.default_rng(seed)
    image = np.zeros((height, width, 3))
    for octave in range(1, 9):
        cell = 2**octave
        coarse = rng.normal(size=(height // cell + 2, width // cell + 2, 3))
        image += cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
    image = np.clip(128 + image * (50 / image.std()), 0, 255).astype(np.uint8)
    image.flags.writeable = False  # shared between tests
    return image


@pytest.fixture(scope="module")
def image():
    return photo_like(301, 421)  # odd sizes: the pyramid's last row and column are partial


def test_pyramid_level_leaves_the_warp_a_shrink_below_two():
    assert [pyramid_level(f * 10.0, 10) for f in (0.5, 1.99, 2.0, 3.9, 4.0, 7.9, 8.0)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
    ]
    assert residual_sigma(10.0, 10) == 0.0 and residual_sigma(45.0, 10) == 0.0  # r = 1, 4
    assert residual_sigma(30.0, 10) > 0.0  # r = 3 on level 1: the blocks of 3 need a blur


def test_halve_averages_2x2_blocks_and_repeats_an_odd_border():
    image = np.arange(15, dtype=np.uint8).reshape(3, 5) * 10
    halved = halve(image)
    assert halved.shape == (2, 3)
    assert halved[0, 0] == round((0 + 10 + 50 + 60) / 4)
    assert halved[1, 2] == image[2, 4]  # the corner block: one pixel repeated
    assert halve(np.zeros((3, 5, 3), np.uint8)).shape == (2, 3, 3)


@pytest.mark.parametrize("angle, flip", [(0.0, False), (17.0, True)])
def test_crops_shrinking_less_than_2x_are_exactly_crop_squares(image, angle, flip):
    specs = [
        CropSpec((200.3, 150.8), 50.0, angle, flip),
        CropSpec((5.0, 290.0), 80.0, angle, flip),  # partly outside: the border repeats
        CropSpec((-30.0, 10.0), 60.0, angle, flip),  # mostly outside
    ]
    patches, matrices = crop_squares(image, specs, SIZE)
    for spec, patch, matrix in zip(specs, patches, matrices, strict=True):
        expected, same = crop_square(image, spec.center, spec.side, SIZE, angle, flip)
        np.testing.assert_array_equal(patch, expected)
        np.testing.assert_array_equal(matrix, same)


# Tolerances, on a photo-like frame, over five crops at different positions, with the exact area
# average (each output pixel the mean of its f x f square, cv2.INTER_AREA on the crop's own
# pixels) as the reference: the shared pyramid is at most 15 % farther from it than
# crop_square's own reduction (measured: 0.61-1.07 times as far), and it differs from
# crop_square's crops by at most 5 grey levels on average (measured 2.3-4.8: the two reduce on
# different grids of blocks, and this texture changes at every scale). At integer factors where
# crop_square's blocks happen to fall on the output pixels it is nearer the reference; those are
# left out.
@pytest.mark.parametrize("factor", [2.3, 2.6, 3.3, 3.7, 4.7, 5.26, 6.5, 9.3, 11.4])
def test_shrinking_crops_are_as_close_to_the_exact_area_average_as_crop_squares(factor):
    frame = photo_like(720, 960, seed=1)
    side = int(factor * SIZE)
    new, old, change = [], [], []
    for x0, y0 in [(100, 50), (133, 71), (0, 0), (301, 207), (77, 12)]:
        center = (x0 + side / 2, y0 + side / 2)
        exact = cv2.resize(
            frame[y0 : y0 + side, x0 : x0 + side].astype(np.float64),
            (SIZE, SIZE),
            interpolation=cv2.INTER_AREA,
        )
        (patch,), (matrix,) = crop_squares(frame, [CropSpec(center, side)], SIZE)
        expected, same = crop_square(frame, center, side, SIZE)
        np.testing.assert_array_equal(matrix, same)
        new.append(np.abs(patch - exact).mean())
        old.append(np.abs(expected - exact).mean())
        change.append(np.abs(patch.astype(int) - expected.astype(int)).mean())
    assert np.mean(new) <= 1.15 * np.mean(old)
    assert np.mean(change) <= 5.0


@pytest.mark.parametrize("factor", [2.2, 3.5])
def test_crops_across_the_frames_border_repeat_it_as_crop_square_does(factor):
    frame = photo_like(301, 421, seed=2)
    side = factor * SIZE
    for center in [(-20.0, 150.0), (150.0, -35.0), (430.0, 150.0), (200.0, 305.0)]:
        (patch,), _ = crop_squares(frame, [CropSpec(center, side)], SIZE)
        expected, _ = crop_square(frame, center, side, SIZE)
        assert np.abs(patch.astype(int) - expected.astype(int)).mean() <= 5.0
    # Entirely beyond the left edge, at the height of a uniform band: the band's colour.
    banded = frame.copy()
    banded[100:200] = (10, 200, 30)
    (patch,), _ = crop_squares(banded, [CropSpec((-200.0, 150.0), side)], SIZE)
    inner = patch[SIZE // 2 - 8 : SIZE // 2 + 8]
    assert np.abs(inner.astype(int) - [10, 200, 30]).max() <= 1


@pytest.mark.parametrize("factor", [2.0, 2.5, 3.0, 3.7, 5.26, 6.5, 11.0])
def test_a_fine_checkerboard_reduces_to_flat_grey(factor):
    y, x = np.mgrid[0:800, 0:800]
    board = np.where((x + y) % 2 == 0, 255, 0).astype(np.uint8)
    (patch,), _ = crop_squares(board, [CropSpec((400.3, 399.6), factor * SIZE)], SIZE)
    assert abs(float(patch.mean()) - 127.5) < 2 and patch.std() < 3


@pytest.mark.parametrize("factor", [2.5, 3.5, 5.26])
def test_stripes_above_the_crops_nyquist_limit_are_smoothed_away(factor):
    """A grating of period 2.2 frame px (finer than 2 output px): a bilinear warp without
    the pyramid keeps it as a strong moire; the pyramid's crop keeps at most a third of it
    (measured 0.1-0.25; crop_square, 0.1-0.2)."""
    y, x = np.mgrid[0:900, 0:900]
    stripes = (127.5 + 127.5 * np.sign(np.sin(2 * np.pi * (x + 0.3 * y) / 2.2))).astype(np.uint8)
    center, side = (450.2, 449.7), factor * SIZE
    (patch,), _ = crop_squares(stripes, [CropSpec(center, side)], SIZE)
    to_cv = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5]]) @ np.vstack(
        [crop_matrix(center, side, SIZE), [0.0, 0.0, 1.0]]
    )
    to_cv[:, 2] += to_cv[:, :2] @ [0.5, 0.5]
    naive = cv2.warpAffine(stripes, to_cv, (SIZE, SIZE), flags=cv2.INTER_LINEAR)
    assert naive.std() > 40
    assert patch.std() < 0.35 * naive.std()


def test_a_crop_is_the_same_alone_or_with_the_frames_other_crops(image):
    specs = [
        CropSpec((210.0, 140.0), 3.1 * SIZE),
        CropSpec((210.0, 140.0), 3.1 * SIZE / 1.05),
        CropSpec((212.0, 141.0), 4.2 * SIZE, 12.0, True),  # another level, rotated, mirrored
        CropSpec((200.0, 150.0), 1.5 * SIZE),  # no reduction
        CropSpec((390.0, 280.0), 2.2 * SIZE),  # a second window (another target), at the edge
    ]
    patches, matrices = crop_squares(image, specs, SIZE)
    assert patches.shape == (5, SIZE, SIZE, 3) and matrices.shape == (5, 2, 3)
    for spec, patch in zip(specs, patches, strict=True):
        (alone,), _ = crop_squares(image, [spec], SIZE)
        # Up to OpenCV's warp, which rounds positions to 1/32 px from the window's origin.
        difference = np.abs(patch.astype(int) - alone.astype(int))
        assert difference.max() <= 1 and difference.mean() < 0.03


def test_grayscale_frames_and_bad_specs():
    gray = photo_like(200, 300)[:, :, 0]
    patches, _ = crop_squares(gray, [CropSpec((150.0, 100.0), 3.0 * SIZE)], SIZE)
    assert patches.shape == (1, SIZE, SIZE) and patches.dtype == np.uint8
    with pytest.raises(ValueError, match="at least one"):
        crop_squares(gray, [], SIZE)
    with pytest.raises(ValueError, match="side"):
        crop_squares(gray, [CropSpec((1.0, 1.0), 0.0)], SIZE)
    with pytest.raises(ValueError, match="finite"):
        crop_squares(gray, [CropSpec((float("nan"), 1.0), 10.0)], SIZE)
