"""One reader of command-line values for ``--option`` (tracker) and ``--set`` (training)."""

import pytest

from ebmtrack.cli.main import CLIError
from ebmtrack.cli.options import parse_option
from ebmtrack.training.config import apply_overrides
from ebmtrack.values import parse_value


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1e-3", 1e-3),  # YAML 1.1 reads this as a string
        ("5E+2", 500.0),
        ("-.5e1", -5.0),
        ("0.01", 0.01),
        ("3", 3),
        ("true", True),
        ("null", None),
        ("[1e-3, 2, x]", [1e-3, 2, "x"]),
        ("mobilenetv2", "mobilenetv2"),
        ("1e-3x", "1e-3x"),
        ("", ""),
    ],
)
def test_values_are_read_alike_everywhere(raw, value):
    assert parse_value(raw) == value
    assert parse_option(f"key={raw}")[1] == (tuple(value) if isinstance(value, list) else value)
    assert apply_overrides({"a": {"key": 0}}, [f"a.key={raw}"])["a"]["key"] == value


def test_bad_yaml_is_one_error_naming_the_flag():
    with pytest.raises(ValueError, match="not a valid value"):
        parse_value("[1, 2")
    with pytest.raises(CLIError, match="--option 'key=\\[1, 2': the value is not valid YAML"):
        parse_option("key=[1, 2")
