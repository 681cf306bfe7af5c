"""Every script of benchmarks/, scripts/ and studies/ imports against today's package: a name the
package renamed or moved fails here, not when someone runs the script (nothing runs: the scripts
start only under ``__main__``)."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for d in ("benchmarks", "scripts", "studies") for p in (ROOT / d).glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_imports(path, monkeypatch):
    monkeypatch.syspath_prepend(str(path.parent))  # the scripts import their neighbours
    spec = importlib.util.spec_from_file_location(f"_script_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
