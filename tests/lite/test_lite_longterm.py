"""The long-term mode's decisions in the torch-free runtime (:mod:`ebmtrack.lite.longterm`): one
definition for both runtimes."""

import importlib


def test_the_torch_mode_reads_the_runtimes_decisions():
    """tracking.longterm names lite.longterm's pieces, not copies of them (the refactor that
    moved them left atom-lt's boxes bit-identical)."""
    lite = importlib.import_module("ebmtrack.lite.longterm")
    torch_side = importlib.import_module("ebmtrack.tracking.longterm")
    for name in lite.__all__:
        assert getattr(torch_side, name) is getattr(lite, name), name
