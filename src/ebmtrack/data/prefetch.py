"""Reading frames ahead in a background thread, so that decoding overlaps tracking.

Decoding a frame (JPEG, video) releases Python's lock while OpenCV works, so on a machine with a
spare core a reader thread decodes the next frames while the tracker works on this one. The
reader holds at most ``depth`` frames (a bounded queue: memory stays ``depth`` frames however
fast it reads), gives them in order, and any error it meets is raised in the consumer, at the
frame where it happened. Any iterator serves: a list of files, a video, a live camera.

    with Prefetcher(read_image(p) for p in paths) as frames:
        for frame in frames:
            ...

:func:`prefetch` is the same as a generator, for code that only iterates.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["Prefetcher", "prefetch"]

T = TypeVar("T")

_END = object()  # the reader's last item: the source is exhausted
_POLL_S = 0.05  # how often a reader waiting on a full queue looks whether it should stop


class _Failure:
    """What the reader hands over in place of an item when the source raised."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _read(iterator: Iterator, items: queue.Queue, stop: threading.Event) -> None:
    """The reader thread: ``iterator``'s items into ``items``, then the end or the error."""
    try:
        for item in iterator:
            if not _put(items, item, stop) or stop.is_set():
                return
        _put(items, _END, stop)
    except BaseException as error:  # noqa: BLE001 - handed to the consumer, which raises it
        _put(items, _Failure(error), stop)
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - the consumer has stopped listening
                pass


def _put(items: queue.Queue, item, stop: threading.Event) -> bool:
    """Queue ``item``, waiting while the queue is full; False once ``stop`` is set."""
    while not stop.is_set():
        try:
            items.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


class Prefetcher(Generic[T]):
    """An iterator over ``source``'s items, read ahead by a daemon thread.

    Args:
        source: any iterable; it is iterated in the reader thread only.
        depth: how many items the reader may hold ahead of the consumer (>= 1).
        name: the reader thread's name.

    The items come in ``source``'s order. An exception raised by ``source`` is raised by
    ``next()`` after the items before it, and ends the iteration. :meth:`close` (also called by
    ``with``, at the end, and on an error) stops the reader and waits for it: the reader then
    closes ``source`` when it has a ``close`` method (a generator's ``finally`` runs, a video
    capture inside it is released), in its own thread. A reader blocked inside ``source`` (a
    camera waiting for its next frame) stops when that call returns.
    """

    def __init__(self, source: Iterable[T], depth: int = 4, name: str = "ebmtrack-prefetch"):
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive integer, got {depth!r}")
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        # The reader holds no reference to this object, so that an abandoned one is collected
        # (and its reader told to stop, in __del__).
        self._thread = threading.Thread(
            target=_read, args=(iter(source), self._queue, self._stop), name=name, daemon=True
        )
        self._thread.start()

    def __iter__(self) -> Prefetcher[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        item = self._queue.get()
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.error
        return item

    def close(self, timeout: float | None = None) -> None:
        """Stop the reader, drop what it read ahead, and wait for it (up to ``timeout`` s;
        None: until it stops). Safe to call more than once."""
        self._done = True
        self._stop.set()
        while True:  # unblock a reader waiting on a full queue at once
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Whether the reader thread still runs."""
        return self._thread.is_alive()

    def __enter__(self) -> Prefetcher[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            self._stop.set()  # no join here: the garbage collector may run in any thread


def prefetch(source: Iterable[T], depth: int = 4) -> Iterator[T]:
    """:class:`Prefetcher` as a generator: ``for frame in prefetch(frames)``. Its reader stops
    when the generator ends, is closed, or is garbage collected (a loop left by ``break`` or an
    exception, once nothing refers to the generator)."""
    prefetcher = Prefetcher(source, depth)
    try:
        yield from prefetcher
    finally:
        prefetcher.close()
