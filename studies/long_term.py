"""Long-term tracking on spliced sequences: ``atom-lt`` against ``atom`` and OpenCV's NanoTrack.

Sets of sequences (``--set``):

- ``test``: the 13 test sequences, each spliced twice (:func:`ebmtrack.data.splice.splice_set`:
  30 % of its frames replaced by another test sequence's, and 30 % covered by a pasted patch):
  for reporting only.
- ``train``: the same splices of the training pack's clips (50 frames each), with the other
  clips as donors: where settings are chosen (``--setting``).
- ``ordinary``: the 13 test sequences unchanged (does the long-term mode cost accuracy there?).

Each (tracker, seed, sequence) run is kept in ``OUT/runs/SET/LABEL/seedS/NAME.npz`` (boxes,
scores, statuses, seconds per frame), so an interrupted study resumes. ``OUT/SET.json`` holds
the scores (:mod:`ebmtrack.evaluation.longterm`; the ordinary set also the OTB AUC of
:mod:`ebmtrack.evaluation.scoring`) and ``OUT/SET.md`` the table. Run::

    python studies/long_term.py --out runs/long-term --set train --trackers atom-lt \
        --setting redetect_threshold=0.3 --setting redetect_threshold=0.5
    python studies/long_term.py --out runs/long-term --set test --seeds 0,1,2 \
        --plot docs/results/figures/long-term/f-score.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ebmtrack.api import load_tracker
from ebmtrack.data.datasets import Sequence
from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.splice import splice_set
from ebmtrack.evaluation.longterm import LongTermRun, score_long_term, track_long_term
from ebmtrack.evaluation.scoring import average, score_run
from ebmtrack.files import write_atomic
from ebmtrack.process import configure_threads

SETS = ("test", "train", "ordinary")
SPLICE_FRACTION = 0.3
SPLICE_SEED = 0
# Each tracker as a user gets it (``ebmtrack.load_tracker``): ours in the torch-free runtime, the
# shipped exports (float32; the torch trackers give the same boxes, tests/lite).
TRACKERS = {
    "atom-lt": ("atom-lt", {}),
    "atom": ("atom", {}),
    "nanotrack": ("nanotrack", {}),
}
SEEDED = ("atom-lt", "atom")


def build_set(name: str, sequences: Path, clips: Path, limit: int | None) -> list[Sequence]:
    """The sequences of set ``name`` (see the module docstring); ``limit``: the first N hosts."""
    hosts = load_folder(clips if name == "train" else sequences)
    hosts = hosts[:limit] if limit else hosts
    if name == "ordinary":
        return hosts
    return splice_set(hosts, SPLICE_FRACTION, SPLICE_SEED)


def _run_path(out: Path, set_name: str, label: str, seed: int, sequence: str) -> Path:
    return out / "runs" / set_name / label / f"seed{seed}" / f"{sequence}.npz"


def load_run(path: Path) -> LongTermRun:
    with np.load(path, allow_pickle=False) as data:
        return LongTermRun(data["boxes"], data["scores"], data["statuses"], data["times"])


def run_tracker(
    out: Path,
    set_name: str,
    label: str,
    tracker: str,
    options: dict,
    seed: int,
    sequences: list[Sequence],
) -> list[tuple[Sequence, LongTermRun]]:
    """Run (or load) ``tracker`` with ``options`` on every sequence; one tracker per sequence."""
    runs = []
    for sequence in sequences:
        path = _run_path(out, set_name, label, seed, sequence.name)
        if not path.is_file():
            seeded = {"seed": seed} if tracker in SEEDED else {}
            run = track_long_term(load_tracker(tracker, **options, **seeded), sequence)
            arrays = {k: getattr(run, k) for k in ("boxes", "scores", "times")}
            arrays["statuses"] = run.statuses.astype("U16")
            write_atomic(path, lambda tmp, arrays=arrays: np.savez(tmp, **arrays))
            print(f"{set_name} {label} seed {seed} {sequence.name}", flush=True)
        runs.append((sequence, load_run(path)))
    return runs


def _fps(runs: list[tuple[Sequence, LongTermRun]], lost: bool) -> float:
    times = [run.times[1:][(run.statuses[1:] == "lost") == lost] for _, run in runs]
    total = np.concatenate(times)
    return float(len(total) / total.sum()) if total.sum() > 0 else float("nan")


def summarize(runs: list[tuple[Sequence, LongTermRun]], ordinary: bool) -> dict:
    """The long-term scores of one tracker's runs, and for an ordinary set the OTB AUC."""
    score = score_long_term(runs)
    finite = [d for d in score.reacquire if np.isfinite(d)]
    row = {
        "f_score": score.f_score,
        "threshold": score.threshold,
        "precision": float(score.precision[score.best]),
        "recall": float(score.recall[score.best]),
        "median_reacquire": score.median_reacquire(),
        "reacquired": len(finite) / len(score.reacquire) if score.reacquire else float("nan"),
        "returns": len(score.reacquire),
        "auc_present": score.auc,
        "fps_tracked": _fps(runs, lost=False),
        "fps_lost": _fps(runs, lost=True),
        "lost_frames": int(sum(np.sum(run.statuses == "lost") for _, run in runs)),
        "curve": {"thresholds": score.thresholds.tolist(), "f": score.f.tolist()},
        "per_sequence": score.per_sequence,
    }
    if ordinary:
        row["auc"] = float(
            np.mean(average([score_run(run.boxes, seq) for seq, run in runs]).summary()["auc"])
        )
    return row


