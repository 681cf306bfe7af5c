"""The siamese box estimator: its decoding rule on hand-made head outputs (known optimum) for
v2's 16 x 16 and v3's 15 x 15 score maps, its checks of values and of the networks, and the
shipped networks of both versions following a target that moves."""

import dataclasses
import hashlib

import numpy as np
import pytest

from ebmtrack.lite.siamese import (
    INSTANCE_SIZE,
    SIAMESE_MODELS,
    STRIDE,
    SiameseBoxConfig,
    SiameseBoxEstimator,
    decode_box,
    template_side,
)
from ebmtrack.weights import shipped_file, siamese_networks

CELLS = 16
PLAIN = SiameseBoxConfig(siamese_window=0.0, siamese_penalty=0.0, siamese_size_rate=1.0)


def _outputs(peak: tuple[int, int], sides=(20.0, 10.0, 30.0, 40.0), level: float = 6.0):
    """Logits with one target cell at ``peak`` (row, col) and the same sides everywhere."""
    logits = np.zeros((2, CELLS, CELLS))
    logits[1, peak[0], peak[1]] = level
    distances = np.broadcast_to(np.asarray(sides, float)[:, None, None], (4, CELLS, CELLS))
    return logits, distances.copy()


def test_the_best_cell_gives_its_box_relative_to_the_crop_centre():
    logits, sides = _outputs((5, 11))
    offset, size, rate, score = decode_box(logits, sides, np.array([50.0, 50.0]), PLAIN)
    # cell (row 5, col 11): point ((11 - 8) * 16, (5 - 8) * 16); sides 20, 10, 30, 40 around it
    np.testing.assert_allclose(offset, [48 + 5, -48 + 15])
    np.testing.assert_allclose(size, [50, 50])
    assert score == pytest.approx(np.exp(6) / (1 + np.exp(6)))
    assert rate == pytest.approx(score)  # penalty 1 (no change), size rate 1


def test_the_penalty_prefers_the_unchanged_size_and_the_window_the_centre():
    logits = np.zeros((2, CELLS, CELLS))
    logits[1, 3, 3] = logits[1, 12, 12] = 4.0  # two equal peaks
    sides = np.full((4, CELLS, CELLS), 25.0)  # 50 x 50 boxes ...
    sides[:, 12, 12] = 50.0  # ... but twice that at (12, 12)
    penalised = SiameseBoxConfig(siamese_window=0.0, siamese_penalty=0.5)
    offset, size, _, _ = decode_box(logits, sides, np.array([50.0, 50.0]), penalised)
    np.testing.assert_allclose(offset, [-5 * STRIDE, -5 * STRIDE])  # (3, 3): no size change
    windowed = SiameseBoxConfig(siamese_window=1.0)
    offset, _, _, _ = decode_box(logits, sides, np.array([50.0, 50.0]), windowed)
    assert np.abs(offset).max() <= STRIDE  # the window alone: a cell next to the centre


@pytest.mark.parametrize(
    "field, value", [("siamese_window", 1.5), ("siamese_size_rate", -0.1), ("siamese_penalty", -1)]
)
def test_the_decoding_refuses_values_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        SiameseBoxConfig(**{field: value})


