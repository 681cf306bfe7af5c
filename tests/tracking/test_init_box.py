import logging

import numpy as np
import pytest

from ebmtrack.tracking.init_box import clip_init_box


def test_a_box_inside_the_frame_comes_back_unchanged_and_silent(caplog):
    # 291.83 + 150.35 - 291.83 != 150.35 in floating point: no clipping may be invented.
    box = np.array([291.83, 124.71, 150.35, 139.58])
    with caplog.at_level(logging.WARNING, logger="ebmtrack"):
        out = clip_init_box(box, (360, 480, 3))
    assert np.array_equal(out, box) and not caplog.records
    edge = np.array([380.0, 260.0, 100.0, 100.0])  # touches the right and bottom edges
    assert np.array_equal(clip_init_box(edge, (360, 480)), edge)


def test_a_box_across_the_edge_is_clipped_with_one_warning_and_one_outside_refused(caplog):
    with caplog.at_level(logging.WARNING, logger="ebmtrack"):
        out = clip_init_box([-10.0, 300.0, 50.0, 100.0], (360, 480))
    np.testing.assert_allclose(out, [0.0, 300.0, 40.0, 60.0])
    assert len(caplog.records) == 1 and "clipped" in caplog.records[0].getMessage()
    with pytest.raises(ValueError):
        clip_init_box([500.0, 10.0, 20.0, 20.0], (360, 480))
