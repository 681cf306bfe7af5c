"""The same rules and messages in every command: ``--device``, tracker names, typos."""

import pytest
import test_tracker_options as shared
import torch

from ebmtrack.cli.main import main

_eval, _one_error, _track = shared._eval, shared._one_error, shared._track
dataset = shared.dataset  # the fixture: a 3-frame sequence

NO_GPU = f"--device cuda: CUDA is not available (torch {torch.__version__} sees no GPU)"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_no_cuda_is_one_message_in_every_command(dataset, tmp_path, capsys):
    assert main(_track(dataset, "atom", "--device", "cuda")) == 2
    assert _one_error(capsys, "track") == NO_GPU
    assert main(_eval(dataset, tmp_path, "atom", "--device", "cuda")) == 2
    assert _one_error(capsys, "eval") == NO_GPU
    # An OpenCV tracker never needs PyTorch to say so, GPU or not.
    assert main(_track(dataset, "csrt", "--device", "cuda")) == 2
    assert _one_error(capsys, "track") == "--device cuda: tracker csrt runs on the CPU only"
    train = ["train", "--preset", "synthetic-smoke", "--device", "cuda"]
    assert main([*train, "--out", str(tmp_path / "train")]) == 2
    assert _one_error(capsys, "train") == NO_GPU
    assert not (tmp_path / "train").exists()


def test_opencv_trackers_refuse_cuda_alike_and_ignore_cpu(
    dataset, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert main(_track(dataset, "csrt", "--device", "cuda")) == 2
    refused = "--device cuda: tracker csrt runs on the CPU only"
    assert _one_error(capsys, "track") == refused
    assert main(_eval(dataset, tmp_path, "kcf,csrt", "--device", "cuda")) == 2
    assert _one_error(capsys, "eval") == refused.replace("csrt", "kcf")
    monkeypatch.undo()
    for device in ("cpu", "auto"):  # where they run anyway: nothing to refuse
        assert main(_track(dataset, "kcf", "--device", device)) == 0
        flags = ["--device", device, "--no-progress"]
        assert main(_eval(dataset, tmp_path / device, "kcf", *flags)) == 0
    capsys.readouterr()


def test_tracker_names_are_case_insensitive_and_typos_get_the_closest(
    dataset, tmp_path, capsys
):
    assert main(_track(dataset, "KCF")) == 0
    assert main(_eval(dataset, tmp_path, "Kcf", "--no-progress")) == 0
    capsys.readouterr()
    assert main(_track(dataset, "csrtt")) == 2
    assert "unknown tracker 'csrtt' (did you mean 'csrt'?)" in _one_error(capsys, "track")
    assert main(_eval(dataset, tmp_path, "atomm")) == 2
    assert "(did you mean 'atom'?)" in _one_error(capsys, "eval")
    # A mistyped option names the closest one instead of listing all ~50.
    assert main(_track(dataset, "atom", "--option", "serach_size=288")) == 2
    error = _one_error(capsys, "track")
    assert error.endswith("takes no option(s) serach_size (did you mean 'search_size'?)")
