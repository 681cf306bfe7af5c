import subprocess
import sys

from ebmtrack.cli.main import SUBCOMMANDS, main


def test_help_lists_every_subcommand(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


def test_console_script_runs_as_module():
    done = subprocess.run(
        [sys.executable, "-m", "ebmtrack.cli.main", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert done.stdout.startswith("ebmtrack ")
