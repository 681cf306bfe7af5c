"""Trackers built once per worker process, not once per job.

A worker runs one job after another: ``eval``'s worker processes, ``track-many``'s, and a Ray
worker, which Ray keeps for the next task of the same function. Building a tracker (its ONNX
Runtime sessions, its weights) costs more than a short video's tracking, so a worker keeps the
tracker a job leaves and gives it to the next job whose tracker would be the same
(:func:`lend`).

**The key** is everything that decides the tracker: its factory (for ``build_tracker`` and a
name: the function and the name), its options, normalised (a file given as an option counted
with its size and modification time, so that a rewritten file is read again), and the threads of
the process (:func:`ebmtrack.process.configured_threads`, and torch's where torch is imported),
which the sessions take when built. At most :data:`MAX_IDLE` trackers wait per process, the least
recently used dropped, so that a worker's memory stays that of the trackers it runs.

**Lent, then reset.** A job holds its tracker alone (a second target of the same video gets
another), and hands it back when it ends without an exception; after one the next job builds
anew. A reused tracker gives the boxes a new one gives because its ``initialize`` resets all of
its state; the classes of :data:`REUSABLE` were checked for that:

- ``LiteTracker`` (the runtime, :mod:`ebmtrack.lite.tracker`): ``initialize`` makes a new
  target state and seeds its generators from the ``seed`` option; its confidence estimator is
  reset; the sessions and the head hold no state of a target.
- The torch trackers (``AtomTracker``, ``AtomLTTracker``, ``DiMPTracker``:
  :class:`~ebmtrack.tracking.composition.SearchRegionTracker`): ``start`` makes each target's
  state (classifier, sample memory, box, confidence, long-term state), its generators seeded
  there; the parts hold settings, networks and buffers that each frame overwrites.
- ``OpenCVTracker``: ``initialize`` creates a new OpenCV tracker (so reuse saves little, and
  MIL's, TLD's and Boosting's own generators stay as they are without it).
- ``NanoTrackTracker``: ``initialize`` sets its template, centre and size; the networks are
  shared already.

Any other tracker (a :class:`~ebmtrack.tracking.multi.MultiTargetTracker`, whose ``initialize``
makes trackers for extra targets; a tracker registered outside the package, whose reset nothing
vouches for) is built for every job, as is one whose factory or options have no key (a lambda).
"""

from __future__ import annotations

import functools
import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ebmtrack.tracking.base import Tracker

__all__ = [
    "MAX_IDLE",
    "REUSABLE",
    "clear",
    "counts",
    "lend",
    "lent_multi_tracker",
    "tracker_key",
]

MAX_IDLE = 2  # trackers kept per process; a worker seldom runs more than two kinds

REUSABLE = frozenset(  # "module:class" of the trackers whose initialize resets all their state
    {
        "ebmtrack.lite.tracker:LiteTracker",
        "ebmtrack.tracking.atom.tracker:AtomTracker",
        "ebmtrack.tracking.atom.longterm:AtomLTTracker",
        "ebmtrack.tracking.dimp.tracker:DiMPTracker",
        "ebmtrack.tracking.opencv:OpenCVTracker",
        "ebmtrack.tracking.nanotrack:NanoTrackTracker",
    }
)

_idle: OrderedDict[tuple, Tracker] = OrderedDict()
_counts = {"built": 0, "reused": 0}


class _NoKey(Exception):
    """A factory or option value with no key: the tracker is built per job."""


def counts() -> dict[str, int]:
    """Trackers this process built through :func:`lend`, and reused, so far."""
    return dict(_counts)


def clear() -> None:
    """Drop this process's idle trackers."""
    _idle.clear()


def _file_key(path: str) -> tuple:
    stat = os.stat(path)
    return ("file", os.path.realpath(path), stat.st_size, stat.st_mtime_ns)


def _freeze(value) -> object:
    """``value`` as a hashable key; files (a path given as ``Path`` or text) with their size and
    modification time, folders by their real path."""
    if isinstance(value, (os.PathLike, str)):
        text = os.fspath(value)
        if isinstance(text, str) and text and os.path.isfile(text):
            return _file_key(text)
        if isinstance(value, os.PathLike):
            return ("path", os.path.realpath(text))
        return value
    if value is None or isinstance(value, (bool, int, float, bytes)):
        return (type(value).__name__, repr(value))  # 1, 1.0 and True apart; NaN equal to NaN
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    raise _NoKey(type(value).__name__)


def _factory_key(factory) -> object:
    if isinstance(factory, functools.partial):
        return (_factory_key(factory.func), _freeze(factory.args), _freeze(factory.keywords))
    module = getattr(factory, "__module__", None)
    name = getattr(factory, "__qualname__", None)
    if not (module and name) or "<" in name:  # a lambda, a local function
        raise _NoKey(repr(factory))
    return f"{module}:{name}"


def _threads() -> tuple:
    from ebmtrack.process import configured_threads

    torch = sys.modules.get("torch")
    return (configured_threads(), torch.get_num_threads() if torch is not None else None)


def tracker_key(factory: Callable[..., Tracker], options: dict) -> tuple | None:
    """The key of ``factory(**options)`` in this process now (module docstring); None where
    there is none."""
    try:
        return (_factory_key(factory), _freeze(options), _threads())
    except (_NoKey, OSError):
        return None


def _reusable(tracker: Tracker) -> bool:
    kind = type(tracker)
    return f"{kind.__module__}:{kind.__qualname__}" in REUSABLE


@contextmanager
def lend(factory: Callable[..., Tracker], options: dict) -> Iterator[Callable[[], Tracker]]:
    """``make()``, which gives ``factory(**options)``: its first call takes the idle tracker of
    the same key where this process has one (a tracker of :data:`REUSABLE` a job before left),
    each other call builds one. What ``make`` gave goes back to the idle trackers when the
    block ends without an exception; the caller initializes each tracker it uses."""
    key = tracker_key(factory, options)
    given: list[Tracker] = []

    def make() -> Tracker:
        tracker = _idle.pop(key, None) if key is not None and not given else None
        if tracker is None:
            tracker = factory(**options)
            _counts["built"] += 1
        else:
            _counts["reused"] += 1
        given.append(tracker)
        return tracker

    yield make
    if key is not None and given and _reusable(given[0]):
        _idle[key] = given[0]
        _idle.move_to_end(key)
        while len(_idle) > MAX_IDLE:
            _idle.popitem(last=False)


@contextmanager
def lent_multi_tracker(
    name: str, threads: int | None = None, runtime: str | None = None, **options
) -> Iterator[Tracker]:
    """:func:`ebmtrack.load_multi_tracker` with its first tracker lent (:func:`lend`): the
    route of ``track-many``'s workers, which run ``ebmtrack track`` one video after another."""
    from ebmtrack.process import configure_threads
    from ebmtrack.tracking.multi import MultiTargetTracker
    from ebmtrack.tracking.runtime import build_tracker

    threads = configure_threads(threads)
    build = functools.partial(build_tracker, name)
    with lend(build, {**options, "runtime": runtime, "threads": threads}) as make:
        yield MultiTargetTracker(make)
