"""The package's layer contract: every module imports on its own, and imports point one way.

Layers, each allowed to import only the ones below it (docs/architecture.md)::

    cli
    regression1d                     (the 1-D study of `ebmtrack regress1d`)
    evaluation, training, export
    api                              (ebmtrack.load_tracker)
    tracking, data
    models
    ops, optim, ebm, process, values, files, weights, exports
    lite                             (the torch-free runtime: imports no other ebmtrack package)

Inside ``tracking``, the shared modules import neither ``atom`` nor ``dimp``, and those two do not
import each other. Imports inside functions count too: a lazy import is still a dependency. No
module depends on itself through others (:func:`test_no_import_circle`), counting imports inside
functions and ``"module:attribute"`` references (the registry's lazy factories) too.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import ebmtrack

PACKAGE = Path(ebmtrack.__file__).resolve().parent

RANKS = {
    "lite": -1,
    "ops": 0,
    "optim": 0,
    "ebm": 0,
    "process": 0,
    "files": 0,
    "values": 0,
    "weights": 0,
    "exports": 0,
    "models": 1,
    "tracking": 2,
    "data": 2,
    "api": 3,
    "evaluation": 4,
    "training": 4,
    "export": 4,
    "regression1d": 5,
    "cli": 6,
}
TRACKERS = ("atom", "dimp")  # the subpackages of tracking that hold one tracker each


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("ebmtrack", *path.relative_to(PACKAGE).with_suffix("").parts)
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def imported_modules(name: str) -> set[str]:
    """The ebmtrack modules (or packages) that module ``name`` imports, anywhere in its code."""
    path = PACKAGE.joinpath(*name.split(".")[1:])
    is_package = path.is_dir()
    path = path / "__init__.py" if is_package else path.with_suffix(".py")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            # ``from ebmtrack import weights``: the imported name may be a module itself.
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {m for m in found if m.startswith("ebmtrack.")}


def dependencies(name: str) -> set[str]:
    """The ebmtrack modules that module ``name`` depends on: every import in its code (inside
    functions and ``TYPE_CHECKING`` blocks too), a name imported from a package counted as the
    package (or as its submodule where it is one), and every ``"ebmtrack.x.y:attribute"``
    string (a reference imported when used)."""
    modules = set(module_names())
    found = {m for m in imported_modules(name) if m in modules}
    path = PACKAGE.joinpath(*name.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            module, colon, attr = node.value.partition(":")
            if colon and attr.isidentifier() and module in modules:
                found.add(module)
    found.discard(name)
    return found


def import_circles() -> list[list[str]]:
    """Every strongly connected group of two or more modules of :func:`dependencies` (Tarjan)."""
    graph = {name: dependencies(name) for name in module_names()}
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_import_circle():
    circles = import_circles()
    assert not circles, "modules that import each other:\n" + "\n".join(map(str, circles))


def test_no_module_is_over_500_lines():
    long = {
        str(path.relative_to(PACKAGE)): count
        for path in sorted(PACKAGE.rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not long, f"modules over 500 lines (split them by concern): {long}"


def test_the_circle_check_finds_a_circle(monkeypatch):
    # A module that imported its importer would be found: the check reads the real graph.
    real = dependencies

    def with_circle(name):
        found = real(name)
        if name == "ebmtrack.ops.boxes":
            found.add("ebmtrack.tracking.base")
        if name == "ebmtrack.tracking.base":
            found.add("ebmtrack.ops.boxes")
        return found

    monkeypatch.setitem(globals(), "dependencies", with_circle)
    assert ["ebmtrack.ops.boxes", "ebmtrack.tracking.base"] in import_circles()


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANKS else None


def _tracker(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "tracking":
        return parts[2] if parts[2] in TRACKERS else ""
    return None


def test_every_module_has_a_layer():
    unplaced = [m for m in module_names() if m != "ebmtrack" and _layer(m) is None]
    assert not unplaced, f"modules outside every layer (add them to RANKS): {unplaced}"


def test_imports_point_down_the_layers():
    wrong = []
    for name in module_names():
        source = _layer(name)
        if source is None:  # the package root: lazy attributes only
            continue
        for target in imported_modules(name):
            layer = _layer(target)
            if layer is None or layer == source:
                continue
            if RANKS[layer] >= RANKS[source]:
                wrong.append(f"{name} imports {target}")
    assert not wrong, "imports against the layer order:\n" + "\n".join(sorted(wrong))


def test_trackers_hold_only_their_own_code():
    wrong = []
    for name in module_names():
        own = _tracker(name)
        if own is None:
            continue
        for target in imported_modules(name):
            other = _tracker(target)
            if other and other != own:
                wrong.append(f"{name} imports {target}")
    assert not wrong, "shared tracking code depends on one tracker:\n" + "\n".join(wrong)


def test_the_contract_sees_imports():
    # The checks above would pass on an empty import list: make sure they read real ones.
    assert "ebmtrack.tracking.search_region" in imported_modules("ebmtrack.tracking.atom.tracker")
    assert "ebmtrack.weights" in imported_modules("ebmtrack.tracking.dimp.factory")
    assert _layer("ebmtrack.cli.main") == "cli" and _tracker("ebmtrack.tracking.memory") == ""


_IMPORT_EACH = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "ebmtrack" or m.startswith("ebmtrack.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as error:
        failed.append(f"{name}: {type(error).__name__}: {error}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_interpreter():
    # Each module is imported with no ebmtrack module loaded before it (third-party packages stay
    # loaded: starting a new interpreter per module would take minutes), which finds the import
    # cycles that the test session's own import order hides.
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH, *module_names()],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
