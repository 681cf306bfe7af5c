"""Reading frames from disk: one place that fixes the colour convention (RGB uint8)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


def jpeg_ends_early(data: bytes) -> bool:
    """Whether ``data``, a JPEG file's bytes, stops before its end-of-image marker: a file cut
    short (libjpeg then fills the rest of the picture with grey and only warns). The entropy-coded
    data never holds the marker (0xFF is stuffed there), so a whole file has one after its last
    start-of-scan marker; an EXIF thumbnail's comes before it."""
    return data.rfind(b"\xff\xd9") < data.rfind(b"\xff\xda")


def read_image(path: str | Path, keep_gray: bool = False, whole: bool = False) -> np.ndarray:
    """Read an image file as uint8 RGB (H, W, 3).

    Grayscale files come back as (H, W) when ``keep_gray`` is set, else with three equal channels.
    ``whole``: refuse a JPEG file cut short (:func:`jpeg_ends_early`), which libjpeg decodes
    with its missing part grey.
    Raises FileNotFoundError or ValueError with the path when the file is missing or unreadable.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image not found: {path}")
    if whole:
        data = path.read_bytes()
        if data[:2] == b"\xff\xd8" and jpeg_ends_early(data):
            raise ValueError(f"damaged image (the JPEG data ends early, cut short): {path}")
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    else:
        image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise ValueError(f"cannot decode image: {path}")
    if image.dtype != np.uint8:
        image = cv2.convertScaleAbs(image, alpha=255.0 / max(float(image.max()), 1.0))
    if image.ndim == 2:
        return image if keep_gray else np.repeat(image[:, :, None], 3, axis=2)
    if image.shape[2] == 4:
        image = image[:, :, :3]
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def list_images(folder: str | Path) -> list[Path]:
    """Image files of ``folder`` sorted by name; raises if the folder is missing or has none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise NotADirectoryError(f"not a folder: {folder}")
    frames = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not frames:
        raise ValueError(f"no image files ({', '.join(IMAGE_SUFFIXES)}) in {folder}")
    return frames
