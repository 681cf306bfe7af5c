"""The texture sources of the generated sequences (:mod:`ebmtrack.data.textures`)."""

import numpy as np

from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequence
from ebmtrack.data.textures import ImageTextures, procedural_texture

SMALL = SyntheticConfig(num_frames=12, frame_size=(96, 128))


def test_image_textures_take_their_colours_from_the_images(tmp_path):
    import cv2

    image = np.zeros((40, 60, 3), np.uint8)
    image[..., 0] = 200  # pure red in RGB
    path = tmp_path / "red.png"
    cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    textures = ImageTextures.from_files([path])
    sample = textures(np.random.default_rng(0), 17, 23)
    assert sample.shape == (17, 23, 3)
    np.testing.assert_array_equal(sample, np.broadcast_to([200, 0, 0], (17, 23, 3)))
    sequence = SyntheticSequence("red", SMALL, seed=0, textures=textures)
    frame = sequence.frame(3)
    assert set(np.unique(frame[..., 1])) == {0}  # only red everywhere, objects included


def test_procedural_textures_vary_and_have_the_requested_size():
    rng = np.random.default_rng(0)
    textures = [procedural_texture(rng, 30, 50) for _ in range(5)]
    assert all(t.shape == (30, 50, 3) and t.dtype == np.uint8 for t in textures)
    assert len({t.tobytes() for t in textures}) == 5
