"""Square image crops around a target: the search regions of tracking and training.

The code lives in :mod:`ebmtrack.lite.crop` (NumPy and OpenCV only), so that the torch-free
runtime cuts exactly the crops the trackers cut; this module is its name beside the other ops.
"""

from ebmtrack.lite.crop import (
    CropSpec,
    apply_matrix,
    box_from_crop,
    box_to_crop,
    crop_matrix,
    crop_search_region,
    crop_square,
    crop_squares,
    halve,
    invert_affine,
    pyramid_level,
    residual_sigma,
    search_region_side,
)

__all__ = [
    "CropSpec",
    "apply_matrix",
    "box_from_crop",
    "box_to_crop",
    "crop_matrix",
    "crop_search_region",
    "crop_square",
    "crop_squares",
    "halve",
    "invert_affine",
    "pyramid_level",
    "residual_sigma",
    "search_region_side",
]
