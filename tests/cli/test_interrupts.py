"""Fault injection: ``eval`` and ``train`` stopped by SIGINT (Ctrl-C, sent to the whole process
group) or SIGTERM (``kill``, ``timeout``, job schedulers: the command alone) at random points,
then run again until they finish. Each stop is one line and exit 130 / 143, leaves no process
behind, and the final results equal those of a run that was never stopped. A SIGTERM to the whole
group of a training run with a data worker (the worker signalled first) is one line too. A
``demo`` stopped over an earlier run's folder leaves that run's files as they were."""

from __future__ import annotations

import csv
import os
import random
import signal
import subprocess
import time

import pytest
from cli_helpers import (
    EBMTRACK,
    QUIET,
    ebmtrack,
    generated_sequences,
    interrupt,
    live_processes,
    snapshot,
)
from safetensors.numpy import load_file

STOPS = [(signal.SIGINT, 1), (signal.SIGTERM, 2)]
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)"}


def _run_with_stops(args, out, signum, rng, progress, total, note):
    """Stop ``ebmtrack ARGS`` twice, each time a random moment (0-20 ms) after it has finished
    one more unit (``progress()`` counts finished units out of ``total``), then rerun it to the
    end. Progress, not time, picks the points: on a loaded machine run times vary tenfold, and on
    a quiet one the units that are left take only a fraction of a second. Returns how many times
    it was stopped."""
    stops = 0
    for _ in range(2):
        before = progress()
        if before >= total - 1:
            break
        target = before + 1
        done, left = interrupt(
            args, signum, rng.uniform(0, 0.02), ready=lambda t=target: progress() >= t
        )
        assert left == [], f"processes left after {signum.name}: {left}"
        if done.returncode == 0:
            return stops
        stops += 1
        assert done.returncode == EXIT[signum], done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert lines[-1] == f"ebmtrack {args[0]}: {WORDS[signum]}; {note.format(out=out)}"
        assert len(lines) == 1, lines
        assert not list(out.rglob("*.tmp")), "a temporary file was left behind"
    done, left = interrupt(args, signum, 600)  # to the end
    assert done.returncode == 0, done.stderr
    assert left == []
    return stops


@pytest.fixture(scope="module")
def eval_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    # 300 frames: each sequence takes a while even on a quiet machine, so a stop lands mid-run.
    data = generated_sequences(root / "data", count=4, frames=300)
    args = ["eval", data, "--trackers", "kcf,csrt", "--workers", "2", "--no-progress"]
    done = ebmtrack(*args, "--out", root / "reference")
    assert done.returncode == 0, done.stderr
    return root, args


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "seed"), STOPS)
def test_eval_stopped_and_resumed_equals_an_uninterrupted_run(eval_reference, signum, seed):
    root, args = eval_reference
    out = root / f"{signum.name}-{seed}"
    stops = _run_with_stops(
        [*args, "--out", out],
        out,
        signum,
        random.Random(seed),
        progress=lambda: len(list(out.glob("results/*/default_000/Square?.txt"))),
        total=8,
        note="finished sequences are kept in {out}; the same command resumes",
    )
    assert stops >= 1
    reference = root / "reference" / "results"
    boxes = sorted(p.relative_to(reference) for p in reference.rglob("Square?.txt"))
    assert len(boxes) == 8
    for name in boxes:
        assert (out / "results" / name).read_text() == (reference / name).read_text(), name


def _sizes(folder) -> dict[str, int]:
    sizes = {}
    for path in folder.iterdir():
        try:
            sizes[path.name] = path.stat().st_size
        except FileNotFoundError:  # a temporary file renamed meanwhile
            pass
    return sizes


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "seed"), STOPS)
def test_demo_stopped_over_an_earlier_run_keeps_it_whole(tmp_path, signum, seed):
    out = tmp_path / "demo"
    args = ["demo", "--tracker", "kcf", "--no-progress", "--out", out]
    assert ebmtrack(*args).returncode == 0
    earlier, sizes = snapshot(out), _sizes(out)
    # Stopped a moment after the new run has started writing (a file appeared or changed).
    delay = random.Random(seed).uniform(0, 0.2)
    done, left = interrupt(args, signum, delay, ready=lambda: _sizes(out) != sizes)
    assert left == []
    assert not list(out.glob(".*")), "a temporary file was left behind"
    if done.returncode == 0:  # it finished first: the new set, whole
        assert snapshot(out).keys() == earlier.keys()
        return
    assert done.returncode == EXIT[signum], done.stderr
    names = "demo.mp4, demo.gif, boxes.txt, success.png, metrics.json"
    assert done.stderr.strip() == (
        f"ebmtrack demo: {WORDS[signum]}; {out} keeps the earlier {names} as they were"
    )
    assert snapshot(out) == earlier


