"""Exports shared by the lite runtime's tests (made once per session: each takes seconds)."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def atom_export(tmp_path_factory) -> Path:
    from ebmtrack.export import export_tracker

    return export_tracker("atom", tmp_path_factory.mktemp("exports") / "atom")


@pytest.fixture(scope="session")
def polished_export(tmp_path_factory) -> Path:
    from ebmtrack.export import export_tracker

    # float32: where the CPU has bfloat16, "auto" runs the eager backbone of a head in bfloat16.
    out = tmp_path_factory.mktemp("exports") / "atom-polished"
    return export_tracker("atom-polished", out, precision="float32")
