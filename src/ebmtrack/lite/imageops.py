"""The image operations the crops take from OpenCV, with OpenCV's semantics: OpenCV's own where
``import cv2`` works, NumPy's otherwise (then the runtime needs NumPy and ONNX Runtime only).

Images are (H, W) or (H, W, C) arrays, uint8 or float; every function returns the input's dtype
(integers rounded half to even and saturated, as OpenCV's ``saturate_cast``). Pixel centres sit at
integer coordinates, as in OpenCV. The NumPy path computes in float64 (the uint8 blur in OpenCV's
fixed point): its results are OpenCV 5's up to float32 rounding: within 1e-4 for float32 in
[0, 255] and one grey level for uint8 (tests/lite/test_imageops.py), most pixels identical.
"""

from __future__ import annotations

import math

import numpy as np

try:
    import cv2
except ImportError:  # the NumPy path; tests set ``cv2 = None`` to take it
    cv2 = None

__all__ = [
    "gaussian_blur",
    "invert_affine_transform",
    "pad_replicate",
    "resize_area",
    "warp_affine",
]


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float ``values`` as ``dtype``: integers rounded half to even and saturated."""
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        values = np.rint(values)
        np.clip(values, info.min, info.max, out=values)
    return values.astype(dtype)


def invert_affine_transform(matrix: np.ndarray) -> np.ndarray:
    """The inverse (2, 3) float64 of an affine (2, 3) map (``cv2.invertAffineTransform``;
    a singular map gives zeros as there)."""
    if cv2 is not None:
        return cv2.invertAffineTransform(np.asarray(matrix, dtype=np.float64))
    (a, b, c), (d, e, f) = np.asarray(matrix, dtype=np.float64)
    det = a * e - b * d
    det = 1.0 / det if det != 0 else 0.0
    a, b, d, e = e * det, -b * det, -d * det, a * det
    return np.array([[a, b, -a * c - b * f], [d, e, -d * c - e * f]])


def pad_replicate(image: np.ndarray, top: int, bottom: int, left: int, right: int) -> np.ndarray:
    """``image`` grown by the given rows and columns, which repeat its border
    (``cv2.copyMakeBorder`` with ``BORDER_REPLICATE``) -> (H + top + bottom, W + left + right
    [, C])."""
    if cv2 is not None:
        padded = cv2.copyMakeBorder(image, top, bottom, left, right, cv2.BORDER_REPLICATE)
        return padded.reshape(padded.shape[:2] + image.shape[2:])
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (image.ndim - 2)
    return np.pad(image, widths, mode="edge")


def _area_weights(src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's area resampling of ``src`` pixels into ``dst`` <= ``src`` (``resizeArea``'s
    tables): output pixel i averages source pixels ``index[i]`` with ``weight[i]`` (dst, K),
    each the fraction of [i s, (i + 1) s) (s = src / dst) that the source pixel covers."""
    scale = src / dst
    width = math.ceil(scale) + 1
    index = np.zeros((dst, width), dtype=np.intp)
    weight = np.zeros((dst, width))
    for i in range(dst):
        start = i * scale
        end = start + scale
        cell = min(scale, src - start)
        first = min(math.ceil(start), src - 1)
        last = min(math.floor(end), src - 1)
        first = min(first, last)
        parts = []
        if first - start > 1e-3:
            parts.append((first - 1, (first - start) / cell))
        parts += [(j, 1.0 / cell) for j in range(first, last)]
        if end - last > 1e-3:
            parts.append((last, min(min(end - last, 1.0), cell) / cell))
        index[i, : len(parts)], weight[i, : len(parts)] = zip(*parts)
    return index, weight


