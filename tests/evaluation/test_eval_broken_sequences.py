"""A broken sequence (more boxes than frames) costs ``ebmtrack eval`` that sequence only: outside
``--sequences`` it is not looked at, inside it is skipped in one warning line, as a failed job."""

from eval_helpers import eval_argv, sequences_folder

from ebmtrack.cli.main import main


def _with_a_broken_one(root):
    data = sequences_folder(root, count=2)
    broken = data / "Broken"
    (broken / "img").mkdir(parents=True)
    for k in range(2):
        (broken / "img" / f"{k + 1:04d}.png").write_bytes((data / "Seq0/img/0001.png").read_bytes())
    (broken / "groundtruth_rect.txt").write_text("5,10,10,10\n" * 3)  # 3 boxes, 2 frames
    return data


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_broken_sequence_outside_the_selection_is_not_looked_at(tmp_path, capsys):
    data = _with_a_broken_one(tmp_path / "data")
    out = tmp_path / "out"
    assert main(eval_argv(data, out, "kcf", "--sequences", "Seq0,Seq1")) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "2 sequence runs done, 0 found from before, 0 failed" in captured.out
    assert sorted(p.name for p in out.glob("results/kcf/default_000/Seq?.txt")) == [
        "Seq0.txt",
        "Seq1.txt",
    ]


def test_a_broken_selected_sequence_is_skipped_in_one_line(tmp_path, capsys):
    data = _with_a_broken_one(tmp_path / "data")
    out = tmp_path / "out"
    assert main(eval_argv(data, out, "kcf")) == 1  # as a failed job: the others are reported
    captured = capsys.readouterr()
    (line,) = _lines(captured.err)
    assert line == (
        f"ebmtrack eval: warning: 1 broken sequence(s) skipped: {data / 'Broken'}: 3 boxes in "
        f"groundtruth_rect.txt but only 2 frames (see {out / 'errors.log'})"
    )
    assert "2 sequence runs done, 0 found from before, 0 failed, 1 broken sequence(s) skipped" in (
        captured.out
    )
    assert "Broken skipped" in (out / "errors.log").read_text()
    assert (out / "report.md").is_file() and (out / "results/kcf/default_000/Seq1.txt").is_file()
    # Only broken ones asked for: nothing to evaluate, one line naming the problem.
    assert main(eval_argv(data, tmp_path / "other", "kcf", "--sequences", "Broken")) == 2
    (line,) = _lines(capsys.readouterr().err)
    assert line.startswith(f"ebmtrack eval: error: {data}: no sequence left to evaluate")
    assert "3 boxes in groundtruth_rect.txt but only 2 frames" in line