TRAIN = ["--preset", "synthetic-smoke", "--epochs", "3", "--samples-per-epoch", "32"]
TRAIN += ["--batch-size", "4", "--set", "trainer.val_samples=4", "--threads", "1", "--no-progress"]


def _losses(run):
    with open(run / "metrics.csv") as handle:
        return [(r["epoch"], r["split"], float(r["loss"])) for r in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def train_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    done = ebmtrack("train", "--out", root / "reference", *TRAIN)
    assert done.returncode == 0, done.stderr
    return root


def _epochs_saved(run) -> int:
    """1 when the run folder exists, then 1 + the epoch of the latest checkpoint."""
    if not (run / "config.yaml").is_file():
        return 0
    latest = run / "checkpoints" / "latest"
    return 1 + (int(latest.read_text().strip().rsplit("-", 1)[1]) if latest.is_file() else 0)


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "seed"), STOPS)
def test_train_stopped_and_resumed_equals_an_uninterrupted_run(train_reference, signum, seed):
    root = train_reference
    out = root / f"{signum.name}-{seed}"
    base = ["train", "--out", out, *TRAIN]
    stops = 0
    rng = random.Random(seed)
    for _ in range(2):
        # A run folder with a config is resumed; before it exists, the command starts afresh.
        args = [*base, "--resume"] if (out / "config.yaml").is_file() else base
        before = _epochs_saved(out)
        if before >= 2:
            break
        # Up to the first epoch's checkpoint, so that two epochs are left to be stopped in.
        target = rng.randint(before + 1, 2)
        done, left = interrupt(
            args, signum, rng.uniform(0, 0.3), ready=lambda t=target: _epochs_saved(out) >= t
        )
        assert left == []
        if done.returncode == 0:
            break
        stops += 1
        # The shell reports 128 + N either way: the command's own exit status, or (now and then
        # on a loaded machine) the process ending by the signal itself after its one line (-N).
        assert done.returncode in (EXIT[signum], -signum), done.stderr
        assert done.stderr.strip().splitlines() == [
            f"ebmtrack train: {WORDS[signum]}; the last complete checkpoint is kept in {out}; "
            "add --resume to continue"
        ]
    assert stops >= 1
    if not (out / "iou_net.safetensors").is_file():
        done = ebmtrack(*base, "--resume")
        assert done.returncode == 0, done.stderr
    expected = load_file(root / "reference" / "iou_net.safetensors")
    got = load_file(out / "iou_net.safetensors")
    assert expected.keys() == got.keys()
    for key in expected:
        assert abs(expected[key] - got[key]).max() <= 1e-6, key
    assert [row[:2] for row in _losses(out)] == [row[:2] for row in _losses(root / "reference")]
    for (_, _, a), (_, _, b) in zip(_losses(out), _losses(root / "reference")):
        assert abs(a - b) <= 1e-6


@pytest.mark.slow
def test_train_stopped_with_its_worker_says_one_line(tmp_path):
    # A SIGTERM to the whole process group (`kill -- -PGID`, service managers) reaches the
    # DataLoader worker too, here first: the worker leaves it to the training process, which
    # stops at its checkpoint and shuts the worker down (a worker killed under it would make
    # the training process fail with a traceback).
    out = tmp_path / "run"
    args = ["train", "--out", out, *TRAIN, "--samples-per-epoch", "512"]
    process = subprocess.Popen(
        [*EBMTRACK, *map(str, [*args, "--set", "trainer.num_workers=1"])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=QUIET,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(live_processes(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(pid) for pid in live_processes(process.pid) if int(pid) != process.pid]
    assert workers, "the training run started no worker"
    time.sleep(0.5)
    for pid in workers:
        os.kill(pid, signal.SIGTERM)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=300)
    time.sleep(0.5)
    left = live_processes(process.pid)
    if left:
        os.killpg(process.pid, signal.SIGKILL)
    assert left == []
    assert process.returncode == EXIT[signal.SIGTERM], err
    assert err.strip().splitlines() == [
        f"ebmtrack train: {WORDS[signal.SIGTERM]}; the last complete checkpoint is kept in "
        f"{out}; add --resume to continue"
    ]
