import math

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

from ebmtrack.data.processing import AtomProcessing
from ebmtrack.data.sampler import FramePair
from ebmtrack.ebm.noise import GaussianMixtureNoise
from ebmtrack.ops.boxes import iou_xywh

S = 288
PLAIN = dict(grayscale_probability=0.0, brightness_jitter=0.0)


def ramp_image():
    """Red = column, green = row: every pixel names its own position."""
    rows, cols = np.mgrid[0:256, 0:256]
    return np.stack([cols, rows, np.full_like(cols, 128)], axis=2).astype(np.uint8)


def pair_on(image, ref_box, test_box):
    return FramePair(
        image, np.asarray(ref_box, float), image, np.asarray(test_box, float), "s", 0, 1
    )


def fit_crop_to_image(patch):
    """Least-squares affine (2, 3) from crop to image coordinates, read off a ramp crop.

    A pixel with value v covers [v, v + 1), so bilinear sampling of the ramp at the continuous
    point u gives v = u - 0.5; pixels from the replicated border are left out.
    """
    patch = patch.permute(1, 2, 0).numpy().round()
    valid = np.all((patch[..., :2] >= 2) & (patch[..., :2] <= 253), axis=2)
    rows, cols = np.nonzero(valid)
    design = np.stack([cols + 0.5, rows + 0.5, np.ones_like(cols)], axis=1)
    target = patch[rows, cols, :2] + 0.5
    solution, *_ = np.linalg.lstsq(design, target, rcond=None)
    return solution.T


def map_box(matrix, box):
    corners = np.array([box[:2], box[:2] + box[2:]], dtype=float) @ matrix[:, :2].T + matrix[:, 2]
    low, high = corners.min(0), corners.max(0)
    return np.concatenate([low, high - low])


@pytest.mark.parametrize("flip", [False, True])
def test_crops_show_the_source_where_the_boxes_say(flip):
    image = ramp_image()
    gt_ref, gt_test = np.array([100.0, 110.0, 20.0, 16.0]), np.array([120.5, 90.0, 18.0, 22.0])
    processing = AtomProcessing(flip_probability=float(flip), **PLAIN)
    for seed in range(6):
        sample = processing(pair_on(image, gt_ref, gt_test), np.random.default_rng(seed))
        for name, gt in (("ref", gt_ref), ("test", gt_test)):
            to_image = fit_crop_to_image(sample[f"{name}_image"])
            assert (to_image[0, 0] < 0) == flip  # a mirrored crop runs right to left
            np.testing.assert_allclose(
                map_box(to_image, sample[f"{name}_box"].numpy()), gt, atol=0.05
            )


def test_reference_crop_is_centred_and_five_times_the_target():
    box = np.array([37.0, 52.0, 30.0, 12.0])
    image = np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    sample = AtomProcessing()(pair_on(image, box, box), np.random.default_rng(1))
    ref = sample["ref_box"].numpy()
    np.testing.assert_allclose(ref[:2] + ref[2:] / 2, [S / 2, S / 2], atol=1e-4)
    scale = S / (5 * math.sqrt(30 * 12))
    np.testing.assert_allclose(ref[2:], box[2:] * scale, rtol=1e-5)


def test_test_crop_jitter_has_the_recipe_spread():
    box = np.array([60.0, 50.0, 24.0, 30.0])
    image = np.zeros((160, 200, 3), np.uint8)
    processing = AtomProcessing(**PLAIN)
    offsets, log_scales = [], []
    for seed in range(400):
        crop = processing.crop(image, box, 1, np.random.default_rng(seed))[1]
        offsets.append(crop[:2] + crop[2:] / 2 - S / 2)
        log_scales.append(math.log(math.sqrt(crop[2] * crop[3]) / (S / 5)))
    offsets = np.array(offsets)
    # |offset| <= 4.5 / 2 * sqrt(w'h') in the image, i.e. <= 0.45 S in the crop; uniform inside.
    assert np.abs(offsets).max() <= 0.45 * S and np.abs(offsets).max() > 0.4 * S
    np.testing.assert_allclose(offsets.std(0), 0.9 * S / math.sqrt(12), rtol=0.12)
    # sqrt(w'h') = sqrt(wh) exp(0.5 (n1 + n2) / 2): the crop-space log-scale has std 0.5/sqrt(2).
    assert abs(np.std(log_scales) - 0.5 / math.sqrt(2)) < 0.05


def test_iou_proposals_have_the_iou_they_claim():
    image = np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    box = np.array([50.0, 40.0, 25.0, 35.0])
    for seed in range(5):
        sample = AtomProcessing()(pair_on(image, box, box), np.random.default_rng(seed))
        proposals, mapped = sample["proposals"], sample["proposal_iou"]
        assert proposals.shape == (16, 4) and mapped.shape == (16,)
        iou = iou_xywh(proposals, sample["test_box"])
        torch.testing.assert_close((mapped + 1) / 2, iou)
        assert bool((iou > 0.1).all()) and bool((mapped <= 1).all())


