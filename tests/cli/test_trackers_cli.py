"""``ebmtrack trackers``: every tracker, what it is and what its variant sets, on one screen;
``ebmtrack trackers NAME``: every option with its default. And the progress bar never shares a
line with a warning."""

import re

from cli_helpers import ebmtrack, error_line, generated_sequences

from ebmtrack.cli.main import main
from ebmtrack.tracking.registry import default_options, tracker_names


def test_the_list_names_every_tracker_on_one_screen(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["trackers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100
    starts = [line.split()[0] for line in lines if line and not line[0].isspace()]
    assert set(tracker_names()) <= set(starts)
    atom = next(line for line in lines if line.startswith("atom "))
    assert "scale search" in atom


def test_one_tracker_lists_its_options_with_their_defaults(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["trackers", "ATOM-polished"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("atom-polished: ")
    items = dict(re.findall(r"(\w+)=(\S+)", out.split("\n", 1)[1]))
    assert set(items) == set(default_options("atom-polished"))
    assert items["box_mode"] == "polished" and items["search_size"] == "288"
    assert max(map(len, out.splitlines())) <= 100


def test_an_unknown_tracker_is_one_line(capsys):
    assert main(["trackers", "csrtt"]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "did you mean 'csrt'" in line


def test_a_warning_never_shares_the_progress_bars_line(tmp_path):
    sequence = generated_sequences(tmp_path / "data", count=1, frames=6) / "Square0"
    (sequence / "img" / "0004.png").write_bytes(b"broken")
    done = ebmtrack("track", sequence, "--init", "15,20,20,20", "--tracker", "kcf",
                    "--on-bad-frame", "skip", "--out", tmp_path / "b.csv")
    assert done.returncode == 0, done.stderr
    assert "track:" in done.stderr and "warning: frame 4" in done.stderr  # the bar, the warning
    # Each of our lines starts a line: after a newline or the bar's carriage return.
    for match in re.finditer("ebmtrack track: ", done.stderr):
        assert match.start() == 0 or done.stderr[match.start() - 1] in "\r\n", done.stderr


def test_the_real_command_lists_them():
    done = ebmtrack("trackers")
    assert done.returncode == 0 and "csrt" in done.stdout
    assert "valid trackers" in error_line(ebmtrack("trackers", "nope"), "trackers")
