"""Trackers built once per worker process (:mod:`ebmtrack.evaluation.tracker_cache`): a job
that takes the tracker an earlier job left writes the files a new tracker writes, byte for
byte, and the cache really serves it (no second build)."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import generated_sequences  # noqa: E402

from ebmtrack.cli.main import main  # noqa: E402
from ebmtrack.cli.track_many import track_one  # noqa: E402
from ebmtrack.data.datasets import load_otb  # noqa: E402
from ebmtrack.evaluation import tracker_cache  # noqa: E402
from ebmtrack.evaluation.distributed import stream_local  # noqa: E402
from ebmtrack.evaluation.jobs import Job, TrackerSpec, run_job, track_sequence  # noqa: E402
from ebmtrack.process import configure_threads  # noqa: E402
from ebmtrack.tracking.runtime import build_tracker  # noqa: E402

# atom: the default tracker, the torch-free runtime; csrt: an OpenCV peer; nanotrack-v3: ours;
# atom-lt: a torch tracker (SearchRegionTracker, the long-term mode), its boxes only (slower).
TRACKERS = ["atom", "csrt", "nanotrack-v3"]


@pytest.fixture
def fresh_cache():
    """No idle tracker before the test, none after it."""
    configure_threads(1)
    tracker_cache.clear()
    yield
    tracker_cache.clear()


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    root = generated_sequences(tmp_path_factory.mktemp("data"), count=2, frames=12)
    return {sequence.name: sequence for sequence in load_otb(root)}


def result_files(folder: Path) -> dict[str, bytes]:
    """The result files but the per-frame times (they vary from run to run)."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.endswith("_time.txt")
    }


def spec(name: str, **options) -> TrackerSpec:
    return TrackerSpec(name, functools.partial(build_tracker, name), options, tracker=name)


@pytest.mark.parametrize("name", TRACKERS)
def test_a_reused_tracker_writes_what_a_new_one_writes(tmp_path, sequences, fresh_cache, name):
    # The same job twice through the cache, another sequence between: the files of two new
    # trackers, byte for byte.
    first, other = sequences["Square0"], sequences["Square1"]
    job, between = Job(spec(name), 0, first), Job(spec(name), 0, other)
    run_job(job, tmp_path / "new1")
    run_job(between, tmp_path / "new2")
    run_job(job, tmp_path / "new3")
    before = tracker_cache.counts()
    run_job(job, tmp_path / "reused1", reuse=True)
    run_job(between, tmp_path / "reused2", reuse=True)
    run_job(job, tmp_path / "reused3", reuse=True)
    after = tracker_cache.counts()
    assert after["built"] - before["built"] == 1 and after["reused"] - before["reused"] == 2
    for index in (1, 2, 3):
        new, reused = (
            result_files(tmp_path / f"new{index}"),
            result_files(tmp_path / f"reused{index}"),
        )
        assert len(new) == 3 and reused == new, index  # boxes, confidences and statuses


@pytest.mark.parametrize("name", [*TRACKERS, "atom-lt"])
def test_a_reused_tracker_gives_exactly_the_new_boxes(sequences, fresh_cache, name):
    # Below the files' rounding: every box, score and confidence equal as floats.
    first, other = sequences["Square0"], sequences["Square1"]
    factory = functools.partial(build_tracker, name)

    def track(sequence, tracker):
        results = []
        boxes, _ = track_sequence(tracker, sequence, on_result=lambda i, r: results.append(r))
        scores = [(r.score, getattr(r, "confidence", np.nan)) for r in results]
        return boxes, np.asarray(scores, dtype=np.float64)

    expected = track(first, factory())
    assert np.ptp(expected[0][:, 0]) > 10  # it follows the square: a test that can fail
    with tracker_cache.lend(factory, {}) as make:
        tracker = make()
        assert track(first, tracker)[0] is not None
    with tracker_cache.lend(factory, {}) as make:
        assert make() is tracker
        track(other, tracker)
    with tracker_cache.lend(factory, {}) as make:
        assert make() is tracker
        got = track(first, tracker)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def test_track_many_reuses_its_tracker_and_writes_what_track_writes(
    tmp_path, fresh_cache, monkeypatch
):
    # track-many's route (track_one, in a worker): one build of atom for three videos, and each
    # file is what a lone ebmtrack track writes.
    import ebmtrack.lite.tracker as lite

    generated_sequences(tmp_path, count=2, frames=12)
    loads = []
    real_load = lite.load
    monkeypatch.setattr(lite, "load", lambda *a, **k: loads.append(1) or real_load(*a, **k))
    videos = [("Square0", "22,20,20,20"), ("Square1", "22,21,20,20"), ("Square0", "22,20,20,20")]
    for index, (name, box) in enumerate(videos):
        out = tmp_path / f"many{index}.txt"
        status, line = track_one(str(tmp_path / name / "img"), box, "atom", str(out))
        assert status == "done", line
    assert len(loads) == 1
    for index, (name, box) in enumerate(videos):
        alone = tmp_path / f"alone{index}.txt"
        argv = ["track", str(tmp_path / name / "img"), "--init", box, "--out", str(alone)]
        assert main([*argv, "--threads", "1", "--no-progress"]) == 0
        assert (tmp_path / f"many{index}.txt").read_bytes() == alone.read_bytes(), index
    assert len(loads) == 1 + len(videos)  # ebmtrack track itself builds its own each time


