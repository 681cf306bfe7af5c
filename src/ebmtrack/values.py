"""Command-line values: one reader for ``--option KEY=VALUE`` (trackers) and ``--set KEY=VALUE``
(training configs), so that a value means the same in every command; and :class:`OptionError`,
the error of a named option, whatever route it came by (defined with the options' one check,
:mod:`ebmtrack.lite.option_checks`)."""

from __future__ import annotations

import re
from typing import Any

from ebmtrack.lite.option_checks import OptionError  # the runtime's too: it imports no other layer

__all__ = ["OptionError", "parse_value"]


# What PyYAML (YAML 1.1) leaves as a string but a user means as a number: 1e-3, 5E+2, .5e1.
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def _numbers(value: Any) -> Any:
    if isinstance(value, str) and _FLOAT.fullmatch(value.strip()):
        return float(value)
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    return value


def parse_value(raw: str) -> Any:
    """A command-line value read as YAML (numbers, true/false, null, lists, strings), with
    exponent numbers such as ``1e-3``, which YAML 1.1 reads as strings, read as floats (also
    inside lists). ``""`` is the empty string. Raises ValueError for text that is not YAML."""
    import yaml

    if raw == "":
        return ""
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ValueError(f"{raw!r} is not a valid value (read as YAML)") from None
    return _numbers(value)
