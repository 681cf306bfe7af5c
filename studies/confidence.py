"""Fit the trackers' confidence calibrators on training data, and measure them.

Three steps, each resumable (finished pieces are kept in ``OUT`` and skipped)::

    python studies/confidence.py collect --out runs/confidence --seeds 0,1
    python studies/confidence.py fit --out runs/confidence --ship src/ebmtrack/weights
    python studies/confidence.py report --out runs/confidence --eval runs/confidence-test-*

``collect`` tracks the **training** sequences only (:func:`training_sets`: the training pack's
clips of 50 consecutive frames, its tracks of 30 frames spread over each video, and generated
sequences) with each tracker and tracker seed, and stores per frame the confidence features
(:mod:`ebmtrack.tracking.confidence`), the raw score and the IoU with the ground truth.
``fit`` splits them by a fixed rule (:func:`is_held_out`), fits on the rest, measures on the
held-out part whether the isotonic step helps, refits on everything and writes the calibrators
(one per tracker, named after it; for every tracker also ``NAME:score``, the same procedure on
the raw score alone, the fair baseline) to ``OUT/calibrators.json`` and, with ``--ship``, those
of our trackers to the package's shipped file (the entries of trackers not fitted in that call
stay as they were). ``report`` scores the test results of
``ebmtrack eval`` runs (which record each frame's score and confidence).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequence
from ebmtrack.evaluation.calibration import IOU_RIGHT, calibration_summary, frame_ious
from ebmtrack.files import write_atomic
from ebmtrack.process import configure_threads
from ebmtrack.tracking.calibrator import (
    Calibrator,
    fit_calibrator,
    load_calibrators,
    save_calibrators,
)
from ebmtrack.tracking.confidence import DIRECTIONS, FEATURES, feature_matrix
from ebmtrack.tracking.init_box import clip_init_box
from ebmtrack.tracking.registry import create_tracker
from ebmtrack.training.sources.pack import PACK_HOLDOUT

__all__ = [
    "collect_sequence",
    "fit_all",
    "is_held_out",
    "main",
    "plot_reliability",
    "report",
    "test_predictions",
    "training_sets",
    "wrong_on_target",
]

TRAIN = Path(__file__).resolve().parents[2] / "shared" / "data" / "train"
GENERATED_SEED = 2031
OURS = ("atom", "dimp-nce+")


def training_sets(train: Path = TRAIN, generated: int = 20, frames: int = 100) -> dict:
    """Set name -> sequences: the pack's ``clips`` and ``tracks`` (when ``train`` has them) and
    ``generated`` sequences of ``frames`` frames (seeds (2031, i))."""
    sets = {}
    for name, folder in (("clips", train / "clips"), ("tracks", train / "sequences")):
        if folder.is_dir():
            sets[name] = load_folder(folder)
    config = SyntheticConfig(num_frames=frames)
    sets["generated"] = [
        SyntheticSequence(f"gen{i:03d}", config, seed=(GENERATED_SEED, i)) for i in range(generated)
    ]
    return sets


def is_held_out(set_name: str, sequence: str) -> bool:
    """The fixed split: held out are the pack's ``PACK_HOLDOUT`` videos (their tracks and clips,
    ``NAME`` and ``NAME_b``) and every fourth generated sequence (index 3, 7, ...)."""
    if set_name == "generated":
        return int(sequence[3:]) % 4 == 3
    return sequence.removesuffix("_b") in PACK_HOLDOUT


def collect_sequence(tracker, sequence) -> dict[str, np.ndarray]:
    """Track ``sequence`` with ``tracker``: per frame the features (N, F) (NaN rows for frame
    0 and for trackers without them), the raw score (N,), the confidence (N,), the IoU (N,;
    NaN where not scored) and the boxes (N, 4)."""
    first = sequence.frame(0)
    init_box = clip_init_box(sequence.init_box, first.shape, f"{sequence.name} init box")
    n = len(sequence)
    boxes = np.empty((n, 4))
    features = np.full((n, len(FEATURES)), np.nan)
    scores, confidence = np.full(n, np.nan), np.full(n, np.nan)
    tracker.initialize(first, init_box)
    boxes[0] = init_box
    estimator = getattr(tracker, "confidence_estimator", None)
    for index in range(1, n):
        result = tracker.track(sequence.frame(index))
        boxes[index] = result.box
        scores[index], confidence[index] = result.score, result.confidence
        if estimator is not None:
            features[index] = feature_matrix([estimator.last_features])[0]
    return {
        "features": features,
        "score": scores,
        "confidence": confidence,
        "iou": frame_ious(boxes, sequence),
        "boxes": boxes,
    }


def _save_npz(path: Path, arrays: dict) -> None:
    write_atomic(path, lambda tmp: np.savez(tmp, **arrays))


def collect(
    out: Path, trackers: list[str], seeds: list[int], sets: dict, peers: Path | None
) -> None:
    """Run :func:`collect_sequence` for every tracker, seed and sequence of ``sets`` not yet in
    ``OUT/TRACKER/seedS/SET__SEQ.npz`` (``peers``: NanoTrack's model folder)."""
    for name in trackers:
        for seed in seeds if name in OURS else seeds[:1]:
            folder = out / name / f"seed{seed}"
            for set_name, sequences in sets.items():
                for sequence in sequences:
                    path = folder / f"{set_name}__{sequence.name}.npz"
                    if path.is_file():
                        continue
                    kwargs = {"seed": seed, "calibrator": None} if name in OURS else {}
                    if name == "nanotrack":
                        kwargs["model_dir"] = peers
                    tic = time.perf_counter()
                    arrays = collect_sequence(create_tracker(name, **kwargs), sequence)
                    _save_npz(path, arrays)
                    print(
                        f"{name} seed {seed} {set_name}/{sequence.name}: {len(sequence)} frames "
                        f"{time.perf_counter() - tic:.1f} s",
                        flush=True,
                    )


def load_collected(out: Path, tracker: str) -> dict[str, np.ndarray]:
    """Every collected frame of ``tracker`` that is scored: features (N, F), score (N,), iou
    (N,), held_out (N,) bool, sequence (N,) 'seedS/SET__SEQ'."""
    parts = {k: [] for k in ("features", "score", "iou", "held_out", "sequence")}
    for path in sorted((out / "features" / tracker).glob("seed*/*.npz")):
        data = np.load(path)
        keep = np.isfinite(data["iou"])
        set_name, _, sequence = path.stem.partition("__")
        parts["features"].append(data["features"][keep])
        parts["score"].append(data["score"][keep])
        parts["iou"].append(data["iou"][keep])
        parts["held_out"].append(np.full(keep.sum(), is_held_out(set_name, sequence)))
        parts["sequence"].append(np.full(keep.sum(), f"{path.parent.name}/{path.stem}"))
    if not parts["iou"]:
        raise FileNotFoundError(f"no collected features of {tracker} under {out / 'features'}")
    return {k: np.concatenate(v) for k, v in parts.items()}


def _fit_one(x, right, held, names, directions, info) -> tuple[Calibrator, dict]:
    """Fit on the training part with and without the isotonic step, keep the one with the lower
    held-out ECE, and refit it on all frames. Returns it and the held-out numbers."""
    trial = {}
    for isotonic in (False, True):
        calibrator = fit_calibrator(x[~held], right[~held], names, directions, isotonic=isotonic)
        trial[isotonic] = calibration_summary(
            calibrator.predict(x[held]), np.where(right[held], 1.0, 0.0)
        )
    isotonic = trial[True]["ece"] < trial[False]["ece"]
    info = {**info, "isotonic": bool(isotonic), "frames": int(len(right))}
    final = fit_calibrator(x, right, names, directions, isotonic=isotonic, info=info)
    return final, {"logistic": trial[False], "logistic+isotonic": trial[True]}


def fit_all(out: Path, trackers: list[str]) -> tuple[dict[str, Calibrator], dict]:
    """The calibrators of ``trackers`` from ``OUT/features`` (see the module docstring) and the
    held-out numbers of each."""
    calibrators, held_out = {}, {}
    for name in trackers:
        data = load_collected(out, name)
        right, held = data["iou"] > IOU_RIGHT, data["held_out"]
        info = {
            "tracker": name,
            "backbone": "mobilenetv2",
            "event": f"IoU > {IOU_RIGHT}",
            "data": "training pack clips and tracks, generated sequences",
            "seeds": sorted({s.split("/")[0] for s in data["sequence"]}),
        }
        variants = {f"{name}:score": (data["score"][:, None], ("score",), {"score": 1})}
        if name in OURS:
            variants[name] = (data["features"], FEATURES, DIRECTIONS)
        for key, (x, names, directions) in variants.items():
            calibrators[key], held_out[key] = _fit_one(x, right, held, names, directions, info)
            held_out[key]["frames_train"] = int((~held).sum())
            held_out[key]["frames_held_out"] = int(held.sum())
    return calibrators, held_out


def test_predictions(
    out: Path, calibrators: dict[str, Calibrator], only: list[str] | None = None
) -> dict:
    """``OUT/test`` (collect-test) through the calibrators: ``{method: {seed: (p, iou,
    sequences)}}`` with method ``TRACKER`` (its features) or ``TRACKER:score`` (its raw score
    alone), p and iou (N,) over every scored frame of the test sequences (``only``: of these)."""
    methods: dict = {}
    for folder in sorted((out / "test").glob("*/seed*")):
        tracker, seed = folder.parent.name, folder.name
        files = sorted(folder.glob("*.npz"))
        if only is not None:
            files = [f for f in files if f.stem.partition("__")[2] in only]
        data = [np.load(f) for f in files]
        iou = np.concatenate([d["iou"] for d in data])
        keep = np.isfinite(iou)
        inputs = {
            tracker: np.concatenate([d["features"] for d in data]),
            f"{tracker}:score": np.concatenate([d["score"] for d in data])[:, None],
        }
        for method, x in inputs.items():
            if method in calibrators:
                p = calibrators[method].predict(x[keep])
                methods.setdefault(method, {})[seed] = (p, iou[keep], len(files))
    return methods


def plot_reliability(methods: dict, path: Path) -> None:
    """Reliability diagram (frames pooled over seeds) of every method, as a PNG."""
    from matplotlib.figure import Figure

    from ebmtrack.evaluation.calibration import reliability

    fig = Figure(figsize=(5.5, 4.5), dpi=110)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="0.6", linewidth=1, label="perfect")
    for method, seeds in sorted(methods.items()):
        p = np.concatenate([v[0] for v in seeds.values()])
        right = np.concatenate([v[1] for v in seeds.values()]) > IOU_RIGHT
        counts, mean_conf, share = reliability(p, right)
        full = counts >= 10
        style = "-" if ":" not in method else "--"
        ax.plot(mean_conf[full], share[full], style, marker="o", markersize=3, label=method)
    ax.set(
        xlabel="predicted probability of IoU > 0.5",
        ylabel="share of frames with IoU > 0.5",
        title="test sequences, all frames, pooled over seeds",
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.4)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def wrong_on_target(out: Path, test: Path) -> dict[str, float]:
    """Per ``TRACKER/seedS`` of ``OUT/test``: the share of its wrong boxes (IoU <= 0.5) whose
    centre lies inside the ground-truth box (on the target, wrong size or shape)."""
    truth = {s.name: s.ground_truth for s in load_folder(test)}
    shares = {}
    for folder in sorted((out / "test").glob("*/seed*")):
        wrong = inside = 0
        for path in sorted(folder.glob("*.npz")):
            data = np.load(path)
            gt = truth[path.stem.partition("__")[2]]
            bad = np.isfinite(data["iou"]) & (data["iou"] <= IOU_RIGHT)
            centre = data["boxes"][bad, :2] + data["boxes"][bad, 2:] / 2
            box = gt[bad]
            within = (centre >= box[:, :2]) & (centre <= box[:, :2] + box[:, 2:])
            inside += int(np.all(within, axis=1).sum())
            wrong += int(bad.sum())
        shares[f"{folder.parent.name}/{folder.name}"] = inside / wrong if wrong else math.nan
    return shares


