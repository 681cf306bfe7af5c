import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "ebmtrack.tracking.params",
        "ebmtrack.tracking.dimp.tracker",
        "ebmtrack.tracking.dimp.factory",
        "ebmtrack.tracking.atom.params",
    ],
)
def test_module_imports_first_in_a_fresh_interpreter(module):
    # Catches import cycles that the test session's import order would hide.
    result = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
