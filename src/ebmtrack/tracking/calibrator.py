"""A small probability calibrator: a logistic regression over named features, optionally
followed by an isotonic map, fitted in closed numerical form and stored as JSON.

``p(x) = iso(sigmoid(b + sum_i w_i (x_i - m_i) / s_i))`` with missing (NaN) inputs replaced by
the training mean ``fill_i``. Weights may be constrained in sign (``directions``: +1 the
probability never falls as the feature grows, -1 never rises, 0 free), so the map is monotone
in those features; the isotonic map (pool-adjacent-violators on the logistic's output, applied
by linear interpolation between the pooled blocks) is non-decreasing and keeps that.

Files: ``{"format": "ebmtrack.calibrators", "version": 1, "calibrators": {NAME: {...}}}``,
read by :func:`load_calibrators`, which checks the file's sha256 when given one and every
field's type and size.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "FORMAT",
    "Calibrator",
    "fit_calibrator",
    "isotonic_fit",
    "load_calibrators",
    "resolve_calibrator",
    "save_calibrators",
]

FORMAT = "ebmtrack.calibrators"
_VERSION = 1


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclass(frozen=True)
class Calibrator:
    """``features`` -> the probability of the event it was fitted on (see the module docstring).

    Attributes:
        features: the input names, in order.
        fill: value used for a missing (NaN) input, per feature.
        mean, scale: standardisation of each input.
        weights: logistic weights of the standardised inputs; ``bias`` its intercept.
        isotonic_x, isotonic_y: knots of the isotonic map of the logistic's probability (x
            increasing, y non-decreasing in [0, 1]); empty: none.
        info: what it was fitted on (free-form JSON).
    """

    features: tuple[str, ...]
    fill: tuple[float, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    isotonic_x: tuple[float, ...] = ()
    isotonic_y: tuple[float, ...] = ()
    info: dict = field(default_factory=dict, compare=False)

    def logistic(self, x: np.ndarray) -> np.ndarray:
        """(N, F) inputs in ``features`` order -> (N,) the logistic's probability."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, len(self.features))
        x = np.where(np.isfinite(x), x, np.asarray(self.fill))
        z = self.bias + ((x - np.asarray(self.mean)) / np.asarray(self.scale)) @ np.asarray(
            self.weights
        )
        return _sigmoid(z)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """(N, F) inputs -> (N,) probabilities in [0, 1]."""
        p = self.logistic(x)
        if self.isotonic_x:
            p = np.interp(p, self.isotonic_x, self.isotonic_y)
        return p

    def __call__(self, features: Mapping[str, float]) -> float:
        """The probability for one frame's ``features`` (a missing name counts as NaN)."""
        row = [features.get(name, math.nan) for name in self.features]
        return float(self.predict(np.asarray(row, dtype=np.float64)[None])[0])


