"""Result files survive a stop (SIGTERM, as the evaluation's parent sends its workers) that
lands in the middle of writing them: the file is complete and no temporary file is left. What a
writer killed outright (SIGKILL) leaves is removed for its own sequence only."""

import signal
import tempfile

import numpy as np
import pytest

from ebmtrack.evaluation.results import read_result, remove_unfinished, write_result


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no POSIX signal masks")
def test_a_stop_during_a_write_takes_effect_after_it(tmp_path, monkeypatch):
    def stop(signum, frame):
        raise SystemExit(128 + signum)

    create = tempfile.mkstemp

    def create_then_stopped(*args, **kwargs):  # the stop lands right after the file exists
        made = create(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)
        return made

    previous = signal.signal(signal.SIGTERM, stop)
    monkeypatch.setattr(tempfile, "mkstemp", create_then_stopped)
    boxes = np.arange(12, dtype=np.float64).reshape(3, 4)
    try:
        with pytest.raises(SystemExit):
            write_result(tmp_path, "t", 0, "seq", boxes)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not list(tmp_path.rglob(".*.tmp*"))
    np.testing.assert_array_equal(read_result(tmp_path, "t", 0, "seq")[0], boxes)


def test_what_a_killed_writer_left_is_removed_and_nothing_else(tmp_path):
    boxes = np.zeros((2, 4))
    write_result(tmp_path, "t", 0, "seq", boxes)
    write_result(tmp_path, "t", 0, "seq1", boxes)
    folder = tmp_path / "results" / "t" / "default_000"
    # the writer's temporary names; the last of ``left``, an earlier version's
    left = [".seq.txt.a1.tmp.txt", ".seq_time.txt.b2.tmp.txt", ".seq_confidence.txt.c3.tmp"]
    others = [".seq1.txt.d4.tmp.txt", ".seq1_time.txt.e5.tmp.txt"]  # another sequence's writer
    for name in left + others:
        (folder / name).write_text("partial")
    remove_unfinished(tmp_path, "t", 0, "seq")
    assert sorted(p.name for p in folder.glob(".*.tmp*")) == sorted(others)
    assert sorted(p.name for p in folder.glob("[!.]*.txt")) == ["seq.txt", "seq1.txt"]
