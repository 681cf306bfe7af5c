"""ATOM's online classifier in NumPy: scores, labels, and its Gauss-Newton / CG training with
closed-form Jacobian products (the torch side: :mod:`ebmtrack.models.atom_classifier`, whose
products come from double backprop for the first frame).

The classifier is ``s = A(w2, P x)``: a 1x1 projection ``P`` (D, C) of the features ``x``, then
the correlation ``A`` with a k x k filter ``w2`` (D, k, k), padding ``p = k // 2`` and the output
kept at the input's size::

    A(w, z)[b, i, j] = sum_{c, dy, dx} w[c, dy, dx] z[b, c, i + dy - p, j + dx - p]   (0 outside)

**The Jacobian products.** ``A`` is bilinear, so its derivatives are ``A`` itself and two
adjoints. With ``q`` (B, H, W) and its k*k shifted windows ``Q_t[b, u, v] = q[b, u - dy + p,
v - dx + p]`` (tap ``t = dy k + dx``, 0 outside):

- in the filter, ``<A(w, z), q> = <w, A_z^T q>`` with ``(A_z^T q)[c, t] = sum_{b,u,v} z[b, c, u,
  v] Q_t[b, u, v]``: a correlation of the features with ``q``, one matrix product ``Z Q^T`` of the
  channel-major features Z (D, B*H*W) and the windows Q (k*k, B*H*W);
- in the features, ``<A(w, z), q> = <z, A_w^T q>`` with ``(A_w^T q)[b, c, u, v] = sum_t w[c, t]
  Q_t[b, u, v]``: the transposed correlation (a correlation with the flipped filter), ``W Q``
  with W = ``w`` as (D, k*k).

The forward map is ``A(w, z) = shift-sum(W^T Z)``: the k*k per-tap maps, each added shifted by its
tap. The loss's data residual is ``r = sqrt(g) (pelu(s) - y)`` per sample weight ``g``, so with
``d = sqrt(g) pelu'(s)`` (``pelu'(t) = exp(min(t, 0) / alpha)``) and Z = P X:

    J [dw, dP] = d * (A(dw, P x) + A(w, dP x)) = d * shift-sum(dW^T Z + (W^T dP) X)
    J^T q      = [Z G^T,  W (G X^T)]   with G the windows of d * q

and the regularisation rows ``sqrt(lambda2) w`` and ``sqrt(lambda1) P`` add ``sqrt(lambda) *``
their parts. Every product is one matrix product over all samples (tested against autograd and
against PyTorch's solver).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ebmtrack.lite.gauss_newton import gauss_newton_cg, solve_linearized

__all__ = [
    "ClassifierSettings",
    "FilterProblem",
    "JointProblem",
    "channel_major",
    "filter_adjoint",
    "filter_response",
    "fit_classifier",
    "gaussian_labels",
    "input_adjoint",
    "label_sigma",
    "normalize_features",
    "pelu",
    "project",
    "shift_sum",
    "update_filter",
    "windows",
]


@dataclass(frozen=True)
class ClassifierSettings:
    """The classifier's loss weights (``ClassifierConfig``'s fields): PELU's ``alpha``, the
    filter's ``lambda2`` (``filter_reg``) and the projection's ``lambda1``
    (``projection_reg``)."""

    pelu_alpha: float = 0.05
    filter_reg: float = 0.1
    projection_reg: float = 1e-4


def pelu(t: np.ndarray, alpha: float) -> np.ndarray:
    """``t`` for t >= 0, ``alpha (exp(t / alpha) - 1)`` below."""
    return np.where(t >= 0, t, alpha * np.expm1(np.minimum(t, 0) / alpha)).astype(t.dtype)


def normalize_features(features: np.ndarray) -> np.ndarray:
    """Each sample (B, C, H, W) divided by its root mean square over C, H, W."""
    power = np.mean(np.square(features), axis=(1, 2, 3), keepdims=True, dtype=np.float32)
    return features / np.sqrt(power + np.float32(1e-10))


def channel_major(features: np.ndarray) -> np.ndarray:
    """(B, C, H, W) -> (C, B*H*W), a contiguous copy."""
    return np.ascontiguousarray(features.transpose(1, 0, 2, 3)).reshape(features.shape[1], -1)


def project(features: np.ndarray, projection: np.ndarray) -> np.ndarray:
    """The 1x1 projection: (B, C, H, W), (D, C) -> (B, D, H, W)."""
    batch, channels, height, width = features.shape
    out = np.matmul(projection, features.reshape(batch, channels, height * width))
    return out.reshape(batch, -1, height, width)


def shift_sum(maps: np.ndarray, k: int) -> np.ndarray:
    """(k*k, B, H, W) per-tap maps -> (B, H, W): ``out[b, i, j] = sum_t maps[t, b, i + dy - p,
    j + dx - p]`` (0 outside), ``t = dy k + dx``, ``p = k // 2``."""
    _, batch, height, width = maps.shape
    pad = k // 2
    out = np.zeros((batch, height + 2 * pad, width + 2 * pad), dtype=maps.dtype)
    for tap in range(k * k):
        dy, dx = divmod(tap, k)
        out[:, 2 * pad - dy : 2 * pad - dy + height, 2 * pad - dx : 2 * pad - dx + width] += maps[
            tap
        ]
    return out[:, pad : pad + height, pad : pad + width]


