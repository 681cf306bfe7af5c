import hashlib
import json
import math

import numpy as np
import pytest

from ebmtrack.tracking.calibrator import (
    fit_calibrator,
    isotonic_fit,
    load_calibrators,
    resolve_calibrator,
    save_calibrators,
)
from ebmtrack.tracking.confidence import DIRECTIONS, FEATURES
from ebmtrack.weights import confidence_calibrators


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_fit_recovers_known_probabilities():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40_000, 2)) * [2.0, 1.0] + [1.0, 0.0]
    truth = _sigmoid(0.3 + 0.8 * x[:, 0] - 1.5 * x[:, 1])
    y = rng.random(len(x)) < truth
    calibrator = fit_calibrator(x, y, ("a", "b"), l2=0.0)
    grid = rng.normal(size=(500, 2)) * [2.0, 1.0] + [1.0, 0.0]
    expected = _sigmoid(0.3 + 0.8 * grid[:, 0] - 1.5 * grid[:, 1])
    assert np.abs(calibrator.predict(grid) - expected).max() < 0.03
    # Back in the inputs' units: the weights over the scales are the true slopes.
    slopes = np.asarray(calibrator.weights) / np.asarray(calibrator.scale)
    assert slopes == pytest.approx([0.8, -1.5], abs=0.05)


def test_isotonic_step_recovers_a_step_probability():
    rng = np.random.default_rng(1)
    x = rng.random((20_000, 1))
    truth = np.where(x[:, 0] < 0.5, 0.2, 0.9)  # not a logistic curve
    y = rng.random(len(x)) < truth
    calibrator = fit_calibrator(x, y, ("a",), isotonic=True)
    assert calibrator.predict(np.array([[0.1], [0.3]])) == pytest.approx([0.2, 0.2], abs=0.03)
    assert calibrator.predict(np.array([[0.7], [0.95]])) == pytest.approx([0.9, 0.9], abs=0.03)
    knots_x, knots_y = isotonic_fit(rng.random(100), rng.random(100) < 0.5)
    assert np.all(np.diff(knots_x) >= 0) and np.all(np.diff(knots_y) >= 0)


def test_directions_hold_the_sign_of_a_weight():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(5_000, 2))
    y = rng.random(len(x)) < _sigmoid(x[:, 0] - x[:, 1])  # b lowers the probability
    free = fit_calibrator(x, y, ("a", "b"))
    held = fit_calibrator(x, y, ("a", "b"), directions={"b": 1})
    assert free.weights[1] < -0.5
    assert held.weights[1] == 0.0 and held.weights[0] > 0.5


def test_probabilities_in_unit_interval_and_missing_inputs_filled():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2_000, 3))
    y = rng.random(len(x)) < _sigmoid(3 * x[:, 0])
    for isotonic in (False, True):
        calibrator = fit_calibrator(x, y, ("a", "b", "c"), isotonic=isotonic)
        extreme = np.array([[1e6, 0, 0], [-1e6, 0, 0], [np.nan, np.nan, np.nan], [0, 1e9, -1e9]])
        p = calibrator.predict(extreme)
        assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
        assert 0 <= calibrator({"a": 0.5}) <= 1  # names left out count as missing


def test_fit_refuses_bad_labels():
    with pytest.raises(ValueError, match="both present"):
        fit_calibrator(np.zeros((4, 1)), np.ones(4), ("a",))
    with pytest.raises(ValueError, match="must be"):
        fit_calibrator(np.zeros((4, 2)), [0, 1, 0, 1], ("a",))