def _resample(image: np.ndarray, axis: int, index: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Output i along ``axis`` = sum over k of ``weight[i, k] * image[index[i, k]]``."""
    shape = [1] * image.ndim
    shape[axis] = len(index)
    total = 0
    for k in range(index.shape[1]):
        total = total + weight[:, k].reshape(shape) * np.take(image, index[:, k], axis=axis)
    return total


def resize_area(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``image`` (H, W[, C]) shrunk to ``size`` (w, h) <= (W, H) by area averaging
    (``cv2.resize`` with ``INTER_AREA``) -> (h, w[, C]): each output pixel is the mean of the
    source area it covers (whole k x k blocks where the factors are integers; uint8 2x2 means
    round half up, as OpenCV's). The NumPy path only shrinks: OpenCV's INTER_AREA enlarges
    bilinearly, which the crops never ask for."""
    if cv2 is not None:
        resized = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        return resized.reshape(resized.shape[:2] + image.shape[2:])
    (height, width), (new_w, new_h) = image.shape[:2], size
    if new_w > width or new_h > height or min(new_w, new_h) < 1:
        raise ValueError(f"resize_area shrinks only: {width}x{height} -> {new_w}x{new_h}")
    if width % new_w == 0 and height % new_h == 0:
        fy, fx = height // new_h, width // new_w
        wide = np.int32 if np.issubdtype(image.dtype, np.integer) else np.float64
        sums = sum(image[i::fy, j::fx].astype(wide) for i in range(fy) for j in range(fx))
        if fx * fy == 4 and image.dtype == np.uint8:
            return ((sums + 2) >> 2).astype(np.uint8)
        return _cast(sums / (fx * fy), image.dtype)
    resized = _resample(image, 1, *_area_weights(width, new_w))
    return _cast(_resample(resized, 0, *_area_weights(height, new_h)), image.dtype)


def warp_affine(image: np.ndarray, matrix: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``image`` (H, W[, C]) warped by the affine ``matrix`` (2, 3, source -> output pixel
    coordinates) into ``size`` (w, h) -> (h, w[, C]): output pixel (x, y) samples the source
    bilinearly at the inverse map's image of (x, y), the source's border repeating outside it
    (``cv2.warpAffine`` with ``INTER_LINEAR`` and ``BORDER_REPLICATE``)."""
    if cv2 is not None:
        warped = cv2.warpAffine(
            np.ascontiguousarray(image),
            np.asarray(matrix, dtype=np.float64),
            size,
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REPLICATE,
        )
        return warped.reshape(warped.shape[:2] + image.shape[2:])
    inverse = invert_affine_transform(matrix)
    width, height = size
    (rows_x, rows_y), (cols_x, cols_y) = inverse[:, :2].T  # source step per output column, row
    src_x = inverse[0, 2] + rows_x * np.arange(width)
    src_y = inverse[1, 2] + cols_y * np.arange(height)
    if rows_y == 0 and cols_x == 0:  # axis-aligned: columns, then rows, each once
        (y0, y1), fy = _neighbours(src_y, image.shape[0])
        (x0, x1), fx = _neighbours(src_x, image.shape[1])
        fx = fx.reshape((-1,) + (1,) * (image.ndim - 2))
        fy = fy.reshape((-1,) + (1,) * (image.ndim - 1))
        columns = _lerp(np.take(image, x0, axis=1), np.take(image, x1, axis=1), fx)
        return _cast(_lerp(columns[y0], columns[y1], fy), image.dtype)
    src_x = src_x + cols_x * np.arange(height)[:, None]
    src_y = src_y[:, None] + rows_y * np.arange(width)
    (x0, x1), fx = _neighbours(src_x, image.shape[1])
    (y0, y1), fy = _neighbours(src_y, image.shape[0])
    if image.ndim == 3:
        fx, fy = fx[..., None], fy[..., None]
    flat = image.reshape(-1, *image.shape[2:])
    stride = image.shape[1]
    top = _lerp(np.take(flat, y0 * stride + x0, 0), np.take(flat, y0 * stride + x1, 0), fx)
    bottom = _lerp(np.take(flat, y1 * stride + x0, 0), np.take(flat, y1 * stride + x1, 0), fx)
    return _cast(_lerp(top, bottom, fy), image.dtype)


def _neighbours(
    coords: np.ndarray, length: int
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """The two pixels around each of ``coords`` along an axis of ``length`` (clipped: the border
    repeats) and the float32 weight of the second."""
    start = np.floor(coords)
    index = start.astype(np.intp)
    pair = np.clip(index, 0, length - 1), np.clip(index + 1, 0, length - 1)
    return pair, (coords - start).astype(np.float32)


def _lerp(a: np.ndarray, b: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``a + weight (b - a)`` in float32 (float64 for float64 input)."""
    a = a.astype(np.result_type(a, np.float32), copy=False)
    out = np.subtract(b, a, dtype=a.dtype)
    out *= weight
    out += a
    return out


# OpenCV's kernels for sigma <= 0 up to 9 taps (in 256ths)
_SMALL_KERNELS = {
    1: (256,),
    3: (64, 128, 64),
    5: (16, 64, 96, 64, 16),
    7: (8, 28, 56, 72, 56, 28, 8),
    9: (4, 13, 30, 51, 60, 51, 30, 13, 4),
}


def _gaussian_kernel(ksize: int, sigma: float) -> np.ndarray:
    """``cv2.getGaussianKernel(ksize, sigma)`` (ksize,) float64: sigma <= 0 takes OpenCV's
    fixed kernels up to 9 taps, ``0.3 ((ksize - 1) / 2 - 1) + 0.8`` beyond."""
    if sigma <= 0:
        if ksize in _SMALL_KERNELS:
            return np.array(_SMALL_KERNELS[ksize]) / 256.0
        sigma = 0.15 * ksize + 0.35
    x = np.arange(ksize) - (ksize - 1) / 2.0
    kernel = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return kernel / kernel.sum()


def _fixed_kernel(kernel: np.ndarray) -> np.ndarray:
    """A symmetric odd ``kernel`` in 256ths as OpenCV's uint8 blur takes it (int32, summing to
    256): rounded from the ends in with the error carried on, the centre what is left."""
    fixed = np.empty(len(kernel), dtype=np.int32)
    error, half = 0.0, len(kernel) // 2
    for i in range(half):
        value = kernel[i] * 256.0 + error
        fixed[i] = fixed[-1 - i] = round(value)
        error = value - fixed[i]
    fixed[half] = 256 - 2 * fixed[:half].sum()
    return fixed


def _filter(image: np.ndarray, axis: int, kernel: np.ndarray) -> np.ndarray:
    """``image`` correlated with ``kernel`` (odd length) along ``axis``, border repeated."""
    length, half = image.shape[axis], len(kernel) // 2
    widths = [(0, 0)] * image.ndim
    widths[axis] = (half, half)
    padded = np.moveaxis(np.pad(image, widths, mode="edge"), axis, 0)
    total = sum(weight * padded[k : k + length] for k, weight in enumerate(kernel))
    return np.moveaxis(total, 0, axis)


def gaussian_blur(
    image: np.ndarray, ksize: tuple[int, int], sigma_x: float, sigma_y: float = 0.0
) -> np.ndarray:
    """``image`` (H, W[, C]) smoothed by a separable Gaussian of ``ksize`` (kw, kh) taps (odd,
    or 0: from the sigma, ``round(sigma * (3 for uint8 else 4) * 2 + 1) | 1``) and ``sigma_x``,
    ``sigma_y`` (0: ``sigma_x``) px, the border repeated (``cv2.GaussianBlur`` with
    ``BORDER_REPLICATE``) -> the input's shape and dtype."""
    if cv2 is not None:
        blurred = cv2.GaussianBlur(
            image, ksize, sigmaX=sigma_x, sigmaY=sigma_y, borderType=cv2.BORDER_REPLICATE
        )
        return blurred.reshape(image.shape)
    sigma_x = max(sigma_x, 0.0)
    sigma_y = sigma_y if sigma_y > 0 else sigma_x
    reach = 3 if image.dtype == np.uint8 else 4
    kw, kh = (
        k if k > 0 else int(np.rint(s * reach * 2 + 1)) | 1
        for k, s in zip(ksize, (sigma_x, sigma_y))
    )
    if kw % 2 == 0 or kh % 2 == 0:
        raise ValueError(f"ksize must be odd, got {(kw, kh)}")
    kernels = _gaussian_kernel(kw, sigma_x), _gaussian_kernel(kh, sigma_y)
    if image.dtype == np.uint8:  # OpenCV's bit-exact fixed point, 8 fractional bits a pass
        rows = _filter(image.astype(np.int32), 1, _fixed_kernel(kernels[0]))
        blurred = _filter(rows, 0, _fixed_kernel(kernels[1]))
        return np.minimum((blurred + (1 << 15)) >> 16, 255).astype(np.uint8)
    blurred = _filter(image, 1, kernels[0])
    return _cast(_filter(blurred, 0, kernels[1]), image.dtype)
