"""Running ebmtrack as in an install that lacks some modules: a child Python whose every import
of a blocked module fails as where it is not installed (ModuleNotFoundError naming it), with
ebmtrack from this checkout. ``run_command`` is ``ebmtrack ARGS`` in the default install (no
ebmtrack[train]); ``blocked=`` names others (``cv2``: an install without OpenCV)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# What ebmtrack[train] adds to the default install (pyproject.toml).
TRAIN_MODULES = ("torch", "torchvision", "onnx", "scipy", "safetensors", "skimage")
EXTRA = "pip install 'ebmtrack[train]'"


def blocker(modules) -> str:
    """Code that, run first, makes every import of ``modules`` (and of their submodules) fail."""
    return textwrap.dedent(
        f"""
        import importlib.abc, sys

        BLOCKED = {set(modules)!r}

        class Blocker(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, Blocker())
        """
    )


def run_python(code: str, blocked=TRAIN_MODULES, timeout: float = 300):
    """``python -c CODE`` with ``blocked`` missing."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", blocker(blocked) + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def run_command(args, blocked=TRAIN_MODULES, timeout: float = 300):
    """``ebmtrack ARGS`` with ``blocked`` missing (default: the default install)."""
    code = "from ebmtrack.cli.main import console_main\n"
    code += f"sys.exit(console_main({[str(a) for a in args]!r}))\n"
    return run_python(code, blocked, timeout)


def one_error_line(done, command: str) -> str:
    """The single stderr line of a refused command: exit status 2, no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in done.stderr, lines
    prefix = f"ebmtrack {command}: error: " if command else "ebmtrack: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]
