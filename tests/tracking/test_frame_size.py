"""A tracker follows frames of one size: a frame of another size than the first is refused with
a ValueError naming both sizes (its boxes would be in another frame's pixels), in the Python API,
the several-target tracker and the OpenCV-style one; initialising again starts over."""

import numpy as np
import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.tracking.atom import AtomParams, AtomTracker
from ebmtrack.tracking.cv_style import OpenCVStyleTracker
from ebmtrack.tracking.multi import MultiTargetTracker
from ebmtrack.tracking.opencv import OpenCVTracker

PARAMS = AtomParams(search_size=96, precision="float32", backbone_runtime="torch", box_mode="scale")
BOX = np.array([30.0, 30, 24, 24])
SIZE_CHANGE = "frame of 256x192 after a first frame of 128x96"


def frame(width=128, height=96):
    yy, xx = np.mgrid[0:height, 0:width]
    image = np.stack([xx % 256, yy % 256, np.full_like(xx, 30)], axis=2).astype(np.uint8)
    image[30:54, 30:54] = (220, 40, 20)
    return image


@pytest.fixture(scope="module")
def backbone():
    torch.manual_seed(0)
    return create_backbone("mobilenetv2", pretrained=False)


def test_atom_refuses_a_frame_of_another_size_until_initialised_again(backbone):
    tracker = AtomTracker(backbone, params=PARAMS)
    tracker.initialize(frame(), BOX)
    tracker.track(frame())
    with pytest.raises(ValueError, match=SIZE_CHANGE):
        tracker.track(frame(256, 192))
    tracker.initialize(frame(256, 192), BOX)  # the caller starts again on the new size
    assert np.all(np.isfinite(tracker.track(frame(256, 192)).box))


def test_several_targets_and_the_opencv_style_api_refuse_it_too(backbone):
    multi = MultiTargetTracker(lambda: AtomTracker(backbone, params=PARAMS))
    multi.initialize(frame(), np.stack([BOX, BOX + 10]))
    with pytest.raises(ValueError, match=SIZE_CHANGE):
        multi.track(frame(256, 192))
    styled = OpenCVStyleTracker(AtomTracker(backbone, params=PARAMS), color="rgb")
    styled.init(frame(), tuple(BOX))
    with pytest.raises(ValueError, match=SIZE_CHANGE):
        styled.update(frame(256, 192))


@pytest.mark.parametrize("kind", ["kcf", "csrt"])
def test_opencv_peers_refuse_it(kind):
    tracker = OpenCVTracker(kind)
    tracker.initialize(frame(), BOX)
    with pytest.raises(ValueError, match=SIZE_CHANGE):
        tracker.track(frame(256, 192))
    styled = OpenCVStyleTracker(OpenCVTracker(kind), color="rgb")
    styled.init(frame(), tuple(BOX))
    with pytest.raises(ValueError, match=SIZE_CHANGE):
        styled.update(frame(256, 192))
