"""A file written with ``write_atomic`` is there whole or not at all: the content round-trips,
a failed write keeps the earlier file and leaves no temporary file, and the new file has the
permissions of an ordinary one."""

import json
import os
import stat

import numpy as np
import pytest

from ebmtrack.files import write_atomic, write_json_atomic, write_text_atomic


def test_text_and_json_round_trip_into_a_new_folder(tmp_path):
    path = tmp_path / "a" / "b" / "record.json"
    assert write_json_atomic(path, {"x": [1, 2]}) == path
    assert json.loads(path.read_text()) == {"x": [1, 2]}
    write_text_atomic(path, "replaced\n")
    assert path.read_text() == "replaced\n"
    assert [p.name for p in path.parent.iterdir()] == ["record.json"]


def test_a_failed_write_keeps_the_earlier_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "boxes.txt"
    write_text_atomic(path, "earlier\n")

    def half_then_fail(tmp):
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, half_then_fail)
    assert path.read_text() == "earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["boxes.txt"]


def test_the_temporary_name_keeps_the_extension(tmp_path):
    # numpy.savez adds ".npz" to a name without it: the file it writes must be the one renamed
    path = tmp_path / "arrays.npz"
    write_atomic(path, lambda tmp: np.savez(tmp, a=np.arange(3)))
    np.testing.assert_array_equal(np.load(path)["a"], np.arange(3))
    assert [p.name for p in tmp_path.iterdir()] == ["arrays.npz"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_the_file_gets_the_permissions_of_an_ordinary_new_file(tmp_path):
    before = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "f.txt", "x")
    finally:
        os.umask(before)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_set_is_renamed_together_or_not_at_all(tmp_path):
    from ebmtrack.files import write_atomic_set

    paths = [tmp_path / "demo.mp4", tmp_path / "boxes.txt"]
    for path in paths:
        path.write_text("earlier\n")

    def first_then_fail(tmps):
        tmps[0].write_text("new\n")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic_set(paths, first_then_fail)
    assert [p.read_text() for p in paths] == ["earlier\n", "earlier\n"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boxes.txt", "demo.mp4"]
    held = []

    class Hold:
        def __enter__(self):
            held.append([p.read_text() for p in paths])  # nothing renamed yet

        def __exit__(self, *exc):
            held.append([p.read_text() for p in paths])

    def both(tmps):
        for tmp in tmps:
            tmp.write_text(f"new {tmp.suffix}\n")

    assert write_atomic_set(paths, both, Hold) == paths
    assert held == [["earlier\n", "earlier\n"], ["new .mp4\n", "new .txt\n"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boxes.txt", "demo.mp4"]
