"""The one check of a tracker option's value: every numeric option has its range in one table,
and both runtimes (the torch trackers' parameter dataclasses, the torch-free runtime's options)
refuse a value outside it with the same line."""

import dataclasses
import math
import typing

import pytest

from ebmtrack.exports import SHIPPED_EXPORTS
from ebmtrack.lite.option_checks import RANGES, Range
from ebmtrack.lite.params import FIXED, merge_options
from ebmtrack.tracking.registry import TrackerVariant, get_factory, tracker_names
from ebmtrack.tracking.runtime import shipped_lite_export
from ebmtrack.values import OptionError


def _numeric_fields(params_type) -> list[str]:
    hints = typing.get_type_hints(params_type)
    numbers = (int, float, int | None, float | None)
    return [f.name for f in dataclasses.fields(params_type) if hints[f.name] in numbers]


def _outside(allowed: Range):
    """A value just outside ``allowed``."""
    if allowed.low is not None:
        return allowed.low - 1
    if allowed.high is not None:
        return allowed.high + 1
    return math.inf


@pytest.mark.parametrize("name", tracker_names())
def test_every_numeric_option_of_every_tracker_has_its_range(name):
    factory = get_factory(name)
    if not (isinstance(factory, TrackerVariant) and factory.params_type):
        return  # OpenCV's: no numeric options
    missing = [field for field in _numeric_fields(factory.parameters) if field not in RANGES]
    assert not missing, f"{name}: numeric options without a range: {missing}"


@pytest.mark.parametrize("name", SHIPPED_EXPORTS)
def test_every_numeric_parameter_of_a_shipped_export_has_its_range(name):
    params = shipped_lite_export(name).params
    numeric = [
        key
        for key, value in params.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]
    assert numeric and not [key for key in numeric if key not in RANGES]


@pytest.mark.parametrize(
    "option",
    sorted(key for key in shipped_lite_export("atom").params if key in RANGES and key not in FIXED),
)
def test_both_runtimes_refuse_a_value_out_of_range_with_the_same_line(option):
    from ebmtrack.tracking.atom.params import AtomParams

    bad = _outside(RANGES[option])
    with pytest.raises(OptionError) as torch_side:
        AtomParams(**{option: bad})
    with pytest.raises(OptionError) as lite_side:
        merge_options(shipped_lite_export("atom"), {option: bad})
    line = f"{option} must be {RANGES[option]}, got {bad!r}"
    assert str(torch_side.value) == str(lite_side.value) == line
    assert torch_side.value.options == lite_side.value.options == (option,)


def test_size_update_rate_out_of_range_is_refused_by_both_runtimes():
    from ebmtrack.tracking.atom.params import AtomParams

    line = "size_update_rate must be in (0, 1], got -3"
    with pytest.raises(OptionError, match=line.replace("(", r"\(").replace("]", r"\]")):
        AtomParams(size_update_rate=-3)
    with pytest.raises(OptionError, match=r"size_update_rate must be in \(0, 1\], got -3"):
        merge_options(shipped_lite_export("atom"), {"size_update_rate": -3})


@pytest.mark.parametrize(
    ("allowed", "text", "inside", "outside"),
    [
        (Range(0, 1, low_open=True), "in (0, 1]", [1, 0.5], [0, 1.5, math.nan, True]),
        (Range(0, 1, low_open=True, high_open=True), "in (0, 1)", [0.01], [0, 1]),
        (Range(1, integer=True), "an integer >= 1", [1, 7], [0, 1.0, -3]),
        (Range(0, low_open=True), "a number > 0", [1e-9, 4], [0, -1, math.inf]),
        (Range(64, integer=True, multiple=16), "a multiple of 16 >= 64", [64, 288], [48, 100]),
        (Range(), "a finite number", [-1e9, 0.0], [math.inf, math.nan, "x"]),
    ],
)
def test_a_range_says_what_it_takes(allowed, text, inside, outside):
    assert str(allowed) == text
    assert all(allowed.holds(value) for value in inside)
    assert not any(allowed.holds(value) for value in outside)
