"""One registry of trackers by name, ours and OpenCV's, so that tools can create any of them.

Factories must be picklable (module-level functions, classes or ``functools.partial`` of them):
the evaluation runner sends them to worker processes. Trackers whose modules are slow to import
(torch) are listed in :data:`LAZY_TRACKERS` and imported on first use.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable

from ebmtrack.tracking.base import Tracker
from ebmtrack.tracking.opencv import OPENCV_TRACKERS, OpenCVTracker

TrackerFactory = Callable[..., Tracker]

TRACKERS: dict[str, TrackerFactory] = {
    kind: functools.partial(OpenCVTracker, kind) for kind in OPENCV_TRACKERS
}

# name -> "module:factory", imported when the name is first asked for. A module may instead
# register itself with register_tracker() when imported; either way works.
LAZY_TRACKERS: dict[str, str] = {
    "atom": "ebmtrack.tracking.atom.factory:create_atom_tracker",
    "dimp-nce+": "ebmtrack.tracking.dimp.factory:create_dimp_tracker",
}


def register_tracker(name: str, factory: TrackerFactory, replace: bool = False) -> None:
    """Make ``factory(**options)`` available as tracker ``name``.

    Raises ValueError if ``name`` is taken (unless ``replace``) or is not made of lower-case
    letters, digits, ``-``, ``_`` and ``+`` (names appear in file paths and comma-separated
    command-line lists).
    """
    plain = name.replace("_", "").replace("-", "").replace("+", "")
    if not plain or not plain.isalnum() or name != name.lower():
        raise ValueError(
            f"tracker name must be lower-case letters, digits, -, _ or +, got {name!r}"
        )
    if name in TRACKERS and not replace:
        raise ValueError(f"tracker {name!r} is already registered")
    TRACKERS[name] = factory


def get_factory(name: str) -> TrackerFactory:
    """The factory registered as ``name``; ValueError listing the valid names otherwise."""
    if name not in TRACKERS and name in LAZY_TRACKERS:
        module_name, _, attr = LAZY_TRACKERS[name].partition(":")
        module = importlib.import_module(module_name)
        if name not in TRACKERS:  # the module did not register itself
            TRACKERS[name] = getattr(module, attr)
    try:
        return TRACKERS[name]
    except KeyError:
        valid = ", ".join(sorted(set(TRACKERS) | set(LAZY_TRACKERS)))
        raise ValueError(f"unknown tracker {name!r}; valid trackers: {valid}") from None


def accepted_options(name: str) -> set[str]:
    """Keyword options the factory of ``name`` accepts (empty if it takes ``**kwargs`` only)."""
    signature = inspect.signature(get_factory(name))
    return {
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


def check_options(name: str, options: dict) -> None:
    """Raise ValueError if the factory of ``name`` cannot take one of ``options``."""
    parameters = inspect.signature(get_factory(name)).parameters.values()
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        return
    unknown = sorted(set(options) - accepted_options(name))
    if unknown:
        raise ValueError(
            f"tracker {name!r} has no option(s) {unknown}; valid: {sorted(accepted_options(name))}"
        )


def create_tracker(name: str, **options) -> Tracker:
    """A new tracker ``name`` built with ``options``; ValueError for an unknown name or option."""
    check_options(name, options)
    return get_factory(name)(**options)
