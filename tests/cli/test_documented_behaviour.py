"""What docs/reliability.md and the formats promise, through the real command: a camera that
does not exist is our one line (no OpenCV ``[ WARN ... ]`` lines), and a tracker without a score
writes ``null`` in jsonl (not OpenCV's -1)."""

import json

from cli_helpers import ebmtrack, error_line, generated_sequences


def test_a_missing_camera_is_one_line_without_opencvs_warnings():
    line = error_line(ebmtrack("track", "9", "--init", "1,1,5,5", "--tracker", "kcf"), "track")
    assert line == (
        "ebmtrack track: error: cannot open camera 9 (no such camera, in use, or no permission)"
    )


def test_csrt_writes_no_score_in_jsonl(tmp_path):
    sequence = generated_sequences(tmp_path / "data", count=1, frames=3) / "Square0"
    out = tmp_path / "boxes.jsonl"
    done = ebmtrack("track", sequence, "--init", "15,20,20,20", "--tracker", "csrt", "--out", out,
                    "--no-progress")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["targets"][0]["score"] for row in rows] == [None, None, None]
