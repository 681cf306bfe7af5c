"""Fault injection: ``eval`` and ``train`` stopped by SIGINT (Ctrl-C, sent to the whole process
group) or SIGTERM (``kill``, ``timeout``, job schedulers: the command alone) at random points,
then run again until they finish. Each stop is one line and exit 130 / 143, leaves no process
behind, and the final results equal those of a run that was never stopped."""

from __future__ import annotations

import csv
import random
import signal
import time

import pytest
from cli_helpers import ebmtrack, generated_sequences, interrupt
from safetensors.numpy import load_file

STOPS = [(signal.SIGINT, 1), (signal.SIGTERM, 2)]
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)"}


def _run_with_stops(args, out, signum, seed, ready, seconds, note):
    """Stop ``ebmtrack ARGS`` twice at random points within ``seconds`` of ``ready()``, then
    rerun it to the end. Returns how many times it was stopped."""
    rng = random.Random(seed)
    for attempt in range(4):
        if attempt < 2:
            done, left = interrupt(args, signum, rng.uniform(0, seconds), ready=ready)
        else:
            done, left = interrupt(args, signum, 600)  # to the end
        assert left == [], f"processes left after {signum.name}: {left}"
        if done.returncode == 0:
            return attempt
        assert done.returncode == EXIT[signum], done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert lines == [f"ebmtrack {args[0]}: {WORDS[signum]}; {note.format(out=out)}"]
        assert not list(out.rglob("*.tmp")), "a temporary file was left behind"
    raise AssertionError("never finished")


@pytest.fixture(scope="module")
def eval_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    data = generated_sequences(root / "data", count=2, frames=40)
    args = ["eval", data, "--trackers", "kcf,csrt", "--workers", "2", "--no-progress"]
    start = time.monotonic()
    done = ebmtrack(*args, "--out", root / "reference")
    assert done.returncode == 0, done.stderr
    return root, args, time.monotonic() - start


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "seed"), STOPS)
def test_eval_stopped_and_resumed_equals_an_uninterrupted_run(eval_reference, signum, seed):
    root, args, seconds = eval_reference
    out = root / f"{signum.name}-{seed}"
    stops = _run_with_stops(
        [*args, "--out", out],
        out,
        signum,
        seed,
        ready=lambda: (out / "results" / "csrt" / "options.json").is_file(),
        seconds=seconds / 2,  # the workers' start and the tracking: the reference took `seconds`
        note="finished sequences are kept in {out}; the same command resumes",
    )
    assert stops >= 1
    reference = root / "reference" / "results"
    boxes = sorted(p.relative_to(reference) for p in reference.rglob("Square?.txt"))
    assert len(boxes) == 4
    for name in boxes:
        assert (out / "results" / name).read_text() == (reference / name).read_text(), name


TRAIN = ["--preset", "synthetic-smoke", "--epochs", "3", "--samples-per-epoch", "8"]
TRAIN += ["--batch-size", "4", "--set", "trainer.val_samples=4", "--threads", "1", "--no-progress"]


def _losses(run):
    with open(run / "metrics.csv") as handle:
        return [(r["epoch"], r["split"], float(r["loss"])) for r in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def train_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    start = time.monotonic()
    done = ebmtrack("train", "--out", root / "reference", *TRAIN)
    assert done.returncode == 0, done.stderr
    return root, time.monotonic() - start


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "seed"), STOPS)
def test_train_stopped_and_resumed_equals_an_uninterrupted_run(train_reference, signum, seed):
    root, seconds = train_reference
    out = root / f"{signum.name}-{seed}"
    rng = random.Random(seed)
    stops = 0
    for _ in range(2):  # two stops at random points after the run folder exists
        resume = ["--resume"] if (out / "config.yaml").is_file() else []
        done, left = interrupt(
            ["train", "--out", out, *TRAIN, *resume],
            signum,
            rng.uniform(0, seconds / 2),
            ready=lambda: (out / "config.yaml").is_file(),
        )
        assert left == []
        if done.returncode == 0:
            break
        stops += 1
        assert done.returncode == EXIT[signum], done.stderr
        assert done.stderr.strip().splitlines()[-1] == (
            f"ebmtrack train: {WORDS[signum]}; the last complete checkpoint is kept in {out}; "
            "add --resume to continue"
        )
    assert stops >= 1
    if not (out / "iou_net.safetensors").is_file():
        done = ebmtrack("train", "--out", out, *TRAIN, "--resume")
        assert done.returncode == 0, done.stderr
    expected = load_file(root / "reference" / "iou_net.safetensors")
    got = load_file(out / "iou_net.safetensors")
    assert expected.keys() == got.keys()
    for key in expected:
        assert abs(expected[key] - got[key]).max() <= 1e-6, key
    assert [row[:2] for row in _losses(out)] == [row[:2] for row in _losses(root / "reference")]
    for (_, _, a), (_, _, b) in zip(_losses(out), _losses(root / "reference")):
        assert abs(a - b) <= 1e-6
