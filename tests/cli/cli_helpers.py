"""Running ``ebmtrack`` as a user does (a subprocess), and what a fault may leave behind."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np

EBMTRACK = [sys.executable, "-m", "ebmtrack.cli.main"]
# One thread per process, no progress bars: quiet, and gentle with a shared 2-core machine.
QUIET = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def ebmtrack(*args, cwd=None, file_size_limit: int | None = None, timeout: float = 600):
    """Run ``ebmtrack ARGS``; ``file_size_limit`` (bytes) makes larger writes fail as on a full
    disk (EFBIG, which Python reports as an OSError: it ignores SIGXFSZ)."""
    limit = None
    if file_size_limit is not None:

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(
        [*EBMTRACK, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=QUIET,
        preexec_fn=limit,
        timeout=timeout,
    )


def error_line(done, command: str, code: int = 2) -> str:
    """The single stderr line of a failed command; asserts the exit code and that it is alone."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, (done.returncode, done.stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ebmtrack {command}: "), lines[0]
    assert "Traceback" not in done.stderr
    return lines[0]


def without_fps(text: str) -> str:
    """``text`` with the speeds of track's summary line replaced by ``*`` (they vary)."""
    speeds = r"(nan|[\d.]+) FPS \((nan|[\d.]+) tracking only\)"
    return re.sub(speeds, "* FPS (* tracking only)", text)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def square_sequence(root: Path) -> Path:
    """An OTB-layout sequence of 3 frames, ``root/Square``: a grey square at (30, 20, 20, 20)."""
    sequence = root / "Square"
    (sequence / "img").mkdir(parents=True)
    frame = np.zeros((60, 80, 3), np.uint8)
    frame[20:40, 30:50] = 200
    for k in range(3):
        cv2.imwrite(str(sequence / "img" / f"{k + 1:04d}.png"), frame)
    (sequence / "groundtruth_rect.txt").write_text("30,20,20,20\n" * 3)
    return sequence


def generated_sequences(root: Path, count: int = 2, frames: int = 12) -> Path:
    """``count`` OTB-style sequences of a textured square moving over a gradient."""
    yy, xx = np.mgrid[0:90, 0:120]
    background = np.stack([xx, yy, (xx + yy) // 2], axis=2).astype(np.uint8)
    for index in range(count):
        rng = np.random.default_rng(index)
        texture = rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)
        folder = root / f"Square{index}"
        (folder / "img").mkdir(parents=True)
        boxes = []
        for k in range(frames):
            x, y = 15 + (3 * k + 7 * index) % 80, 20 + k % 50
            frame = background.copy()
            frame[y : y + 20, x : x + 20] = texture
            cv2.imwrite(str(folder / "img" / f"{k + 1:04d}.png"), frame[:, :, ::-1])
            boxes.append(f"{x},{y},20,20")
        (folder / "groundtruth_rect.txt").write_text("\n".join(boxes) + "\n")
    return root


def live_processes(group: int) -> list[str]:
    """Processes of process group ``group`` that are still running (zombies excluded)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == group and state not in ("Z", "X"):
            alive.append(stat.parent.name)
    return alive


def interrupt(args, signum: int, delay: float, ready=None, cwd=None):
    """Start ``ebmtrack ARGS`` in a new process group, send ``signum`` ``delay`` seconds after
    ``ready()`` first holds (SIGINT to the whole group, as Ctrl-C in a terminal; SIGTERM to the
    command only, as ``kill`` and ``timeout``), and return (completed run, processes of the group
    still alive two seconds after it exited; those are then killed)."""
    process = subprocess.Popen(
        [*EBMTRACK, *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=QUIET,
        start_new_session=True,
        # A shell without job control starts background commands with SIGINT ignored, and
        # Python then installs no Ctrl-C handler: give the command the terminal's default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    while ready is not None and not ready() and process.poll() is None:
        time.sleep(0.02)
    try:
        out, err = process.communicate(timeout=delay)
    except subprocess.TimeoutExpired:
        if signum == signal.SIGINT:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        out, err = process.communicate(timeout=300)
    deadline = time.monotonic() + 2
    while live_processes(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = live_processes(process.pid)
    if left:
        os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), left
