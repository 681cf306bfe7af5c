"""The dimp-nce+ tracker: its box refinement, schedule, statuses and plumbing.

Random networks keep these tests fast and offline; tracking accuracy with the trained weights is
measured by ``ebmtrack eval`` (docs/dimp.md).
"""

import math

import cv2
import numpy as np
import pytest
import torch

from ebmtrack.data.io import list_images, read_image
from ebmtrack.ebm.sampling import score_and_grad
from ebmtrack.evaluation.demo import DEMO_DATA
from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig
from ebmtrack.models.serialization import load_model
from ebmtrack.ops.boxes import box_convert, iou_xywh
from ebmtrack.ops.crop import box_to_crop, crop_square
from ebmtrack.tracking.base import Tracker, TrackStatus
from ebmtrack.tracking.box_refine import fold_box_head
from ebmtrack.tracking.composition import build_box_estimator
from ebmtrack.tracking.dimp import DiMPParams, DiMPTracker
from ebmtrack.tracking.dimp.box import BOX_ESTIMATORS
from ebmtrack.tracking.ebm_refine import FrameBoxEnergy, ascend_boxes
from ebmtrack.tracking.iou_gradient import IoUGradient
from ebmtrack.training.box_regression import BoxConditioning, BoxEnergy
from ebmtrack.weights import dimp_classifier, pack_box_head

SMALL = {"search_size": 128}


@pytest.fixture(scope="module")
def backbone():
    # Random weights: no download; the classifier's optimizer fits whatever features it gets.
    torch.manual_seed(0)
    return create_backbone("mobilenetv2", pretrained=False)


@pytest.fixture(scope="module")
def classifier(backbone):
    torch.manual_seed(0)
    return DiMPClassifier(DiMPConfig.for_backbone(backbone)).eval()


@pytest.fixture(scope="module")
def box_head():
    # The shipped NCE+ head: a random head's output is nearly flat (last layer near zero).
    path = pack_box_head("mobilenetv2")
    if path is None:
        pytest.skip("the NCE+ box head does not ship with this installation")
    return load_model(path, expected="AtomIoUNet").requires_grad_(False)


