"""The one check of a tracker option's value, for both runtimes: its kind (a number, an integer,
true or false, text, a list) and, for a number, its valid range (:data:`RANGES`). The torch
trackers' parameter dataclasses (:class:`~ebmtrack.tracking.params.SearchRegionParams`) and the
torch-free runtime's options (:func:`ebmtrack.lite.params.merge_options`) both check here, so an
option is valid or refused alike, with the same one line
(``size_update_rate must be in (0, 1], got -3``). No PyTorch.

>>> check_range("size_update_rate", 0.5)
>>> str(RANGES["memory_size"])
'an integer >= 1'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "KINDS",
    "RANGES",
    "TRAIN_EXTRA",
    "OptionError",
    "Range",
    "check_kind",
    "check_range",
    "check_ranges",
    "kind_of",
]

TRAIN_EXTRA = "pip install 'ebmtrack[train]'"
"""The install of what the torch side needs (PyTorch and the rest of ``ebmtrack[train]``), as
every refusal of a torch-only option, tracker or command names it."""


class OptionError(ValueError):
    """A bad value (or name) of an option: the message, and the options it concerns, so that a
    command can name the flag each came from (the first one it knows).

    >>> raise OptionError("search_size must be a multiple of 16, got 100", "search_size")
    """

    def __init__(self, message: str, *options: str) -> None:
        super().__init__(message)
        self.options: tuple[str, ...] = options


KINDS: dict[type, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "text",
    tuple: "a list",
}
"""The kinds an option's value may be, as the errors and ``ebmtrack trackers NAME`` name them."""


def kind_of(value) -> type | None:
    """The kind of a default value (a list is a tuple, as in the parameter dataclasses); None
    for a value of no kind (``None``)."""
    if isinstance(value, list):
        return tuple
    return next((kind for kind in KINDS if type(value) is kind), None)


def _fits(value, kind: type) -> bool:
    if kind is float:  # a number: an integer is one too
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_kind(name: str, value, kind: type | None) -> None:
    """Raise :class:`OptionError` (``KEY must be a number, got 'abc'``) where
    ``value`` is not of ``kind`` (one of :data:`KINDS`; None: any)."""
    if kind in KINDS and not _fits(value, kind):
        raise OptionError(f"{name} must be {KINDS[kind]}, got {value!r}", name)


@dataclass(frozen=True)
class Range:
    """The finite values a numeric option takes.

    Attributes:
        low, high: the bounds (None: none on that side).
        low_open, high_open: the bound itself is outside the range.
        integer: integers only.
        multiple: integers only, multiples of this (0: any).
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    multiple: int = 0

    def holds(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not math.isfinite(value) or (self.integer and not isinstance(value, int)):
            return False
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        if self.high is not None and not (
            value < self.high if self.high_open else value <= self.high
        ):
            return False
        return not self.multiple or value % self.multiple == 0

    def __str__(self) -> str:
        kind = (
            f"a multiple of {self.multiple}"
            if self.multiple
            else ("an integer" if self.integer else "a number")
        )
        if self.low is not None and self.high is not None:
            low, high = "(["[not self.low_open], ")]"[not self.high_open]
            bounds = f"in {low}{self.low:g}, {self.high:g}{high}"
            return bounds if kind == "a number" else f"{kind} {bounds}"
        if self.low is not None:
            return f"{kind} {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{kind} {'<' if self.high_open else '<='} {self.high:g}"
        return f"a finite {kind.removeprefix('a ').removeprefix('an ')}"


_POSITIVE = Range(0, low_open=True)
_NON_NEGATIVE = Range(0)
_COUNT = Range(1, integer=True)  # at least one
_STEPS = Range(0, integer=True)  # none or more
_FRACTION = Range(0, 1)
_ANY = Range()  # a finite number

RANGES: dict[str, Range] = {
    # search region and features
    "search_area_scale": _POSITIVE,
    "search_size": Range(64, integer=True, multiple=16),
    "score_upsample": _COUNT,
    # sample memory and online updates
    "train_skipping": _COUNT,
    "memory_size": _COUNT,
    "learning_rate": Range(0, 1, low_open=True, high_open=True),
    "hard_negative_learning_rate": Range(0, 1, low_open=True, high_open=True),
    "init_samples_minimum_weight": _FRACTION,
    # first-frame augmentation
    "aug_relative_shift": _NON_NEGATIVE,
    "aug_random_shift_factor": _NON_NEGATIVE,
    # localisation
    "target_not_found_threshold": _ANY,
    "distractor_threshold": _NON_NEGATIVE,  # a second peak / first peak ratio: above 1, never
    "hard_negative_threshold": _NON_NEGATIVE,
    "target_neighborhood_scale": _POSITIVE,
    "displacement_scale": _POSITIVE,
    # box estimation
    "size_update_rate": Range(0, 1, low_open=True),
    "num_random_proposals": _STEPS,
    "proposal_center_jitter": _NON_NEGATIVE,
    "proposal_size_jitter": _NON_NEGATIVE,
    "max_aspect_ratio": _POSITIVE,
    "min_target_size": _POSITIVE,
    "seed": _STEPS,
    # the classifiers (ATOM's, DiMP's)
    "projection_dim": _COUNT,
    "filter_size": _COUNT,
    "pelu_alpha": _POSITIVE,
    "filter_reg": _POSITIVE,
    "projection_reg": _POSITIVE,
    "sigma_factor": _POSITIVE,
    "init_gn_iters": _COUNT,
    "init_cg_iters": _COUNT,
    "update_cg_iters": _COUNT,
    "init_iters": _STEPS,
    "update_iters": _STEPS,
    "hard_negative_iters": _STEPS,
    # the box heads' climbs and the scale search
    "box_steps": _STEPS,
    "box_step_length": _POSITIVE,
    "ebm_step_length": _POSITIVE,
    "box_step_decay": Range(0, 1, low_open=True),
    "box_top_k": _COUNT,
    "box_accept_margin": _ANY,
    "scale_search_interval": _COUNT,
    # the siamese box estimator's decoding (NanoTrack's)
    "siamese_window": _FRACTION,
    "siamese_penalty": _NON_NEGATIVE,
    "siamese_size_rate": _FRACTION,
    "siamese_context": _NON_NEGATIVE,
    "classifier_weight": _NON_NEGATIVE,
    # the long-term mode
    "lost_after": _COUNT,
    "lost_crops": Range(2, integer=True),
    "tile_overlap": Range(0, 1, high_open=True),
    "redetect_threshold": _ANY,
    "redetect_near_threshold": _ANY,  # or None: the same threshold everywhere
    "lost_siamese_threshold": _FRACTION,  # 0: the siamese head's evidence unread
}
"""Every numeric option of our trackers -> the values it takes."""


def check_range(name: str, value) -> None:
    """Raise :class:`OptionError` (``KEY must be RANGE, got VALUE``) where
    option ``name`` has a range (:data:`RANGES`) and ``value`` is outside it; None passes (the
    options that may be None mean "unset" by it)."""
    allowed = RANGES.get(name)
    if allowed is not None and value is not None and not allowed.holds(value):
        raise OptionError(f"{name} must be {allowed}, got {value!r}", name)


def check_ranges(values: Mapping[str, object]) -> None:
    """:func:`check_range` of each ``name -> value``, in order: the first one outside its range
    is refused."""
    for name, value in values.items():
        check_range(name, value)