def isotonic_fit(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pool adjacent violators: the non-decreasing fit of labels ``y`` (N,) in the order of
    ``p`` (N,). Returns knots (x, y): each pooled block's mean ``p`` and mean label."""
    order = np.argsort(p, kind="stable")
    ps, ys = np.asarray(p, float)[order], np.asarray(y, float)[order]
    sums_y, sums_p, counts = [], [], []
    for pi, yi in zip(ps, ys, strict=True):
        sums_y.append(yi)
        sums_p.append(pi)
        counts.append(1)
        while len(counts) > 1 and sums_y[-2] / counts[-2] >= sums_y[-1] / counts[-1]:
            yl, pl, cl = sums_y.pop(), sums_p.pop(), counts.pop()
            sums_y[-1] += yl
            sums_p[-1] += pl
            counts[-1] += cl
    counts = np.asarray(counts, float)
    return np.asarray(sums_p) / counts, np.asarray(sums_y) / counts


def fit_calibrator(
    x: np.ndarray,
    y: np.ndarray,
    features: Sequence[str],
    directions: Mapping[str, int] | None = None,
    l2: float = 1e-3,
    isotonic: bool = False,
    info: dict | None = None,
) -> Calibrator:
    """Fit a :class:`Calibrator` to inputs ``x`` (N, F) and binary labels ``y`` (N,).

    Minimises the mean log loss plus ``l2 / 2 * |w|^2`` over standardised inputs (L-BFGS-B,
    weights kept to the sign of ``directions[name]`` where it is +1 or -1), then, with
    ``isotonic``, fits the isotonic map of the logistic's output on the same data.
    Raises ValueError for mismatched shapes or labels of one class only.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.ndim != 2 or x.shape[1] != len(features) or len(x) != len(y):
        raise ValueError(f"x must be (N, {len(features)}) with N = len(y), got {x.shape}")
    if not (np.any(y == 1) and np.any(y == 0)) or not np.all((y == 0) | (y == 1)):
        raise ValueError("y must hold labels 0 and 1, both present")
    finite = np.isfinite(x)
    fill = np.array(
        [x[finite[:, i], i].mean() if finite[:, i].any() else 0.0 for i in range(x.shape[1])]
    )
    x = np.where(finite, x, fill)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    xs = (x - mean) / scale
    directions = directions or {}

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = theta[0] + xs @ theta[1:]
        value = np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * theta[1:] @ theta[1:]
        residual = (_sigmoid(z) - y) / len(y)
        grad = np.concatenate([[residual.sum()], xs.T @ residual + l2 * theta[1:]])
        return value, grad

    bounds = [(None, None)] + [
        {1: (0.0, None), -1: (None, 0.0)}.get(directions.get(name, 0), (None, None))
        for name in features
    ]
    prior = math.log(y.mean() / (1 - y.mean()))
    start = np.concatenate([[prior], np.zeros(len(features))])
    from scipy.optimize import minimize  # here: a tracker that only predicts never imports scipy

    result = minimize(loss, start, jac=True, method="L-BFGS-B", bounds=bounds)
    theta = result.x
    calibrator = Calibrator(
        tuple(features),
        tuple(map(float, fill)),
        tuple(map(float, mean)),
        tuple(map(float, scale)),
        tuple(map(float, theta[1:])),
        float(theta[0]),
        info=dict(info or {}),
    )
    if not isotonic:
        return calibrator
    knots_x, knots_y = isotonic_fit(calibrator.logistic(x), y)
    return Calibrator(
        **{
            **asdict(calibrator),
            "isotonic_x": tuple(map(float, knots_x)),
            "isotonic_y": tuple(map(float, knots_y)),
        }
    )


def save_calibrators(path: str | Path, calibrators: Mapping[str, Calibrator]) -> str:
    """Write ``calibrators`` by name to a JSON file; returns its sha256."""
    data = {
        "format": FORMAT,
        "version": _VERSION,
        "calibrators": {name: asdict(c) for name, c in sorted(calibrators.items())},
    }
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    Path(path).write_text(text)
    return hashlib.sha256(text.encode()).hexdigest()


def _numbers(entry: dict, key: str, size: int | None, where: str) -> tuple[float, ...]:
    values = entry.get(key)
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in values
    ):
        raise ValueError(f"{where}: {key!r} must be a list of finite numbers")
    if size is not None and len(values) != size:
        raise ValueError(f"{where}: {key!r} has {len(values)} values, expected {size}")
    return tuple(float(v) for v in values)


def _calibrator(entry, where: str) -> Calibrator:
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object")
    names = entry.get("features")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{where}: 'features' must be a non-empty list of names")
    size = len(names)
    (bias,) = _numbers({"bias": [entry.get("bias")]}, "bias", 1, where)
    iso_x = _numbers(entry, "isotonic_x", None, where)
    iso_y = _numbers(entry, "isotonic_y", len(iso_x), where)
    if np.any(np.diff(iso_x) < 0) or np.any(np.diff(iso_y) < 0) or not all(
        0 <= v <= 1 for v in iso_y
    ):
        raise ValueError(f"{where}: the isotonic knots must be non-decreasing, y in [0, 1]")
    scale = _numbers(entry, "scale", size, where)
    if not all(s > 0 for s in scale):
        raise ValueError(f"{where}: 'scale' must be positive")
    return Calibrator(
        tuple(names),
        _numbers(entry, "fill", size, where),
        _numbers(entry, "mean", size, where),
        scale,
        _numbers(entry, "weights", size, where),
        bias,
        iso_x,
        iso_y,
        dict(entry.get("info") or {}),
    )


def load_calibrators(path: str | Path, sha256: str | None = None) -> dict[str, Calibrator]:
    """The calibrators of a file written by :func:`save_calibrators`, by name.

    Raises ValueError when ``sha256`` is given and the file's differs, or when the file is not
    such a file (each problem named); FileNotFoundError when it does not exist.
    """
    path = Path(path)
    raw = path.read_bytes()
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
        raise ValueError(f"{path} is not the known calibrator file (sha256 differs)")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a JSON calibrator file: {err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path} is not a calibrator file (format {FORMAT!r})")
    if data.get("version") != _VERSION:
        raise ValueError(f"{path}: calibrator file version {data.get('version')!r} unknown")
    entries = data.get("calibrators")
    if not isinstance(entries, dict) or not entries:
        raise ValueError(f"{path}: 'calibrators' must map names to calibrators")
    return {name: _calibrator(e, f"{path} calibrator {name!r}") for name, e in entries.items()}


def resolve_calibrator(spec: str | Path | None, backbone: str, name: str) -> Calibrator | None:
    """The calibrator a tracker factory is given as its ``calibrator`` option.

    ``spec`` is None (none: the confidence is NaN), the name of a shipped calibrator
    (``atom``, ``dimp-nce+``: from the calibrator file shipped for ``backbone``,
    :data:`ebmtrack.weights.SHIPPED`, sha256 checked; None when none ships for ``backbone``) or a
    file written by :func:`save_calibrators` (its calibrator ``name``, or its only one).
    Raises ValueError for a file without a usable calibrator, FileNotFoundError for a missing
    file.
    """
    from ebmtrack.weights import find_shipped

    if spec is None:
        return None
    if isinstance(spec, str) and not Path(spec).suffix:
        shipped = find_shipped("calibrator", backbone)
        if shipped is None:
            return None
        calibrators = load_calibrators(shipped.path, shipped.sha256)
        if spec not in calibrators:
            raise ValueError(
                f"calibrator {spec!r} does not ship; shipped: {', '.join(sorted(calibrators))}"
                " (or give a calibrator file)"
            )
        made_for = calibrators[spec].info.get("backbone")
        return calibrators[spec] if made_for in (None, backbone) else None
    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"calibrator file not found: {path}")
    calibrators = load_calibrators(path)
    if name in calibrators:
        return calibrators[name]
    if len(calibrators) == 1:
        return next(iter(calibrators.values()))
    raise ValueError(
        f"{path} holds calibrators {', '.join(sorted(calibrators))}, none named {name!r}"
    )
