"""The prefetching reader: order, errors, early exits, and no thread left behind."""

import _thread
import gc
import signal
import threading
import time

import cv2
import numpy as np
import pytest

from ebmtrack.data.io import list_images, read_image
from ebmtrack.data.prefetch import Prefetcher, prefetch


def readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ebmtrack-prefetch")]


@pytest.fixture(autouse=True)
def no_reader_left_behind():
    assert readers() == []
    yield
    deadline = time.monotonic() + 2.0
    while readers() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert readers() == []


class Source:
    """A generator-like source that counts what it produced and whether it was closed."""

    def __init__(self, count: int, fail_at: int | None = None, delay: float = 0.0) -> None:
        self.count, self.fail_at, self.delay = count, fail_at, delay
        self.produced, self.closed = 0, False

    def __iter__(self):
        return self

    def __next__(self):
        if self.produced == self.fail_at:
            raise ValueError(f"cannot decode image: frame {self.produced}")
        if self.produced == self.count:
            raise StopIteration
        time.sleep(self.delay)
        self.produced += 1
        return self.produced - 1

    def close(self) -> None:
        self.closed = True


def test_the_frames_of_a_folder_come_in_order_and_unchanged(tmp_path):
    rng = np.random.default_rng(0)
    for index in range(12):
        image = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
        cv2.imwrite(str(tmp_path / f"{index:04d}.png"), image)
    paths = list_images(tmp_path)
    direct = [read_image(p) for p in paths]
    with Prefetcher((read_image(p) for p in paths), depth=3) as frames:
        fetched = list(frames)
    assert len(fetched) == 12
    for a, b in zip(direct, fetched, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_reader_stays_at_most_depth_items_ahead():
    source = Source(100)
    frames = Prefetcher(source, depth=3)
    assert next(frames) == 0
    time.sleep(0.2)
    assert source.produced <= 1 + 3 + 1  # taken, queued, and one waiting to be queued
    frames.close()
    assert not frames.alive and source.closed


def test_an_error_in_the_reader_is_raised_in_the_consumer_after_the_frames_before_it():
    source = Source(10, fail_at=4)
    frames = Prefetcher(source, depth=2)
    got = []
    with pytest.raises(ValueError, match="cannot decode image: frame 4"):
        for frame in frames:
            got.append(frame)
    assert got == [0, 1, 2, 3]
    assert not frames.alive and source.closed
    with pytest.raises(StopIteration):
        next(frames)


def test_leaving_the_loop_early_stops_the_reader_and_closes_the_source():
    source = Source(1000)
    with Prefetcher(source, depth=4) as frames:
        for frame in frames:
            if frame == 5:
                break
    assert source.closed and source.produced < 20


def test_an_abandoned_generator_stops_its_reader():
    source = Source(1000)
    frames = prefetch(source, depth=2)
    assert next(frames) == 0
    assert len(readers()) == 1
    del frames
    gc.collect()
    deadline = time.monotonic() + 2.0
    while not source.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert source.closed


def test_ctrl_c_while_waiting_for_a_frame_leaves_no_thread():
    source = Source(1000, delay=0.05)  # a slow reader: the consumer waits in next()
    timer = threading.Timer(0.12, _thread.interrupt_main)  # Ctrl-C, as the terminal sends it
    got = []
    # Python's own handler, even where the test process started with SIGINT ignored (as a
    # background job of a non-interactive shell does): interrupt_main does nothing then.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for frame in prefetch(source, depth=2):
                got.append(frame)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert 0 < len(got) < 10
    assert source.closed


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="depth"):
        Prefetcher([], depth=0)