def _scene(center, size, rng_seed=0) -> np.ndarray:
    """A 360 x 480 frame of smooth noise with a textured ellipse target at ``center``, ``size``."""
    rng = np.random.default_rng(rng_seed)
    coarse = rng.integers(60, 120, (12, 16, 3)).astype(np.float64)
    frame = np.kron(coarse, np.ones((30, 30, 1)))
    yy, xx = np.mgrid[:360, :480]
    inside = ((xx - center[0]) / (size[0] / 2)) ** 2 + ((yy - center[1]) / (size[1] / 2)) ** 2 < 1
    stripes = 200 + 55 * np.sign(np.sin((xx - center[0]) / size[0] * 12))
    frame[inside] = np.stack([stripes, 40 + 0 * xx, 255 - stripes], -1)[inside]
    return frame.clip(0, 255).astype(np.uint8)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    x0, y0 = np.maximum(a[:2], b[:2])
    x1, y1 = np.minimum(a[:2] + a[2:], b[:2] + b[2:])
    inter = max(x1 - x0, 0) * max(y1 - y0, 0)
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def test_the_shipped_networks_follow_a_target_that_moves_and_grows():
    estimator = SiameseBoxEstimator(
        *siamese_networks("v2"), SiameseBoxConfig(siamese_size_rate=1.0)
    )
    start_center, start_size = np.array([200.0, 170.0]), np.array([60.0, 40.0])
    template = estimator.template(_scene(start_center, start_size), start_center, start_size)
    assert template.shape == (1, 48, 8, 8) and (estimator.channels, estimator.cells) == (48, 16)
    true_center, true_size = np.array([222.0, 158.0]), np.array([72.0, 48.0])
    found = estimator.locate(_scene(true_center, true_size), start_center, start_size, template)
    # searched around the old box (IoU 0.32 with the new one), found near the new one
    truth = np.concatenate([true_center - true_size / 2, true_size])
    start = np.concatenate([start_center - start_size / 2, start_size])
    box = np.concatenate([found.center - found.raw_size / 2, found.raw_size])
    assert _iou(start, truth) < 0.4 and _iou(box, truth) > 0.75
    assert 0.5 < found.score <= 1


def test_the_search_crop_is_the_instance_multiple_of_the_template_side():
    # NanoTrack's geometry: context 0.5 (w + h) around the target; the search crop 255 / 127
    assert template_side(np.array([60.0, 40.0]), 0.5) == pytest.approx(np.sqrt(110 * 90))
    assert INSTANCE_SIZE / 127 == pytest.approx(2.008, abs=1e-3)


# NanoTrack v3: a 15 x 15 score map, its cells at (i - 7) * 16 px from the crop's centre.
V3_CELLS = 15


@pytest.mark.parametrize("row, col", [(7, 7), (0, 0), (14, 3), (2, 11)])
def test_v3_cells_lie_at_i_minus_7_times_16_px_from_the_crop_centre(row, col):
    logits = np.zeros((2, V3_CELLS, V3_CELLS))
    logits[1, row, col] = 8.0
    sides = np.broadcast_to(np.array([20.0, 10.0, 30.0, 40.0])[:, None, None], (4, 15, 15))
    offset, size, _, _ = decode_box(logits, sides.copy(), np.array([50.0, 50.0]), PLAIN)
    # the box (point - left, point - top, point + right, point + bottom): its centre is the
    # cell's point shifted by ((right - left) / 2, (bottom - top) / 2) = (5, 15)
    np.testing.assert_allclose(offset, [(col - 7) * 16 + 5, (row - 7) * 16 + 15])
    np.testing.assert_allclose(size, [50, 50])


def test_v3_window_is_the_15_point_hanning_window_centred_on_the_middle_cell():
    flat = np.zeros((2, V3_CELLS, V3_CELLS))  # every cell equally likely: the window decides
    sides = np.full((4, V3_CELLS, V3_CELLS), 25.0)
    config = SiameseBoxConfig(siamese_model="v3")
    offset, _, _, score = decode_box(flat, sides, np.array([50.0, 50.0]), config)
    np.testing.assert_allclose(offset, [0.0, 0.0])  # cell (7, 7), the crop's centre
    assert score == pytest.approx(0.5)
    hanning = np.hanning(V3_CELLS)
    assert hanning.argmax() == 7 and hanning[0] == hanning[-1] == 0


def test_each_model_decodes_with_its_own_values_unless_given():
    v2, v3 = SiameseBoxConfig(), SiameseBoxConfig(siamese_model="v3")
    assert (v2.siamese_model, v2.penalty, v2.size_rate) == ("v2", 0.055, 0.37)  # as before
    assert (v3.penalty, v3.size_rate, v3.siamese_window, v3.siamese_context) == (
        0.138,
        0.348,
        0.455,
        0.5,  # the authors' configv3.yaml
    )
    given = SiameseBoxConfig(siamese_model="v3", siamese_penalty=0.2, siamese_size_rate=0.5)
    assert (given.penalty, given.size_rate) == (0.2, 0.5)
    assert set(SIAMESE_MODELS) == {"v2", "v3"}
    with pytest.raises(ValueError, match="^siamese_model must be one of v2, v3, got 'v4'$"):
        SiameseBoxConfig(siamese_model="v4")


