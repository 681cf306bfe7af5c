"""``ebmtrack trackers``: every tracker, what it is and what its variant sets, on one screen;
``ebmtrack trackers NAME``: every option with its default, what it does and its values. And
the progress bar never shares a line with a warning."""

import re
from pathlib import Path

import pytest
from cli_helpers import ebmtrack, error_line, generated_sequences

from ebmtrack.cli.main import main
from ebmtrack.tracking.registry import check_options, default_options, tracker_names
from ebmtrack.values import OptionError

ROOT = Path(__file__).resolve().parents[2]


def test_the_list_names_every_tracker_on_one_screen(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["trackers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100
    starts = [line.split()[0] for line in lines if line and not line[0].isspace()]
    assert set(tracker_names()) <= set(starts)
    atom = next(line for line in lines if line.startswith("atom "))
    assert "siamese box estimator" in atom


def _entries(out: str) -> dict[str, str]:
    """``KEY -> the entry's text`` (its continuation lines joined) of ``trackers NAME``."""
    entries, key = {}, None
    for line in out.splitlines()[2:-1]:
        match = re.match(r"^  (\w+)=(\S+)\s*(.*)$", line)
        if match:
            key = match.group(1)
            entries[key] = f"{match.group(2)} {match.group(3)}"
        else:
            entries[key] += " " + line.strip()
    return entries


def test_one_tracker_lists_its_options_with_their_defaults(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["trackers", "ATOM-polished"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("atom-polished: ")
    items = {key: text.split()[0] for key, text in _entries(out).items()}
    assert set(items) == set(default_options("atom-polished"))
    assert items["box_mode"] == "polished" and items["search_size"] == "288"
    assert max(map(len, out.splitlines())) <= 100


def test_each_option_says_what_it_does_and_its_values(capsys, monkeypatch):
    """One entry per option with its meaning and allowed values, read from the parameter
    dataclass's own field docs and checks (no second copy), and the page that explains them."""
    from ebmtrack.tracking.atom.params import AtomParams
    from ebmtrack.tracking.option_docs import docstring_entries
    from ebmtrack.tracking.params import SearchRegionParams

    monkeypatch.setenv("COLUMNS", "100")
    assert main(["trackers", "atom"]) == 0
    out = capsys.readouterr().out
    entries = _entries(out)
    assert len(entries) == len(default_options("atom")) > 50
    assert out.rstrip().endswith("docs/atom.md")
    assert (ROOT / "docs" / "atom.md").is_file()
    assert "capacity of the sample memory." in entries["memory_size"]
    assert docstring_entries(SearchRegionParams)["memory_size"] == "capacity of the sample memory."
    assert "[one of iou, ebm]" in entries["box_climb"]
    assert "one of refine, scale, position, gated, polished" in entries["box_mode"]
    assert docstring_entries(AtomParams)["box_climb"].startswith("how the head's output is climbed")
    assert "[in (0, 1]]" in entries["size_update_rate"]
    assert "also --search-size VALUE" in entries["search_size"]
    assert "[true or false]" in entries["aug_flip"]


def test_peer_trackers_list_only_the_options_they_use(capsys):
    """csrt reads no model files (model_dir is refused, not listed); nanotrack names
    --peer-models, and not --backbone, which it refuses."""
    assert main(["trackers", "csrt"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("csrt: takes no options") and "model_dir" not in out
    assert main(["trackers", "nanotrack"]) == 0
    entries = _entries(capsys.readouterr().out)
    assert set(entries) == {"model_dir", "backbone", "neckhead"}
    assert "also --peer-models DIR" in entries["model_dir"]
    assert "--backbone" not in entries["backbone"]
    with pytest.raises(OptionError, match="tracker 'csrt' reads no model files"):
        check_options("csrt", {"model_dir": "peers"})


def test_an_unknown_tracker_is_one_line(capsys):
    assert main(["trackers", "csrtt"]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "did you mean 'csrt'" in line


def test_a_warning_never_shares_the_progress_bars_line(tmp_path):
    sequence = generated_sequences(tmp_path / "data", count=1, frames=6) / "Square0"
    (sequence / "img" / "0004.png").write_bytes(b"broken")
    done = ebmtrack(
        "track",
        sequence,
        "--init",
        "15,20,20,20",
        "--tracker",
        "kcf",
        "--on-bad-frame",
        "skip",
        "--out",
        tmp_path / "b.csv",
    )
    assert done.returncode == 0, done.stderr
    assert "track:" in done.stderr and "warning: frame 4" in done.stderr  # the bar, the warning
    # Each of our lines starts a line: after a newline or the bar's carriage return.
    for match in re.finditer("ebmtrack track: ", done.stderr):
        assert match.start() == 0 or done.stderr[match.start() - 1] in "\r\n", done.stderr


def test_the_real_command_lists_them():
    done = ebmtrack("trackers")
    assert done.returncode == 0 and "csrt" in done.stdout
    assert "valid trackers" in error_line(ebmtrack("trackers", "nope"), "trackers")


def test_the_list_marks_what_a_tracker_needs_besides_the_default_install(capsys, monkeypatch):
    """[PyTorch]: ours without a shipped export; [--peer-models]: OpenCV's DNN trackers."""
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["trackers"]) == 0
    out = capsys.readouterr().out
    first = {line.split()[0]: line.split()[1] for line in out.splitlines() if line[:1].isalpha()}
    assert {name for name, word in first.items() if word == "[PyTorch]"} == {"dimp-nce+"}
    assert {name for name, word in first.items() if word == "[--peer-models]"} == {
        "nanotrack",
        "vit",
    }
    assert first["atom"] != "[PyTorch]" and first["csrt"] == "OpenCV's"
    assert "[PyTorch]: runs with ebmtrack[train] only" in " ".join(out.split())
