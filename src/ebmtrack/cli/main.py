"""The ``ebmtrack`` command.

Each subcommand lives in its own module of this package and exposes ``add_parser(subparsers)``,
which registers an ``argparse`` sub-parser whose ``func`` default takes the parsed arguments and
returns an exit code. Modules are imported lazily so that ``ebmtrack --help`` stays fast.

What every subcommand shares is here: a user error or an I/O error is one line on stderr
(``ebmtrack COMMAND: error: ...``) and exit status 2; Ctrl-C (SIGINT) exits with 130 and SIGTERM
with 143, each after one line saying what was kept; a closed stdout (``| head``) ends the command
quietly with 141. Log warnings print as ``ebmtrack COMMAND: warning: ...``. The options several
commands take (``--threads``, ``--device``, ``--out``) are defined once, here.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ebmtrack.lite.option_checks import TRAIN_EXTRA

# Module names under ebmtrack.cli, in the order --help lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "demo", "eval", "export", "regress1d", "train", "track", "track-many", "trackers",
)  # fmt: skip

EXIT_ERROR, EXIT_BROKEN_PIPE, EXIT_SIGINT, EXIT_SIGTERM = 2, 141, 130, 143

# What installs each module a command may find missing, and what it is: those ebmtrack[train]
# adds to the default install (pyproject.toml), and the default install's own. A command that
# misses one says so in one line; a module not named here is a fault of ours (a traceback).
MODULES: dict[str, tuple[str, str]] = {
    "torch": ("PyTorch", TRAIN_EXTRA),
    "torchvision": ("torchvision", TRAIN_EXTRA),
    "scipy": ("SciPy", TRAIN_EXTRA),
    "safetensors": ("safetensors", TRAIN_EXTRA),
    "onnx": ("ONNX", TRAIN_EXTRA),
    "skimage": ("scikit-image", TRAIN_EXTRA),
    "cv2": ("OpenCV", "pip install opencv-contrib-python-headless"),
    "onnxruntime": ("ONNX Runtime", "pip install onnxruntime"),
    "numpy": ("NumPy", "pip install numpy"),
    "PIL": ("Pillow", "pip install Pillow"),
    "matplotlib": ("matplotlib", "pip install matplotlib"),
    "tqdm": ("tqdm", "pip install tqdm"),
    "yaml": ("PyYAML", "pip install pyyaml"),
}
# The commands that need ebmtrack[train] (PyTorch) whatever they are given.
TRAIN_COMMANDS = ("export", "regress1d", "train")


def missing_module(command: str, module: str | None) -> str | None:
    """The one line for a command that found ``module`` (``ModuleNotFoundError.name``)
    missing: ``export needs PyTorch (ebmtrack[train]): pip install 'ebmtrack[train]'`` for a
    command of ebmtrack[train]'s, else what is missing and the install that provides it
    (``OpenCV is not installed (no module 'cv2'): pip install ...``); None for a module not
    in :data:`MODULES`."""
    top = (module or "").partition(".")[0]
    if top not in MODULES:
        return None
    what, install = MODULES[top]
    if command in TRAIN_COMMANDS and install == TRAIN_EXTRA:
        return f"{command} needs {what} (ebmtrack[train]): {install}"
    return f"{what} is not installed (no module {top!r}): {install}"


class CLIError(Exception):
    """A user error: printed as one line on stderr, exit status 2, no traceback."""


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM, so that ``finally`` blocks
    (stopping worker processes, keeping partial outputs) run as on Ctrl-C."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with the command's error rules.

    - An argument error is one line, ``ebmtrack COMMAND: error: argument --threads: must be an
      integer >= 0, got '-1'`` (which argument, what is valid), exit status 2, no usage dump:
      ``--help`` shows the usage.
    - A word that starts with ``-`` and a digit (``-5,10,30,30``, ``-1``, ``-.5``) is a value,
      never an option: no option of ours starts with a digit, and argparse by default reads only
      plain negative numbers as values, so ``--init -5,10,30,30`` would fail.
    Sub-parsers are of the same class (argparse makes them with the parent's class).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {' '.join(message.split())}\n")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (argparse prints the one-line error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


THREADS_HELP = (
    "CPU threads of each process that runs a model (ONNX Runtime's, and PyTorch's where a "
    "torch tracker runs)"
)


def add_threads_argument(
    parser: argparse.ArgumentParser, default: int | None = 1, default_text: str | None = None
) -> None:
    """``--threads N``: CPU threads per process (:func:`ebmtrack.process.configure_threads`),
    the same meaning in every command and runtime.

    One thread by default where one process tracks, because on a busy 2-core machine two threads
    ran 8-40x slower than one (docs/demo.md). 0 leaves the libraries' own default.
    """
    shown = default_text or f"{default}"
    parser.add_argument(
        "--threads",
        type=non_negative_int,
        default=default,
        metavar="N",
        help=f"{THREADS_HELP} (default {shown}; 0 = the libraries' default, one per core)",
    )


DEVICE_HELP = "where the networks run: cpu, cuda, or auto (cuda when there is one)"


def add_device_argument(
    parser: argparse.ArgumentParser, default: str | None = "cpu", default_text: str | None = None
) -> None:
    """``--device cpu|cuda|auto``, the same meaning in every command."""
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default=default,
        help=f"{DEVICE_HELP} (default {default_text or default})",
    )


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; ``cuda`` without a GPU is
    refused with the one message every command gives (CLIError naming ``--device``)."""
    if name == "cpu":
        return name
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if name == "cuda":
        raise CLIError(
            f"--device cuda: CUDA is not available (torch {torch.__version__} sees no GPU)"
        )
    return "cpu"