def test_gmm_samples_follow_the_mixture_and_carry_their_densities():
    image = np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    box = np.array([50.0, 40.0, 25.0, 35.0])
    processing = AtomProcessing.for_ebm(num_proposals=4000)
    assert AtomProcessing.for_ebm().num_proposals == 128
    sample = processing(pair_on(image, box, box), np.random.default_rng(3))
    proposals, gt = sample["proposals"].double(), sample["test_box"].double()
    centre = lambda b: b[..., :2] + b[..., 2:] / 2  # noqa: E731
    offsets = torch.cat(
        [(centre(proposals) - centre(gt)) / gt[2:], (proposals[:, 2:] / gt[2:]).log()], dim=1
    )
    # Each dimension mixes N(0, 0.05^2) and N(0, 0.5^2) equally.
    np.testing.assert_allclose(offsets.std(0).numpy(), math.sqrt((0.05**2 + 0.5**2) / 2), rtol=0.06)
    q = GaussianMixtureNoise([[0.05] * 4, [0.5] * 4], dim=4)
    torch.testing.assert_close(
        sample["proposal_log_density"].double(), q.log_prob(offsets), atol=2e-3, rtol=0
    )
    label = -0.5 * (offsets / 0.05).square().sum(1) - 4 * math.log(0.05) - 2 * math.log(2 * math.pi)
    torch.testing.assert_close(sample["gt_log_density"].double(), label, atol=2e-3, rtol=1e-5)
    torch.testing.assert_close(
        (sample["proposal_iou"] + 1) / 2, iou_xywh(sample["proposals"], sample["test_box"])
    )


def test_colour_augmentation():
    image = np.random.default_rng(0).integers(30, 200, (120, 160, 3), dtype=np.uint8)
    pair = pair_on(image, [50.0, 40.0, 25.0, 35.0], [52.0, 41.0, 25.0, 35.0])
    gray = AtomProcessing(grayscale_probability=1.0)(pair, np.random.default_rng(0))
    for name in ("ref_image", "test_image"):
        assert torch.equal(gray[name][0], gray[name][1]) and torch.equal(
            gray[name][1], gray[name][2]
        )
    plain = AtomProcessing(**PLAIN)(pair, np.random.default_rng(5))
    bright = AtomProcessing(grayscale_probability=0.0)(pair, np.random.default_rng(5))
    for name in ("ref_image", "test_image"):
        ratio = bright[name] / plain[name].clamp(min=1)
        factor = ratio.median()
        assert 0.8 <= factor <= 1.2 and bool((bright[name] <= 255).all())
        unclamped = bright[name] < 254
        torch.testing.assert_close(
            bright[name][unclamped], plain[name][unclamped] * factor, atol=1e-3, rtol=1e-5
        )


def test_same_generator_same_sample_and_batches_collate():
    image = np.random.default_rng(0).integers(0, 256, (100, 120), dtype=np.uint8)  # grayscale
    pair = pair_on(image, [30.0, 30.0, 20.0, 20.0], [33.0, 29.0, 21.0, 19.0])
    processing = AtomProcessing(grayscale_probability=0.5)
    first, again = (
        processing(pair, np.random.default_rng(7)),
        processing(pair, np.random.default_rng(7)),
    )
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)
    other = processing(pair, np.random.default_rng(8))
    assert not torch.equal(first["test_image"], other["test_image"])
    batch = default_collate([first, other])
    assert batch["ref_image"].shape == (2, 3, S, S) and batch["ref_image"].dtype == torch.float32
    assert batch["proposals"].shape == (2, 16, 4) and batch["proposal_iou"].shape == (2, 16)


@pytest.mark.parametrize(
    "changes, word",
    [({"proposals": "random"}, "proposals"), ({"flip_probability": 2.0}, "flip_probability")],
)
def test_bad_parameters_name_themselves(changes, word):
    with pytest.raises(ValueError, match=word):
        AtomProcessing(**changes)


def test_pipeline_on_generated_sequences_feeds_a_data_loader():
    from torch.utils.data import DataLoader

    from ebmtrack.data.sampler import TrackingPairs
    from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences

    config = SyntheticConfig(num_frames=20, frame_size=(80, 100))
    pairs = TrackingPairs(
        [SyntheticSequences(10, config, seed=0)], processing=AtomProcessing(), num_pairs=8
    )
    batch = next(iter(DataLoader(pairs, batch_size=4)))
    assert batch["test_image"].shape == (4, 3, S, S) and batch["proposals"].shape == (4, 16, 4)
    assert all(bool(torch.isfinite(v).all()) for v in batch.values())
    # The target sits in the middle of the reference crop and fills a fifth of it.
    centres = batch["ref_box"][:, :2] + batch["ref_box"][:, 2:] / 2
    torch.testing.assert_close(centres, torch.full((4, 2), S / 2.0), atol=1e-3, rtol=0)


@pytest.mark.skipif(
    "fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork"
)
def test_worker_processes_produce_the_same_batches():
    from torch.utils.data import DataLoader

    from ebmtrack.data.sampler import TrackingPairs
    from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences

    config = SyntheticConfig(num_frames=20, frame_size=(80, 100))
    processing = AtomProcessing(output_size=64)
    pairs = TrackingPairs([SyntheticSequences(10, config)], processing=processing, num_pairs=12)
    alone = list(DataLoader(pairs, batch_size=3))
    parallel = list(DataLoader(pairs, batch_size=3, num_workers=2, multiprocessing_context="fork"))
    assert len(alone) == len(parallel) == 4
    assert all(torch.equal(a[k], b[k]) for a, b in zip(alone, parallel) for k in a)