def report(out: Path, figure: Path | None, only: list[str] | None = None) -> dict:
    """Per method: each seed's :func:`calibration_summary` (with the mean confidence) and their
    mean over the test sequences (``only``: these); writes the reliability diagram to ``figure``
    (unless None) and ``OUT/test_report.json`` (``test_report_only.json`` with ``only``)."""
    calibrators = load_calibrators(out / "calibrators.json")
    methods = test_predictions(out, calibrators, only)
    if figure is not None:
        plot_reliability(methods, figure)
    table = {}
    for method, seeds in methods.items():
        rows = {
            seed: {**calibration_summary(p, iou), "mean_confidence": float(p.mean())}
            for seed, (p, iou, _) in seeds.items()
        }
        rows = {seed: {**row, "sequences": seeds[seed][2]} for seed, row in rows.items()}
        keys = [k for k in next(iter(rows.values())) if k != "sequences"]
        mean = {k: float(np.mean([r[k] for r in rows.values()])) for k in keys}
        table[method] = {"seeds": rows, "mean": mean}
    name = "test_report.json" if only is None else "test_report_only.json"
    (out / name).write_text(json.dumps(_jsonable(table), indent=1) + "\n")
    return table


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("collect", "collect-test", "fit", "report"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trackers", default="atom,dimp-nce+,nanotrack")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--generated", type=int, default=20, help="generated sequences")
    parser.add_argument("--train", type=Path, default=TRAIN, help="the training pack folder")
    parser.add_argument(
        "--peer-models", type=Path, default=TRAIN.parent.parent / "peers", help="NanoTrack's"
    )
    parser.add_argument("--ship", type=Path, help="write our trackers' calibrators here")
    parser.add_argument(
        "--test", type=Path, help="collect-test: the test sequences (features kept apart)"
    )
    parser.add_argument("--only", help="report: only these comma-separated test sequences")
    parser.add_argument(
        "--figure", type=Path, default=Path("docs/results/figures/confidence-reliability.png")
    )
    args = parser.parse_args(argv)
    configure_threads(1)
    trackers = [t for t in args.trackers.split(",") if t]
    if args.step == "collect":
        seeds = [int(s) for s in args.seeds.split(",")]
        sets = training_sets(args.train, args.generated)
        collect(args.out / "features", trackers, seeds, sets, args.peer_models)
        return
    if args.step == "collect-test":
        if args.test is None:
            parser.error("collect-test needs --test")
        seeds = [int(s) for s in args.seeds.split(",")]
        sets = {"test": load_folder(args.test)}
        collect(args.out / "test", trackers, seeds, sets, args.peer_models)
        return
    if args.step == "report":
        only = [n for n in args.only.split(",") if n] if args.only else None
        table = report(args.out, None if only else args.figure, only)
        if args.test is not None:
            shares = wrong_on_target(args.out, args.test)
            print("wrong boxes centred on the target:", json.dumps(shares, indent=1))
        for method, row in sorted(table.items()):
            mean = row["mean"]
            print(
                f"{method:20s} ECE {mean['ece']:.4f} AUROC {mean['auroc_wrong']:.3f} "
                f"lost P {mean['lost_precision']:.3f} R {mean['lost_recall']:.3f} "
                f"right {mean['share_right']:.3f} mean p {mean['mean_confidence']:.3f} "
                f"frames {mean['frames']:.0f} "
                f"seeds {len(row['seeds'])}"
            )
        return
    calibrators, held_out = fit_all(args.out, trackers)
    digest = save_calibrators(args.out / "calibrators.json", calibrators)
    (args.out / "held_out.json").write_text(json.dumps(_jsonable(held_out), indent=1) + "\n")
    print(json.dumps(_jsonable(held_out), indent=1))
    print(f"{args.out / 'calibrators.json'} sha256 {digest}")
    if args.ship is not None:
        from ebmtrack.weights import CONFIDENCE_CALIBRATORS

        # The trackers fitted now replace their entries; the others' stay as they shipped.
        target = args.ship / CONFIDENCE_CALIBRATORS
        shipped = load_calibrators(target) if target.exists() else {}
        shipped.update((k, c) for k, c in calibrators.items() if k in OURS)
        digest = save_calibrators(target, shipped)
        print(f"{args.ship / CONFIDENCE_CALIBRATORS} sha256 {digest} (CONFIDENCE_SHA256)")


if __name__ == "__main__":
    main()
