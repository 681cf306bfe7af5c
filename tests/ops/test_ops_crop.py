import numpy as np
import pytest

from ebmtrack.ops.crop import apply_matrix, box_from_crop, box_to_crop, crop_square


@pytest.fixture
def image():
    return np.random.default_rng(0).integers(0, 256, size=(60, 80, 3), dtype=np.uint8)


def test_full_frame_crop_at_scale_one_is_the_identity(image):
    patch, _ = crop_square(image[:, 10:70], (30.0, 30.0), 60.0, 60)
    np.testing.assert_array_equal(patch, image[:, 10:70])


def test_integer_shift_crops_the_exact_window(image):
    patch, _ = crop_square(image, (35.0, 25.0), 20.0, 20)
    np.testing.assert_array_equal(patch, image[15:35, 25:45])


def test_outside_the_image_replicates_the_border(image):
    patch, _ = crop_square(image, (0.0, 30.0), 20.0, 20)
    np.testing.assert_array_equal(patch[:, :10], np.repeat(image[20:40, :1], 10, axis=1))
    np.testing.assert_array_equal(patch[:, 10:], image[20:40, :10])


def test_rotation_by_90_degrees_and_flip(image):
    square = image[:, 10:70]
    rotated, _ = crop_square(square, (30.0, 30.0), 60.0, 60, angle_deg=90.0)
    np.testing.assert_array_equal(rotated, np.rot90(square))
    flipped, _ = crop_square(square, (30.0, 30.0), 60.0, 60, flip=True)
    np.testing.assert_array_equal(flipped, square[:, ::-1])


def test_box_mapping_round_trip_and_target_lands_where_the_matrix_says():
    image = np.zeros((200, 300), np.uint8)
    image[80:100, 120:160] = 255
    box = np.array([120.0, 80.0, 40.0, 20.0])
    patch, matrix = crop_square(image, (150.0, 95.0), 100.0, 50)
    in_crop = box_to_crop(box, matrix)
    np.testing.assert_allclose(in_crop, [10.0, 17.5, 20.0, 10.0])
    np.testing.assert_allclose(box_from_crop(in_crop, matrix), box)
    bright = np.argwhere(patch > 127)
    assert bright[:, 1].min() == 10 and bright[:, 1].max() == 29
    np.testing.assert_allclose(apply_matrix(matrix, [150.0, 95.0]), [25.0, 25.0])


def test_strong_downscaling_averages_instead_of_aliasing():
    stripes = np.zeros((400, 400), np.uint8)
    stripes[:, ::2] = 255
    patch, _ = crop_square(stripes, (200.0, 200.0), 400.0, 40)
    assert abs(float(patch.mean()) - 127.5) < 2 and patch.std() < 3


@pytest.mark.parametrize("side", [0.0, -5.0, float("nan")])
def test_bad_side_is_rejected(image, side):
    with pytest.raises(ValueError, match="side"):
        crop_square(image, (10.0, 10.0), side, 20)


def test_search_region_is_the_box_centred_square_of_scale_times_its_size(image):
    from ebmtrack.ops.crop import crop_search_region, search_region_side

    assert search_region_side((8.0, 2.0), 5.0) == 20.0  # not rounded
    patch, matrix = crop_search_region(image, (29.0, 21.0, 12.0, 3.0), 5.0, 40)
    expected, same = crop_square(image, (35.0, 22.5), 30.0, 40)
    np.testing.assert_array_equal(patch, expected)
    np.testing.assert_array_equal(matrix, same)
