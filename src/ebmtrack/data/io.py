"""Reading frames from disk: one place that fixes the colour convention (RGB uint8)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


def read_image(path: str | Path, keep_gray: bool = False) -> np.ndarray:
    """Read an image file as uint8 RGB (H, W, 3).

    Grayscale files come back as (H, W) when ``keep_gray`` is set, else with three equal channels.
    Raises FileNotFoundError or ValueError with the path when the file is missing or unreadable.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image not found: {path}")
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