def add_out_argument(
    parser: argparse.ArgumentParser, what: str, default: Path | None = None, file: bool = False
) -> None:
    """``--out``: where the command writes its results (a folder; for ``track`` a file)."""
    if default is None and not file:
        parser.add_argument("--out", type=Path, required=True, metavar="DIR", help=what)
        return
    shown = f" (default {default})" if default is not None else ""
    parser.add_argument(
        "--out",
        type=Path,
        default=default,
        metavar="FILE" if file else "DIR",
        help=what + shown,
    )


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


@contextmanager
def threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` torch threads (None or 0: leave the setting, torch's default
    in a fresh process), restoring it after."""
    from ebmtrack.process import torch_threads

    with torch_threads(count or None):
        yield


def _os_error_line(err: OSError) -> str:
    """``PATH: CAUSE`` for an OSError that names a path, else its text."""
    if err.strerror and err.filename is not None:
        names = str(err.filename)
        if err.filename2 is not None:
            names += f" -> {err.filename2}"
        return f"{names}: {err.strerror}"
    return str(err) or type(err).__name__


def _one_line(err: BaseException) -> str:
    text = _os_error_line(err) if isinstance(err, OSError) else str(err)
    notes = getattr(err, "__notes__", [])
    return "; ".join([text.strip(), *notes]) if text.strip() else "; ".join(notes)


class _Formatter(logging.Formatter):
    def __init__(self, command: str) -> None:
        super().__init__()
        self.command = command

    def format(self, record: logging.LogRecord) -> str:
        return f"ebmtrack {self.command}: {record.levelname.lower()}: {record.getMessage()}"


class _LineHandler(logging.StreamHandler):
    """Each record on a line of its own, also while a progress bar is drawn: tqdm clears the
    bar, the line is written, the bar is drawn again below it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def _setup_logging(command: str) -> None:
    handler = _LineHandler(sys.stderr)
    handler.setFormatter(_Formatter(command))
    handler.ebmtrack_cli = True
    root = logging.getLogger()
    # Replace the handler of an earlier call in this process; leave others (pytest's) in place.
    for old in [h for h in root.handlers if getattr(h, "ebmtrack_cli", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup must not be cut short
    raise Terminated()


@contextmanager
def signals_held() -> Iterator[None]:
    """Run the block whole: a SIGINT or SIGTERM that arrives inside it takes effect when it
    ends (its handler runs then: KeyboardInterrupt, :class:`Terminated`), so a unit of work and
    the count of what it wrote are never split by Ctrl-C. Outside the main thread, where no
    handler can be set, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[tuple[int, object]] = []

    def hold(signum: int, frame) -> None:
        pending.append((signum, frame))

    previous = {signum: signal.signal(signum, hold) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum, frame in pending[:1]:
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler != signal.SIG_IGN:  # the default action: delivered again, unheld
                os.kill(os.getpid(), signum)


def build_parser() -> argparse.ArgumentParser:
    from ebmtrack import __version__

    parser = ArgumentParser(
        prog="ebmtrack",
        description="Visual object tracking with energy-based regression.",
    )
    parser.add_argument("--version", action="version", version=f"ebmtrack {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"ebmtrack.cli.{name.replace('-', '_')}").add_parser(subparsers)
    return parser


_OPENCV_LEVELS = {"SILENT": 0, "FATAL": 1, "ERROR": 2, "WARNING": 3, "INFO": 4, "DEBUG": 5}


def _quiet_opencv() -> None:
    """No OpenCV or FFmpeg chatter between our lines (``[ WARN:0@0.1] global cap_v4l.cpp ...``):
    what goes wrong with a video, a camera, a tracker or a model file is reported by ebmtrack
    itself. The environment variables hold unless set already; OpenCV reads its own only when
    first imported, so where it is loaded already its level is set as well."""
    os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
    level = _OPENCV_LEVELS.get(os.environ["OPENCV_LOG_LEVEL"].upper())
    cv2 = sys.modules.get("cv2")
    if level is not None and cv2 is not None and hasattr(cv2, "setLogLevel"):
        cv2.setLogLevel(level)


def main(argv: list[str] | None = None) -> int:
    _quiet_opencv()  # before the sub-commands' modules import OpenCV
    try:
        parser = build_parser()
    except ModuleNotFoundError as err:  # an install without one of its dependencies
        line = missing_module("", err.name)
        if line is None:
            raise
        print(f"ebmtrack: error: {line}", file=sys.stderr)
        return EXIT_ERROR
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unrecognized(parser, getattr(args, "command", None), unknown)
    if getattr(args, "func", None) is None:  # no command: a usage error, as argparse's
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    command = args.command
    _quiet_opencv()
    _setup_logging(command)
    # What an interrupted command keeps, e.g. "the same command resumes" (format of args).
    interrupted_note = getattr(args, "interrupted_note", "").format(**vars(args))
    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        pass
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (`| head`): nothing more to say, and nothing to flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Terminated as err:
        note = _notes(err, interrupted_note)
        print(f"ebmtrack {command}: terminated (SIGTERM){note}", file=sys.stderr)
        return EXIT_SIGTERM
    except KeyboardInterrupt as err:
        print(f"ebmtrack {command}: interrupted{_notes(err, interrupted_note)}", file=sys.stderr)
        return EXIT_SIGINT
    except (CLIError, ValueError, OSError) as err:
        print(f"ebmtrack {command}: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    except ModuleNotFoundError as err:
        line = missing_module(command, err.name)
        if line is None:
            raise
        print(f"ebmtrack {command}: error: {line}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as err:
        if type(err).__module__ != "cv2":
            raise
        # OpenCV refusing its input (a tracker on a frame it cannot use): its own one line.
        text = f"OpenCV: {getattr(err, 'err', '') or err} in {getattr(err, 'func', '?')}"
        print(f"ebmtrack {command}: error: {text}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _unrecognized(parser: argparse.ArgumentParser, command: str | None, words: list[str]):
    """Refuse words no option takes, as the command's own parser (``ebmtrack COMMAND: error:``,
    not the top parser's ``ebmtrack: error:``), naming the closest option of that command."""
    import difflib

    subparsers = next(
        (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
    )
    owner = subparsers.choices.get(command, parser) if command and subparsers else parser
    message = f"unrecognized arguments: {' '.join(words)}"
    options = [o[2:] for a in owner._actions for o in a.option_strings if o.startswith("--")]
    flag = next((w.partition("=")[0] for w in words if w.startswith("--")), None)
    close = difflib.get_close_matches(flag[2:], options, n=1, cutoff=0.7) if flag else []
    if close:
        message += f" (did you mean --{close[0]}?)"
    owner.error(message)


def console_main(argv: list[str] | None = None) -> int:
    """The ``ebmtrack`` command: :func:`main` with the lines C libraries print to stderr
    themselves (libjpeg, FFmpeg) held back (:mod:`ebmtrack.cli.native_output`); when some were,
    and the command did not end in an error line, one warning says how many and the first."""
    from ebmtrack.cli.native_output import filtered_stderr

    words = sys.argv[1:] if argv is None else argv
    command = next((w for w in words if w in SUBCOMMANDS), "")
    with filtered_stderr() as held:
        code = main(argv)
    if held.count and code != EXIT_ERROR:
        print(
            f"ebmtrack {command}: warning: the image / video decoders reported damaged input "
            f"{held.count} time(s), first: {held.first}",
            file=sys.stderr,
        )
    return code


def _notes(err: BaseException, default: str) -> str:
    notes = getattr(err, "__notes__", None) or ([default] if default else [])
    return "".join(f"; {note}" for note in notes)


if __name__ == "__main__":
    # Run as `python -m ebmtrack.cli.main`: use the importable module, so that its exception
    # classes are the ones the subcommands raise.
    from ebmtrack.cli.main import console_main as _console_main

    sys.exit(_console_main())
