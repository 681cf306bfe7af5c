"""From the classifier's score map to a target position and a status (ATOM's localisation step).

Score cell ``i`` of a map with stride ``s`` sits at crop pixel ``s * i`` (see
:mod:`ebmtrack.models.atom_classifier`). The map is upsampled with bicubic interpolation on the grid
of cell positions (``align_corners=True``), so fine cell ``k`` of factor ``f`` sits at pixel
``s * k / f``. The reference interpolates with a DFT to one value per crop pixel; bicubic on the
small map costs far less, gives the same peak to within a fraction of a cell on smooth maps, and
does not wrap around the borders as a DFT does (docs/atom.md). The peak is then judged by
:func:`ebmtrack.lite.localize.localize`, one rule for the torch trackers and the torch-free runtime.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# The peak's judgement and the scale search's choice are NumPy and shared with the torch-free
# runtime: one definition, in ebmtrack.lite.localize.
from ebmtrack.lite.localize import Localization, best_scale
from ebmtrack.lite.localize import localize as lite_localize

__all__ = ["Localization", "best_scale", "localize", "upsample_scores"]


def upsample_scores(scores: Tensor, factor: int) -> Tensor:
    """Bicubic upsampling of (H, W) scores on cell positions -> ((H-1) f + 1, (W-1) f + 1)."""
    if factor == 1:
        return scores
    height, width = scores.shape
    size = ((height - 1) * factor + 1, (width - 1) * factor + 1)
    return F.interpolate(scores[None, None], size=size, mode="bicubic", align_corners=True)[0, 0]


def localize(scores: Tensor, *args, **kwargs) -> Localization:
    """:func:`ebmtrack.lite.localize.localize` (its arguments and rules) on a (H, W) tensor."""
    values = scores.detach().cpu()
    if values.dtype != torch.float64:
        values = values.float()  # exact for the half types NumPy lacks
    return lite_localize(values.numpy(), *args, **kwargs)