def windows(q: np.ndarray, k: int) -> np.ndarray:
    """(B, H, W) -> (k*k, B*H*W): row ``t = dy k + dx`` holds ``q[b, u - dy + p, v - dx + p]``
    at (b, u, v), 0 outside."""
    batch, height, width = q.shape
    pad = k // 2
    padded = np.zeros((batch, height + 2 * k, width + 2 * k), dtype=q.dtype)
    padded[:, k : k + height, k : k + width] = q
    out = np.empty((k, k, batch, height, width), dtype=q.dtype)
    for dy in range(k):
        for dx in range(k):
            row0, col0 = pad + k - dy, pad + k - dx
            out[dy, dx] = padded[:, row0 : row0 + height, col0 : col0 + width]
    return out.reshape(k * k, -1)


def filter_response(features: np.ndarray, filt: np.ndarray) -> np.ndarray:
    """``A(w, z)``: (B, D, H, W) features, (D, k, k) filter -> (B, H, W)."""
    batch, channels, height, width = features.shape
    k = filt.shape[-1]
    taps = filt.reshape(channels, k * k).T  # (k*k, D)
    maps = np.matmul(taps, features.reshape(batch, channels, height * width))  # (B, k*k, HW)
    return shift_sum(maps.transpose(1, 0, 2).reshape(k * k, batch, height, width), k)


