import subprocess
import sys

from ebmtrack.cli.main import SUBCOMMANDS, main


def test_no_command_is_a_usage_error_listing_every_subcommand(capsys):
    assert main([]) == 2  # argparse's exit status for a usage error
    err = capsys.readouterr().err
    for name in SUBCOMMANDS:
        assert name in err


def test_console_script_runs_as_module():
    done = subprocess.run(
        [sys.executable, "-m", "ebmtrack.cli.main", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert done.stdout.startswith("ebmtrack ")


def _subparsers():
    import argparse

    from ebmtrack.cli.main import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_option_has_help():
    for command, parser in _subparsers().items():
        for action in parser._actions:
            assert action.help, f"ebmtrack {command} {action.option_strings or action.dest}"


def test_shared_options_mean_the_same_everywhere():
    from ebmtrack.cli.main import DEVICE_HELP, THREADS_HELP
    from ebmtrack.cli.tracker_options import PEER_MODELS_HELP

    first_words = {
        "threads": THREADS_HELP,
        "device": DEVICE_HELP,
        "workers": "worker processes",
        "peer_models": PEER_MODELS_HELP,
    }
    seen = {name: [] for name in first_words}
    for command, parser in _subparsers().items():
        actions = {a.dest: a for a in parser._actions}
        # Every command that writes files writes where --out says: a folder, or track's boxes
        # file (`trackers` only prints).
        if command != "trackers":
            assert actions["out"].metavar == ("FILE" if command == "track" else "DIR"), command
        for name, start in first_words.items():
            if name in actions:
                assert actions[name].help.startswith(start), (command, name)
                seen[name].append(command)
    assert seen["threads"] == ["demo", "eval", "regress1d", "train", "track"]
    assert seen["device"] == ["demo", "eval", "train", "track"]
    # train's loader processes: --data-workers
    assert seen["workers"] == ["eval", "regress1d", "track-many"]
    assert seen["peer_models"] == ["demo", "eval", "export", "track"]


def test_readme_says_what_shared_is():
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "`../shared` is a folder beside the repository" in readme
    assert "the test data, `../shared/data/sequences`" in readme


def test_every_command_that_runs_takes_no_progress():
    """--no-progress is taken by every command but the listing (export draws no bar: it says
    so the same way)."""
    takes = [
        command
        for command, parser in _subparsers().items()
        if any("--no-progress" in action.option_strings for action in parser._actions)
    ]
    assert takes == [command for command in SUBCOMMANDS if command != "trackers"]


def test_threads_help_fits_both_runtimes():
    from ebmtrack.cli.main import THREADS_HELP

    assert "ONNX Runtime" in THREADS_HELP and "PyTorch" in THREADS_HELP
    threads = next(a for a in _subparsers()["track"]._actions if a.dest == "threads")
    assert "torch" not in threads.help.replace("torch tracker", "")
