"""``--option KEY=VALUE``: a tracker option from the command line, the same for every command."""

from __future__ import annotations

from ebmtrack.cli.main import CLIError
from ebmtrack.values import parse_value

OPTION_HELP = "VALUE read as YAML: numbers, true/false, lists, strings; repeatable"


def parse_option(item: str, form: str = "KEY=VALUE") -> tuple[str, object]:
    """``"key=value"`` -> ``("key", value)`` with ``value`` read by
    :func:`ebmtrack.values.parse_value` (as ``--set`` of ``ebmtrack train``; lists become
    tuples, as in the parameter dataclasses); CLIError otherwise."""
    key, eq, value = item.partition("=")
    if not (eq and key.strip()):
        raise CLIError(f"--option must look like {form}, got {item!r}")
    try:
        parsed = parse_value(value)
    except ValueError:
        raise CLIError(f"--option {item!r}: the value is not valid YAML") from None
    if isinstance(parsed, list):  # tuples in the parameter dataclasses
        parsed = tuple(tuple(v) if isinstance(v, list) else v for v in parsed)
    return key.strip(), parsed


def add_option(options: dict, key: str, value: object, origin: str) -> None:
    """Set ``options[key]``, refusing a second value for the same key."""
    if key in options:
        raise CLIError(f"{origin}: option {key!r} is given twice")
    options[key] = value