def filter_adjoint(features: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """``A_z^T q``: (B, D, H, W), (B, H, W) -> (D, k, k), with ``<A(w, z), q> = <w, A_z^T q>``."""
    return (channel_major(features) @ windows(q, k).T).reshape(features.shape[1], k, k)


def input_adjoint(filt: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``A_w^T q``: (D, k, k), (B, H, W) -> (B, D, H, W), with ``<A(w, z), q> = <z, A_w^T q>``."""
    channels, k = filt.shape[0], filt.shape[-1]
    batch, height, width = q.shape
    out = filt.reshape(channels, k * k) @ windows(q, k)  # (D, B*H*W)
    return np.ascontiguousarray(out.reshape(channels, batch, height, width).transpose(1, 0, 2, 3))


def label_sigma(sigma_factor: float, size, crop_size: float, side: float) -> float:
    """The labels' std in crop px for a target of ``size`` (w, h, frame px) in a crop of
    ``side`` frame px resized to ``crop_size`` px: ATOM's ``sigma_factor`` times the target's
    side ``sqrt(w h)`` in crop px (the one-pass trackers fix it at the first frame: their crop's
    side is not a fixed multiple of it)."""
    return sigma_factor * math.sqrt(size[0] * size[1]) * (crop_size / side)


def gaussian_labels(centers: np.ndarray, sigma: float, size: tuple[int, int]) -> np.ndarray:
    """(N, H, W) float32 Gaussians of peak 1 at ``centers`` (N, 2) (x, y) in score cells."""
    centers = np.asarray(centers, dtype=np.float32)
    height, width = size
    ys = np.arange(height, dtype=np.float32)
    xs = np.arange(width, dtype=np.float32)
    sigma = np.float32(sigma)
    gy = np.exp(np.float32(-0.5) * ((ys[None] - centers[:, 1:2]) / sigma) ** 2)
    gx = np.exp(np.float32(-0.5) * ((xs[None] - centers[:, 0:1]) / sigma) ** 2)
    return gy[:, :, None] * gx[:, None, :]


class _DataTerm:
    """``sqrt(g) (pelu(s) - y)`` at scores ``s`` (B, H, W): the residual and the row scale
    ``d = sqrt(g) pelu'(s)`` of its Jacobian."""

    def __init__(self, scores, labels, weights, alpha: float) -> None:
        sqrt_weights = np.sqrt(weights).astype(scores.dtype)[:, None, None]
        self.residual = sqrt_weights * (pelu(scores, alpha) - labels)
        slope = np.exp(np.minimum(scores, 0) / np.asarray(alpha, scores.dtype))
        self.row_scale = sqrt_weights * slope


class FilterProblem:
    """The filter-only residuals linearised at ``filt`` (the per-frame update): samples already
    projected, ``[sqrt(g) (pelu(A(w, z)) - y), sqrt(lambda2) w]``.

    Args:
        filt: (D, k, k) the linearisation point.
        samples: (B, D, H, W) projected samples, or their :func:`channel_major` (D, B*H*W) with
            ``sample_shape`` (B, H, W).
        labels: (B, H, W); weights: (B,).
        settings: the loss weights.
    """

    def __init__(
        self, filt, samples, labels, weights, settings: ClassifierSettings, sample_shape=None
    ):
        self.k = filt.shape[-1]
        if samples.ndim == 4:
            sample_shape = (samples.shape[0], *samples.shape[2:])
            samples = channel_major(samples)
        self.samples, self.shape = samples, tuple(sample_shape)
        self.channels = samples.shape[0]
        self.reg = np.asarray(math.sqrt(settings.filter_reg), filt.dtype)
        scores = self._response(filt.reshape(self.channels, -1))
        self.data = _DataTerm(scores, labels, weights, settings.pelu_alpha)
        self.residuals = [self.data.residual, self.reg * filt]
        self._gradient = self.vjp(self.residuals)

    def _response(self, taps: np.ndarray) -> np.ndarray:
        """(D, k*k) filter -> (B, H, W) scores of the samples."""
        maps = taps.T @ self.samples
        return shift_sum(maps.reshape(self.k * self.k, *self.shape), self.k)

    def loss(self) -> float:
        return 0.5 * float(sum(np.vdot(r, r) for r in self.residuals))

    def gradient(self) -> list[np.ndarray]:
        return self._gradient

    def jvp(self, direction):
        (step,) = direction
        response = self._response(step.reshape(self.channels, -1))
        return [self.data.row_scale * response, self.reg * step]

    def vjp(self, vector):
        data, reg = vector
        taps = windows(self.data.row_scale * data, self.k)
        grad = (self.samples @ taps.T).reshape(self.channels, self.k, self.k)
        return [grad + self.reg * reg]


class JointProblem:
    """Filter and projection jointly, linearised at ``(filt, projection)`` (the first frame):
    ``[sqrt(g) (pelu(A(w, P x)) - y), sqrt(lambda2) w, sqrt(lambda1) P]``.

    Args:
        filt: (D, k, k); projection: (D, C) the linearisation point.
        features: (C, B*H*W) the raw samples, channel-major (:func:`channel_major`).
        sample_shape: (B, H, W).
        labels: (B, H, W); weights: (B,).
        settings: the loss weights.
    """

    def __init__(self, filt, projection, features, sample_shape, labels, weights, settings):
        self.k = filt.shape[-1]
        self.x = features
        self.shape = tuple(sample_shape)
        self.filt, self.projection = filt, projection
        self.taps = filt.reshape(filt.shape[0], -1)  # (D, k*k)
        self.z = projection @ features  # (D, N)
        self.reg_filter = np.asarray(math.sqrt(settings.filter_reg), filt.dtype)
        self.reg_projection = np.asarray(math.sqrt(settings.projection_reg), filt.dtype)
        scores = self._shift(self.taps.T @ self.z)
        self.data = _DataTerm(scores, labels, weights, settings.pelu_alpha)
        self.residuals = [
            self.data.residual,
            self.reg_filter * filt,
            self.reg_projection * projection,
        ]
        self._gradient = self.vjp(self.residuals)

    def _shift(self, maps: np.ndarray) -> np.ndarray:
        return shift_sum(maps.reshape(self.k * self.k, *self.shape), self.k)

    def loss(self) -> float:
        return 0.5 * float(sum(np.vdot(r, r) for r in self.residuals))

    def gradient(self) -> list[np.ndarray]:
        return self._gradient

    def jvp(self, direction):
        step_filter, step_projection = direction
        d_taps = step_filter.reshape(self.taps.shape)
        maps = d_taps.T @ self.z + (self.taps.T @ step_projection) @ self.x
        return [
            self.data.row_scale * self._shift(maps),
            self.reg_filter * step_filter,
            self.reg_projection * step_projection,
        ]

    def vjp(self, vector):
        data, reg_filter, reg_projection = vector
        taps = windows(self.data.row_scale * data, self.k)  # (k*k, N)
        grad_filter = (self.z @ taps.T).reshape(self.filt.shape)
        grad_projection = self.taps @ (taps @ self.x.T)
        return [
            grad_filter + self.reg_filter * reg_filter,
            grad_projection + self.reg_projection * reg_projection,
        ]


def fit_classifier(
    filt: np.ndarray,
    projection: np.ndarray,
    samples: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    settings: ClassifierSettings,
    gn_iters: int = 6,
    cg_iters: int = 10,
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """First-frame training of filter and projection: ``gn_iters`` Gauss-Newton steps of
    ``cg_iters`` Fletcher-Reeves CG iterations, preconditioned by the regularisation weights
    (ATOM's; :func:`ebmtrack.models.atom_classifier.fit_classifier`).

    Args:
        filt: (D, k, k); projection: (D, C) the start.
        samples: (B, C, H, W) raw (normalised) backbone features.
        labels: (B, H, W); weights: (B,).

    Returns:
        ``(filt, projection, losses)``.
    """
    features = channel_major(samples)
    shape = (samples.shape[0], *samples.shape[2:])

    def linearize(params):
        return JointProblem(*params, features, shape, labels, weights, settings)

    (filt, projection), losses = gauss_newton_cg(
        linearize,
        [filt, projection],
        gn_iters,
        cg_iters,
        preconditioner=[settings.filter_reg, settings.projection_reg],
        beta="fletcher-reeves",
    )
    return filt, projection, losses


def update_filter(
    filt: np.ndarray,
    samples: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    settings: ClassifierSettings,
    cg_iters: int = 5,
) -> tuple[np.ndarray, float]:
    """The per-frame update: ``cg_iters`` Polak-Ribiere CG steps on the filter-only problem
    linearised at ``filt`` (:func:`ebmtrack.models.atom_classifier.update_filter`). ``samples``
    (B, D, H, W) are projected. Returns the new filter and the loss before the step."""
    if cg_iters < 0:
        raise ValueError(f"cg_iters must be >= 0, got {cg_iters}")
    problem = FilterProblem(filt, samples, labels, weights, settings)
    (step,) = solve_linearized(problem, cg_iters, None, "polak-ribiere")
    return filt + step, problem.loss()