def _v3() -> SiameseBoxEstimator:
    return SiameseBoxEstimator(*siamese_networks("v3"), SiameseBoxConfig(siamese_model="v3"))


def test_the_v3_estimator_finds_a_template_cut_from_an_image_in_a_shifted_crop():
    estimator = _v3()
    assert (estimator.channels, estimator.cells) == (96, 15)
    # one image; the template is cut around a textured target, the search crop is centred
    # (28, -20) px away from it: the box is found where the target is, not where it searched
    center, size = np.array([240.0, 180.0]), np.array([56.0, 44.0])
    frame = _scene(center, size, rng_seed=3)
    template = estimator.template(frame, center, size)
    assert template.shape == (1, 96, 8, 8)
    shift = np.array([28.0, -20.0])
    found = estimator.locate(frame, center + shift, size, template)
    np.testing.assert_allclose(found.center, center, atol=4.0)
    assert np.all(np.abs(found.raw_size - size) < 0.2 * size)
    assert 0.5 < found.score <= 1


def test_networks_that_are_not_nanotracks_are_refused_in_one_line(tmp_path):
    onnx = pytest.importorskip("onnx")
    backbone, head = siamese_networks("v3")
    with pytest.raises(ValueError, match="not a NanoTrack head") as swapped:
        SiameseBoxEstimator(head, backbone)
    assert "\n" not in str(swapped.value)
    # the authors' file declares a 255 x 255 input: a 127 px template crop cannot go through
    fixed = onnx.load(str(backbone))
    for dim in fixed.graph.input[0].type.tensor_type.shape.dim[2:]:
        dim.ClearField("dim_param")
        dim.dim_value = 255
    onnx.save(fixed, str(tmp_path / "fixed.onnx"))
    with pytest.raises(ValueError, match="its input's height and width must be free") as error:
        SiameseBoxEstimator(tmp_path / "fixed.onnx", head)
    assert "\n" not in str(error.value)
    # v2's backbone (48 channels) with v3's head (96)
    with pytest.raises(ValueError, match="does not take the backbone's 48-channel features"):
        SiameseBoxEstimator(siamese_networks("v2")[0], head)


# sha256 of NanoTrack v3's files as their source gives them (HonglinChu/SiamTrackers @ 4dbbbbc):
# the head is shipped byte for byte, the backbone with free input dims (ship_nanotrack.py)
V3_SOURCE_HEAD = "75357903be3f4817c965af16cb5a11fd32b1467f597a408405a98635ac63f61d"


def test_the_shipped_v3_files_are_checked_by_their_sha256():
    for role in ("siamese-backbone", "siamese-head"):
        entry = shipped_file(role, "nanotrack", "v3")
        assert hashlib.sha256(entry.path.read_bytes()).hexdigest() == entry.sha256
        assert entry.checked_path() == entry.path
        with pytest.raises(ValueError, match="is not the shipped siamese-"):
            dataclasses.replace(entry, sha256="0" * 64).checked_path()
    assert shipped_file("siamese-head", "nanotrack", "v3").sha256 == V3_SOURCE_HEAD
    assert [p.name for p in siamese_networks("v3")] == [
        "nanotrack3_backbone.onnx",
        "nanotrack3_head.onnx",
    ]


@pytest.mark.slow
def test_atom_with_v3_gives_the_same_boxes_in_both_runtimes(atom_export):
    """``siamese_model="v3"`` reaches the torch tracker and the runtime alike (the export holds
    both versions' networks): frame by frame from the same state, the same boxes."""
    from test_lite_tracker import step_by_step

    pairs = step_by_step(atom_export, "atom", "Jumping", 12, siamese_model="v3")
    for index, (theirs, ours, _) in enumerate(pairs, start=1):
        assert ours.status == theirs.status, index
        assert np.abs(ours.box - theirs.box).max() <= 1.0, (index, theirs.box, ours.box)