def test_save_load_round_trip_and_hash(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(500, 2))
    y = rng.random(500) < _sigmoid(x[:, 0])
    calibrator = fit_calibrator(x, y, ("a", "b"), isotonic=True, info={"tracker": "t"})
    path = tmp_path / "c.json"
    digest = save_calibrators(path, {"t": calibrator})
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded = load_calibrators(path, sha256=digest)["t"]
    assert loaded == calibrator
    assert np.array_equal(loaded.predict(x), calibrator.predict(x))
    with pytest.raises(ValueError, match="sha256 differs"):
        load_calibrators(path, sha256="0" * 64)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(format="other"), "not a calibrator file"),
        (lambda d: d["calibrators"]["t"].update(weights=[1.0]), "expected 2"),
        (lambda d: d["calibrators"]["t"].update(scale=[0.0, 1.0]), "positive"),
        (lambda d: d["calibrators"]["t"].update(isotonic_y=[0.5, 0.2]), "non-decreasing"),
        (lambda d: d["calibrators"]["t"].update(bias="x"), "finite numbers"),
    ],
)
def test_malformed_files_are_refused(tmp_path, edit, message):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 2))
    calibrator = fit_calibrator(x, x[:, 0] > 0, ("a", "b"))
    path = tmp_path / "c.json"
    save_calibrators(path, {"t": calibrator})
    data = json.loads(path.read_text())
    data["calibrators"]["t"]["isotonic_x"] = [0.1, 0.9]
    data["calibrators"]["t"]["isotonic_y"] = [0.2, 0.8]
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_calibrators(path)


shipped = confidence_calibrators()


def test_shipped_calibrators_load_with_their_hash():
    assert shipped is not None, "the package ships its trackers' calibrators"
    path, digest = shipped
    calibrators = load_calibrators(path, sha256=digest)
    assert {"atom", "dimp-nce+"} <= set(calibrators)
    for name in ("atom", "dimp-nce+"):
        assert calibrators[name].features == FEATURES
        assert resolve_calibrator(name, "mobilenetv2", name) == calibrators[name]
        assert resolve_calibrator(name, "resnet18", name) is None  # fitted for MobileNetV2


def test_tampered_shipped_file_is_refused(tmp_path):
    path, digest = shipped
    data = json.loads(path.read_text())
    data["calibrators"]["atom"]["bias"] += 1.0
    tampered = tmp_path / path.name
    tampered.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    with pytest.raises(ValueError, match="sha256 differs"):
        load_calibrators(tampered, sha256=digest)


@pytest.mark.parametrize("name", ["atom", "dimp-nce+"])
def test_shipped_confidence_is_a_monotone_probability(name):
    calibrator = load_calibrators(*shipped)[name]
    rng = np.random.default_rng(6)
    base = np.array(calibrator.mean) + rng.normal(size=(50, len(FEATURES))) * np.array(
        calibrator.scale
    )
    base[:, FEATURES.index("not_found")] = 0.0
    for feature, sign in DIRECTIONS.items():
        i = FEATURES.index(feature)
        low, high = (calibrator.mean[i] + k * calibrator.scale[i] for k in (-3, 3))
        values = np.linspace(low, high, 25)
        for row in base:
            grid = np.repeat(row[None], len(values), axis=0)
            grid[:, i] = values
            p = calibrator.predict(grid)
            assert np.all((p >= 0) & (p <= 1))
            assert np.all(sign * np.diff(p) >= -1e-12), feature
    assert math.isnan(calibrator({"peak": math.nan})) is False


def test_resolve_calibrator_from_a_file_or_refuses(tmp_path):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(200, 1))
    one = fit_calibrator(x, x[:, 0] > 0, ("peak",))
    path = tmp_path / "c.json"
    save_calibrators(path, {"mine": one})
    assert resolve_calibrator(path, "mobilenetv2", "atom") == one  # its only calibrator
    assert resolve_calibrator(None, "mobilenetv2", "atom") is None
    save_calibrators(path, {"mine": one, "other": one})
    with pytest.raises(ValueError, match="none named 'atom'"):
        resolve_calibrator(path, "mobilenetv2", "atom")
    with pytest.raises(FileNotFoundError, match="not found"):
        resolve_calibrator(tmp_path / "missing.json", "mobilenetv2", "atom")
    with pytest.raises(ValueError, match="does not ship"):
        resolve_calibrator("nonesuch", "mobilenetv2", "atom")