def moving_object(num_frames=20, size=(200, 260), box=(60, 70, 44, 36), step=(3, 2)):
    """A sharp random texture translating over a smooth one -> (frames, true boxes)."""
    rng = np.random.default_rng(3)
    height, width = size
    coarse = rng.integers(0, 256, (height // 16 + 2, width // 16 + 2, 3), dtype=np.uint8)
    background = cv2.resize(coarse, (coarse.shape[1] * 16, coarse.shape[0] * 16))
    x0, y0, w, h = box
    fine = rng.integers(0, 256, (h // 4 + 1, w // 4 + 1, 3), dtype=np.uint8)
    target = cv2.resize(fine, (fine.shape[1] * 4, fine.shape[0] * 4), interpolation=0)[:h, :w]
    frames, boxes = [], []
    for t in range(num_frames):
        x, y = x0 + step[0] * t, y0 + step[1] * t
        frame = background[:height, :width].copy()
        frame[y : y + h, x : x + w] = target
        frames.append(frame)
        boxes.append(np.array([x, y, w, h], dtype=np.float64))
    return frames, boxes


def run(tracker, frames, boxes):
    tracker.initialize(frames[0], boxes[0])
    return [tracker.track(frame) for frame in frames[1:]]


@pytest.fixture(scope="module")
def imagenet_backbone():
    try:
        return create_backbone("mobilenetv2", pretrained=True)
    except FileNotFoundError as err:  # neither the PyPI package nor the shipped copy
        pytest.skip(str(err))


def mean_iou(results, boxes):
    predicted = torch.as_tensor(np.stack([r.box for r in results]))
    return iou_xywh(predicted, torch.as_tensor(np.stack(boxes[1 : len(results) + 1])))


# ----------------------------------------------------------------------------- box refinement


@pytest.fixture(scope="module")
def frame_energy(imagenet_backbone, box_head):
    """The head on real frames (the demo clip, 288-pixel crops around the first box):
    (modulation, test features, reference box)."""
    frames = [read_image(p) for p in list_images(DEMO_DATA / "Couple" / "img")[:10:9]]
    box = np.loadtxt(DEMO_DATA / "Couple" / "groundtruth_rect.txt", delimiter=",")[0]
    side = 5 * math.sqrt(box[2] * box[3])
    crops = [crop_square(f, tuple(box[:2] + box[2:] / 2), side, 288) for f in frames]
    image = torch.as_tensor(np.stack([c[0] for c in crops])).permute(0, 3, 1, 2).float()
    ref_box = torch.as_tensor(box_to_crop(box, crops[0][1]), dtype=torch.float32)[None]
    layers = imagenet_backbone.default_layers
    feats = imagenet_backbone(image, layers)
    fine, coarse = (feats[layer] for layer in layers)
    modulation = box_head.modulation([fine[:1], coarse[:1]], ref_box)
    test_features = box_head.test_features([fine[1:], coarse[1:]])
    return modulation, test_features, ref_box


def test_closed_form_energy_equals_autograd_through_the_head(box_head, frame_energy):
    modulation, test_features, ref_box = frame_energy
    folded = fold_box_head(box_head)
    energy = FrameBoxEnergy(IoUGradient(folded, folded.modulate(modulation, test_features)))
    size_norm = ref_box[:, 2:]
    boxes = ref_box[None] + torch.tensor([[0, 0, 0, 0], [3, -2, 5, 4], [-6, 4, -8, 6.0]])
    y = box_convert(boxes, "xywh", "ebm", size_norm)
    value, grad = score_and_grad(energy, size_norm, y)
    x = BoxConditioning(modulation, test_features, size_norm)
    ref_value, ref_grad = score_and_grad(BoxEnergy(box_head), x, y)
    assert torch.allclose(value, ref_value, atol=1e-4, rtol=1e-4)
    assert torch.allclose(grad, ref_grad, atol=1e-3, rtol=1e-3)
    assert grad.abs().max() > 0


@pytest.mark.parametrize("rule", ["s1", "fixed"])
def test_box_ascent_step_rules(box_head, frame_energy, rule):
    modulation, test_features, ref_box = frame_energy
    folded = fold_box_head(box_head)
    energy = FrameBoxEnergy(IoUGradient(folded, folded.modulate(modulation, test_features)))
    generator = torch.Generator().manual_seed(0)
    boxes = ref_box + (torch.rand(16, 4, generator=generator) - 0.5) * torch.tensor(
        [20, 20, 10, 10]
    )
    size_norm = ref_box[0, 2:]
    start_value = energy(size_norm[None], box_convert(boxes[None], "xywh", "ebm", size_norm[None]))[
        0
    ]
    # Long steps, so that plain steps overshoot somewhere.
    refined, value = ascend_boxes(energy, boxes, size_norm, 6, (0.5, 0.5), rule, decay=0.5)
    assert refined.shape == (16, 4) and (refined[:, 2:] > 0).all()
    assert torch.allclose(
        value,
        energy(size_norm[None], box_convert(refined[None], "xywh", "ebm", size_norm[None]))[0],
    )
    if rule == "s1":
        assert (value >= start_value).all()
        assert (value > start_value).any()
    else:  # every step is taken, better or not
        assert (value < start_value).any()


# ----------------------------------------------------------------------------- the tracker


def test_follows_a_translating_object(imagenet_backbone, device):
    # Untrained DiMP classifier (random projection, the optimizer's initial label functions):
    # the online optimizer alone must still fit a filter that follows a textured object.
    torch.manual_seed(0)
    classifier = DiMPClassifier(DiMPConfig.for_backbone(imagenet_backbone))
    params = DiMPParams(
        box_mode="position", target_not_found_threshold=0.1, device=device.type, **SMALL
    )
    tracker = DiMPTracker(imagenet_backbone, classifier, None, params)
    assert isinstance(tracker, Tracker)
    frames, boxes = moving_object()
    results = run(tracker, frames, boxes)
    ious = mean_iou(results, boxes)
    # Standing still would give IoU 0 from frame 14 on.
    assert ious.mean() > 0.6 and ious[-5:].min() > 0.4
    assert all(r.status != TrackStatus.NOT_FOUND for r in results)


def test_same_sequence_same_boxes(backbone, classifier, box_head, device):
    frames, boxes = moving_object(num_frames=6)
    # Every frame refines.
    params = DiMPParams(target_not_found_threshold=-1e9, device=device.type, **SMALL)
    first = run(DiMPTracker(backbone, classifier, box_head, params), frames, boxes)
    second = run(DiMPTracker(backbone, classifier, box_head, params), frames, boxes)
    for a, b in zip(first, second):
        assert np.array_equal(a.box, b.box) and a.status == b.status
    # The head moved the box size (a random head: anywhere, but not nowhere).
    assert any(not np.allclose(r.box[2:], boxes[0][2:]) for r in first)


def test_optimizer_schedule_and_hard_negatives(backbone, classifier, monkeypatch):
    frames, boxes = moving_object(num_frames=12)
    params = DiMPParams(
        box_mode="position",
        target_not_found_threshold=-1e9,
        train_skipping=4,
        update_iters=3,
        hard_negative_iters=1,
        # No distractors (uncertain frames), and second peaks that make some hard negatives.
        distractor_threshold=1.5,
        hard_negative_threshold=0.8,
        **SMALL,
    )
    tracker = DiMPTracker(backbone, classifier, None, params)
    calls = []
    original = classifier.optimize_filter

    def spy(filters, feats, boxes_, num_iter=None, sample_weight=None):
        state = tracker.state  # None during initialize
        calls.append((state.frame_index if state else 1, num_iter, feats.shape[0]))
        return original(filters, feats, boxes_, num_iter, sample_weight)

    monkeypatch.setattr(classifier, "optimize_filter", spy)
    results = run(tracker, frames, boxes)
    init_samples = 1 + 4 + 1 + 3 + 4 + 2
    assert calls[0] == (1, params.init_iters, init_samples)
    expected = []
    for frame_index, result in enumerate(results, start=2):
        if result.status == TrackStatus.HARD_NEGATIVE:
            expected.append((frame_index, 1))
        elif result.status == TrackStatus.NORMAL and (frame_index - 1) % 4 == 0:
            expected.append((frame_index, 3))
    assert [c[:2] for c in calls[1:]] == expected
    assert {3, 1} <= {num_iter for _, num_iter in expected}  # both kinds of update happened
    # Every normal or hard-negative frame entered the memory.
    stored = sum(r.status in (TrackStatus.NORMAL, TrackStatus.HARD_NEGATIVE) for r in results)
    assert tracker.state.memory.num_stored == init_samples + stored


def test_lost_target_keeps_the_box_and_learns_nothing(backbone, classifier, box_head):
    frames, boxes = moving_object(num_frames=5)
    params = DiMPParams(target_not_found_threshold=1e9, **SMALL)
    tracker = DiMPTracker(backbone, classifier, box_head, params)
    tracker.initialize(frames[0], boxes[0])
    filter_before = tracker.state.model.clone()
    for frame in frames[1:]:
        result = tracker.track(frame)
        assert result.status == TrackStatus.NOT_FOUND
        assert np.allclose(result.box, boxes[0])
    assert torch.equal(tracker.state.model, filter_before)
    assert tracker.state.memory.num_stored == 15


def test_grayscale_and_border_cases_do_not_crash(backbone, classifier, box_head):
    params = DiMPParams(target_not_found_threshold=-1e9, **SMALL)
    tracker = DiMPTracker(backbone, classifier, box_head, params)
    frames, boxes = moving_object(num_frames=3)
    gray = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]
    tracker.initialize(gray[0], np.array([-10.0, -8.0, 30.0, 24.0]))  # partly outside
    for frame in gray[1:]:
        result = tracker.track(frame)
        assert np.isfinite(result.box).all() and (result.box[2:] > 0).all()


def test_bad_inputs(backbone, classifier, box_head):
    tracker = DiMPTracker(backbone, classifier, box_head, DiMPParams(**SMALL))
    with pytest.raises(ValueError, match="before initialize"):
        tracker.track(np.zeros((50, 50, 3), np.uint8))
    with pytest.raises(ValueError, match="box_mode='refine' needs a box_head"):
        DiMPTracker(backbone, classifier, None, DiMPParams(**SMALL))
    wrong = DiMPClassifier(DiMPConfig(in_channels=64, num_blocks=0, feature_dim=32))
    with pytest.raises(ValueError, match="DiMP classifier reads 64 channels"):
        DiMPTracker(backbone, wrong, box_head, DiMPParams(**SMALL))
    with pytest.raises(ValueError, match="box_step_rule"):
        DiMPParams(box_step_rule="adam")
    with pytest.raises(ValueError, match="memory_size"):
        DiMPParams(memory_size=15)


def test_each_box_mode_takes_exactly_the_head_it_reads(backbone, classifier, box_head):
    position = DiMPTracker(backbone, classifier, None, DiMPParams(box_mode="position", **SMALL))
    assert position.box_head is None and position.box_estimator.layers == ()
    refine = DiMPTracker(backbone, classifier, box_head, DiMPParams(**SMALL))
    assert refine.box_head is box_head
    assert refine.box_estimator.layers == tuple(backbone.default_layers)
    head = refine.box_estimator.head
    with pytest.raises(ValueError, match="box_mode='refine' needs a box_head"):
        build_box_estimator(BOX_ESTIMATORS, "refine", DiMPParams(**SMALL), None)
    position_params = DiMPParams(box_mode="position", **SMALL)
    with pytest.raises(ValueError, match="box_mode='position' reads no box_head: pass none"):
        build_box_estimator(BOX_ESTIMATORS, "position", position_params, head)
    with pytest.raises(ValueError, match="box_mode='position' reads no box_head: pass none"):
        DiMPTracker(backbone, classifier, box_head, position_params)
    # box_step_length is one number in both trackers: a pair is refused.
    with pytest.raises(ValueError, match="box_step_length must be a number"):
        DiMPParams(box_step_length=(2.5e-3, 2.5e-3))
    with pytest.raises(ValueError, match="box_mode must be one of refine, position, got 'scale'"):
        DiMPParams(box_mode="scale")


@pytest.mark.parametrize(
    "field, value",
    [
        ("box_steps", 2),
        ("box_step_length", 1e-3),
        ("box_step_rule", "fixed"),
        ("box_step_decay", 0.9),
        ("box_top_k", 5),
        ("num_random_proposals", 3),
        ("max_aspect_ratio", 4.0),
    ],
)
def test_a_box_field_is_refused_where_the_box_mode_does_not_read_it(field, value):
    DiMPParams(**{field: value})  # refine reads it
    with pytest.raises(ValueError, match=f"{field} applies to box_mode refine, not 'position'"):
        DiMPParams(box_mode="position", **{field: value})
    DiMPParams(box_mode="position", **{field: getattr(DiMPParams(), field)})  # the default


def test_registry_and_load_tracker(monkeypatch):
    from ebmtrack.api import load_tracker
    from ebmtrack.tracking import registry

    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    registry.register_tracker("other-nce+", DiMPTracker)  # '+' is allowed in names, as here
    with pytest.raises(ValueError, match="lower-case"):
        registry.register_tracker("Dimp+", DiMPTracker)
    with pytest.raises(ValueError, match="tracker 'dimp-nce\\+' takes no option.s. step_size"):
        registry.create_tracker("dimp-nce+", step_size=3)
    renamed = r"'use_box_head' was renamed: use box_mode \('refine' with the box head"
    with pytest.raises(ValueError, match=renamed):
        load_tracker("dimp-nce+", use_box_head=False)
    tracker = load_tracker("dimp-nce+", search_size=96, box_steps=2)
    assert isinstance(tracker, DiMPTracker) and tracker.name == "dimp-nce+"
    assert tracker.box_head is not None  # the shipped NCE+ head
    assert tracker.params.box_steps == 2
    if dimp_classifier() is not None:  # the shipped classifier, not a random one
        shipped = load_model(dimp_classifier(), expected="DiMPClassifier")
        assert torch.equal(tracker.classifier.net.init_conv.weight, shipped.init_conv.weight)