def _track_and_count(source: str, box: str, tracker: str, out: str):
    """A task: track_one, then this worker's process id and its cache's counts."""
    status, line = track_one(source, box, tracker, out)
    return status, line, os.getpid(), tracker_cache.counts()


def test_a_local_worker_builds_once_for_many_videos(tmp_path):
    # A real worker process (spawned, as --workers runs them) keeps its tracker between tasks.
    generated_sequences(tmp_path, count=2, frames=6)
    rows = [("Square0", "22,20,20,20"), ("Square1", "22,21,20,20"), ("Square0", "22,20,20,20")]
    tasks = [
        (index, (str(tmp_path / name / "img"), box, "atom", str(tmp_path / f"{index}.txt")))
        for index, (name, box) in enumerate(rows)
    ]
    ended = {}
    stream_local(_track_and_count, tasks, lambda key, value, error: ended.update({key: value}))
    assert all(value[0] == "done" for value in ended.values()), ended
    assert len({value[2] for value in ended.values()}) == 1  # one worker ran all three
    assert ended[2][3] == {"built": 1, "reused": 2}
    assert (tmp_path / "0.txt").read_bytes() == (tmp_path / "2.txt").read_bytes()


def test_the_key_tells_trackers_apart_and_the_cache_stays_small(fresh_cache):
    atom = functools.partial(build_tracker, "atom")
    kcf = functools.partial(build_tracker, "kcf")
    with tracker_cache.lend(atom, {}) as make:
        tracker = make()
    with tracker_cache.lend(atom, {"seed": 1}) as make:
        assert make() is not tracker  # another seed: another tracker
    with tracker_cache.lend(atom, {}) as make:
        assert make() is tracker
        assert make() is not tracker  # a second target of the block: its own
    configure_threads(2)
    try:
        with tracker_cache.lend(atom, {}) as make:
            assert make() is not tracker  # other threads: its sessions differ
    finally:
        configure_threads(1)
    assert len(tracker_cache._idle) == tracker_cache.MAX_IDLE  # seed 1's was dropped
    with tracker_cache.lend(kcf, {}) as make:
        make()
    with tracker_cache.lend(atom, {}) as make:
        assert make() is not tracker  # the least recently used was dropped for kcf


def test_what_is_not_kept(tmp_path, fresh_cache):
    # A block that raises gives nothing back; a tracker outside REUSABLE and a factory with no
    # key (a lambda) are built every time; a file option is keyed by its contents' stamp too.
    atom = functools.partial(build_tracker, "atom")
    with pytest.raises(RuntimeError), tracker_cache.lend(atom, {}) as make:
        tracker = make()
        raise RuntimeError("a bad frame")
    with tracker_cache.lend(atom, {}) as make:
        assert make() is not tracker
    multi = functools.partial(__import__("ebmtrack").load_multi_tracker, "kcf")
    for factory in (multi, lambda: build_tracker("kcf")):
        with tracker_cache.lend(factory, {}) as make:
            first = make()
        with tracker_cache.lend(factory, {}) as make:
            assert make() is not first
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"1")
    key = tracker_cache.tracker_key(atom, {"weights": weights})
    assert key == tracker_cache.tracker_key(atom, {"weights": str(weights)})
    os.utime(weights, ns=(0, 0))
    assert tracker_cache.tracker_key(atom, {"weights": weights}) != key