def _parse_setting(text: str) -> dict[str, float]:
    """``NAME=V[,NAME=V...]`` -> {NAME: V}."""
    setting = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            setting[name.strip()] = float(value)
        except ValueError:
            raise SystemExit(f"--setting: expected NAME=V[,NAME=V...], got {text!r}") from None
        if not sep:
            raise SystemExit(f"--setting: expected NAME=V[,NAME=V...], got {text!r}")
    return setting


def _labels(args) -> list[tuple[str, str, dict]]:
    """(label, tracker, options) of each tracker to run."""
    labels = []
    for name in args.trackers:
        tracker, options = TRACKERS[name]
        options = dict(options)
        if tracker == "nanotrack":
            options["model_dir"] = str(args.peers)
        if name == "atom-lt" and args.setting:
            for setting in args.setting:
                text = ",".join(f"{k}={v:g}" for k, v in setting.items())
                labels.append((f"atom-lt[{text}]", tracker, {**options, **setting}))
            continue
        labels.append((name, tracker, options))
    return labels


def write_table(out: Path, set_name: str, results: dict) -> str:
    """``OUT/SET.md``: one row per tracker (means over seeds) and the per-seed F-scores."""
    lines = [
        "| tracker | seeds | F-score | (Pr, Re) at tau | tau | median frames to re-acquire "
        "| re-acquired | AUC present | AUC (OTB) | FPS tracked / lost (1 thread) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, seeds in results.items():
        rows = list(seeds.values())

        def mean(key, rows=rows):
            return float(np.mean([r[key] for r in rows if key in r])) if key in rows[0] else None

        auc = mean("auc")
        per_seed = " / ".join(f"{r['f_score']:.3f}" for r in rows)
        lines.append(
            f"| {label} | {len(rows)} | {mean('f_score'):.3f} "
            f"({per_seed}) "
            f"| {mean('precision'):.3f}, {mean('recall'):.3f} | {mean('threshold'):.3f} "
            f"| {mean('median_reacquire'):.1f} | {100 * mean('reacquired'):.0f} % "
            f"of {rows[0]['returns']} | {100 * mean('auc_present'):.1f} "
            f"| {'-' if auc is None else f'{100 * auc:.1f}'} "
            f"| {mean('fps_tracked'):.1f} / {mean('fps_lost'):.1f} |"
        )
    text = "\n".join(lines) + "\n"
    (out / f"{set_name}.md").write_text(text)
    return text


def plot_f_scores(results: dict, path: Path, title: str) -> None:
    """F-score against the confidence threshold, seed 0 of each tracker."""
    fig = Figure(figsize=(6.0, 4.0), dpi=110)
    ax = fig.subplots()
    for label, seeds in results.items():
        curve = next(iter(seeds.values()))["curve"]
        thresholds = np.asarray(curve["thresholds"][1:-1])
        ax.plot(thresholds, curve["f"][1:-1], linewidth=1.6, label=label)
    ax.set(xlabel="confidence threshold (each tracker's own score)", ylabel="F-score")
    ax.set_title(title)
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.4)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="study folder")
    parser.add_argument("--set", choices=SETS, required=True, help="which sequences")
    parser.add_argument("--trackers", default=",".join(TRACKERS), help="comma-separated")
    parser.add_argument("--seeds", default="0", help="tracker seeds, e.g. 0,1,2")
    parser.add_argument(
        "--setting",
        action="append",
        help="an atom-lt setting to run instead of the default, e.g. redetect_threshold=0.5 "
        "(repeat for several)",
    )
    parser.add_argument("--limit", type=int, help="only the first N host sequences")
    parser.add_argument("--sequences", type=Path, default=Path("../shared/data/sequences"))
    parser.add_argument("--clips", type=Path, default=Path("../shared/data/train/clips"))
    parser.add_argument("--peers", type=Path, default=Path("../shared/peers"))
    parser.add_argument("--plot", type=Path, help="PNG of the F-score against the threshold")
    args = parser.parse_args(argv)
    args.trackers = [t.strip() for t in args.trackers.split(",") if t.strip()]
    unknown = sorted(set(args.trackers) - set(TRACKERS))
    if unknown:
        parser.error(f"--trackers: unknown {unknown}; valid: {', '.join(TRACKERS)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds: expected integers like 0,1,2, got {args.seeds!r}")
    args.setting = [_parse_setting(text) for text in args.setting or ()]
    if args.setting and args.set != "train":
        parser.error("--setting chooses settings: use --set train, never the test sequences")
    configure_threads(1)
    sequences = build_set(args.set, args.sequences, args.clips, args.limit)
    results = {}
    for label, tracker, options in _labels(args):
        tracker_seeds = seeds if tracker in SEEDED else seeds[:1]
        results[label] = {
            seed: summarize(
                run_tracker(args.out, args.set, label, tracker, options, seed, sequences),
                args.set == "ordinary",
            )
            for seed in tracker_seeds
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.set}.json").write_text(json.dumps(results, indent=1) + "\n")
    print(write_table(args.out, args.set, results), end="")
    if args.plot:
        title = f"F-score on the spliced {args.set} sequences, tracker seed {seeds[0]}"
        plot_f_scores(results, args.plot, title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
