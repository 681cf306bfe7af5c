"""The record and the plot of the box heads against the number of distinct training pairs.

The record is a CSV in long form, one measured number per row (``loss,pairs,measure,value,note``),
kept in ``docs/results/head-training-scale.csv``: the runs themselves live outside the repository,
so the record is what survives them. Rows are added from the files the runs and benchmarks write,
never typed in:

- ``add-validation``: every validation row of a run's ``metrics.csv`` (rank correlation and top-1
  IoU on the run's held-out pairs), at the pairs the run had seen by then;
- ``add-bench``: a ``benchmarks/bench_head.py`` report (ceiling, mean IoU after refinement and
  rank correlation on the held-out clips);
- ``add-eval``: the tracker's AUC and OP75 on the test sequences, each the mean over the
  ``ebmtrack eval`` folders given (one per tracker seed).

``paired`` compares two heads (or trackers) per sequence: each sequence's AUC averaged over the
seeds of each side, the mean of the per-sequence differences with its standard error over
sequences, and on how many sequences the first side is better. It reads eval folders and writes
nothing.

The rows of the first MSE run (epochs 1-6, December 2, AMD EPYC), whose files are gone, were
transcribed once from the page's tables; their note says so.

A row of the same loss, pairs and measure is replaced. ``plot`` draws the three panels (held-out
validation pairs, held-out clips, tracking) against the pairs on a log axis, one colour per loss.

Usage::

    python studies/head_scale.py add-validation --loss mse \\
        --metrics runs/pack-stream-mse/metrics.csv
    python studies/head_scale.py add-bench --loss mse --pairs 655360 \\
        --report runs/bench_head/mse-e40/report.json
    python studies/head_scale.py add-eval --loss mse --pairs 655360 --tracker atom-iounet \\
        runs/eval/mse-e40-s0 runs/eval/mse-e40-s1 runs/eval/mse-e40-s2
    python studies/head_scale.py plot
    python studies/head_scale.py paired \
        --a runs/eval/nce-e13-s0 runs/eval/nce-e13-s1 runs/eval/nce-e13-s2 \
        --b runs/eval/mse-e13-s0 runs/eval/mse-e13-s1 runs/eval/mse-e13-s2 --tracker atom-iounet
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

from ebmtrack.files import write_atomic

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "results" / "head-training-scale.csv"
FIGURE = ROOT / "docs" / "results" / "figures" / "head-training-scale.png"
FIELDS = ("loss", "pairs", "measure", "value", "note")
LOSSES = ("mse", "nce+")
PANELS = (
    (
        "held-out validation pairs",
        (("val_rank_corr", "rank corr.", "-"), ("val_top1_iou", "top-1 IoU", "--")),
    ),
    (
        "held-out clips",
        (
            ("clips_ceiling", "ceiling", "-"),
            ("clips_refined_iou", "refined IoU", "--"),
            ("clips_rank_corr", "rank corr.", ":"),
        ),
    ),
    (
        "the 13 test sequences, AUC",
        (("auc13_atom-iounet", "atom-iounet", "-"), ("auc13_atom-polished", "atom-polished", "--")),
    ),
)
TICKS = [16384 * 2**i for i in range(6)]
"""Epochs 1, 2, 4, ... 32 of the runs (16,384 pairs an epoch)."""
COLOURS = {"mse": "tab:blue", "nce+": "tab:red"}


def read_record(path: Path) -> list[dict[str, str]]:
    """The record's rows (none if the file does not exist)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def merge(rows: list[dict[str, str]], new: list[dict[str, str]]) -> list[dict[str, str]]:
    """``rows`` with ``new`` added; a new row replaces one of the same loss, pairs and measure.
    Sorted by loss, measure and pairs."""
    keyed = {(r["loss"], int(r["pairs"]), r["measure"]): r for r in rows}
    for r in new:
        keyed[(r["loss"], int(r["pairs"]), r["measure"])] = r
    return [keyed[k] for k in sorted(keyed, key=lambda k: (k[0], k[2], k[1]))]


def write_record(path: Path, rows: list[dict[str, str]]) -> None:
    """Write the rows to ``path`` through a temporary file (an interrupted write keeps the old
    one)."""

    def write(tmp: Path) -> None:
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)

    write_atomic(path, write)


def row(loss: str, pairs: int, measure: str, value: float, note: str) -> dict[str, str]:
    return {
        "loss": loss,
        "pairs": str(pairs),
        "measure": measure,
        "value": f"{value:.4f}",
        "note": note,
    }


def validation_rows(metrics: Path, loss: str, note: str) -> list[dict[str, str]]:
    """Rank correlation and top-1 IoU of every validation row of a run's ``metrics.csv``, at the
    pairs seen by the end of that epoch (the training row of the same epoch says how many)."""
    with metrics.open(newline="") as f:
        table = list(csv.DictReader(f))
    seen = {
        r["epoch"]: int(r["pairs_seen"])
        for r in table
        if r["split"] == "train" and r.get("pairs_seen")
    }
    out = []
    for r in table:
        if r["split"] != "val" or r["epoch"] not in seen:
            continue
        for measure, column in (("val_rank_corr", "rank_corr"), ("val_top1_iou", "top1_iou")):
            if r.get(column):
                out.append(
                    row(
                        loss,
                        seen[r["epoch"]],
                        measure,
                        float(r[column]),
                        f"{note} epoch {r['epoch']}",
                    )
                )
    return out


def bench_rows(report: Path, loss: str, pairs: int, note: str) -> list[dict[str, str]]:
    """Ceiling, refined mean IoU and rank correlation on the held-out clips of a bench_head
    report."""
    clips = json.loads(report.read_text())["clips"]
    return [
        row(loss, pairs, "clips_ceiling", clips["ceiling"], note),
        row(loss, pairs, "clips_refined_iou", clips["refined_iou"], note),
        row(loss, pairs, "clips_rank_corr", clips["rank_corr"], note),
    ]


def _tracker_runs(folders: list[Path], tracker: str) -> list[dict]:
    """The metrics of ``tracker`` in each eval folder."""
    runs = []
    for folder in folders:
        trackers = json.loads((folder / "metrics.json").read_text())["trackers"]
        if tracker not in trackers:
            raise ValueError(f"{folder} holds no run of {tracker} (it has {', '.join(trackers)})")
        runs.append(trackers[tracker])
    return runs


def paired(a: list[Path], tracker_a: str, b: list[Path], tracker_b: str) -> dict[str, object]:
    """Side a against side b, per sequence (AUC and OP75 in %, each side's sequence averaged over
    its folders, one per tracker seed). Returns ``sequences`` (name -> (a, b) AUC), the mean of
    the differences a - b and its standard error over sequences, the number of sequences where
    a is better, and each side's mean AUC and OP75. Both sides must hold the same sequences."""
    sides = []
    for folders, tracker in ((a, tracker_a), (b, tracker_b)):
        runs = _tracker_runs(folders, tracker)
        names = set(runs[0]["sequences"])
        if any(set(r["sequences"]) != names for r in runs):
            raise ValueError(f"the folders of {tracker} do not hold the same sequences")
        sides.append(
            {
                q: tuple(
                    100 * statistics.mean(r["sequences"][q][m] for r in runs)
                    for m in ("auc", "op75")
                )
                for q in names
            }
        )
    if set(sides[0]) != set(sides[1]):
        raise ValueError("the two sides do not hold the same sequences")
    names = sorted(sides[0])
    if len(names) < 2:
        raise ValueError("a paired comparison needs at least two sequences")
    diffs = [sides[0][q][0] - sides[1][q][0] for q in names]
    return {
        "sequences": {q: (sides[0][q][0], sides[1][q][0]) for q in names},
        "mean_diff": statistics.mean(diffs),
        "se": statistics.stdev(diffs) / len(diffs) ** 0.5,
        "better": sum(d > 0 for d in diffs),
        "auc": tuple(statistics.mean(v[0] for v in side.values()) for side in sides),
        "op75": tuple(statistics.mean(v[1] for v in side.values()) for side in sides),
    }


def eval_rows(
    folders: list[Path], tracker: str, loss: str, pairs: int, note: str
) -> list[dict[str, str]]:
    """Mean AUC and OP75 (in %) of ``tracker`` over the eval folders (one per tracker seed)."""
    overall = [r["overall"] for r in _tracker_runs(folders, tracker)]
    note = f"{note}; {len(folders)} seeds"
    return [
        row(
            loss, pairs, f"auc13_{tracker}", 100 * statistics.mean(o["auc"] for o in overall), note
        ),
        row(
            loss,
            pairs,
            f"op75_13_{tracker}",
            100 * statistics.mean(o["op75"] for o in overall),
            note,
        ),
    ]


def print_paired(result: dict, tracker_a: str, tracker_b: str) -> None:
    print(f"{'sequence':16s} {'a':>6s} {'b':>6s} {'a - b':>6s}")
    for name, (a, b) in result["sequences"].items():
        print(f"{name:16s} {a:6.1f} {b:6.1f} {a - b:+6.1f}")
    n = len(result["sequences"])
    print(
        f"a ({tracker_a}) {result['auc'][0]:.1f} AUC, OP75 {result['op75'][0]:.1f}; "
        f"b ({tracker_b}) {result['auc'][1]:.1f}, OP75 {result['op75'][1]:.1f}"
    )
    print(
        f"a - b: {result['mean_diff']:+.2f} AUC (SE {result['se']:.2f} over {n} sequences), "
        f"a better on {result['better']} of {n}; OP75 {result['op75'][0] - result['op75'][1]:+.1f}"
    )


def plot(rows: list[dict[str, str]], out: Path, references: dict[str, float]) -> None:
    """The three panels against the pairs (log axis); ``references``: horizontal lines on the
    tracking panel (label -> AUC in %)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13.0, 3.9), dpi=100)
    axes = fig.subplots(1, len(PANELS))
    for ax, (title, measures) in zip(axes, PANELS):
        for loss in LOSSES:
            for measure, label, style in measures:
                points = sorted(
                    (int(r["pairs"]), float(r["value"]))
                    for r in rows
                    if r["loss"] == loss and r["measure"] == measure
                )
                if points:
                    xs, ys = zip(*points)
                    ax.plot(
                        xs,
                        ys,
                        style,
                        marker="o",
                        markersize=3,
                        color=COLOURS[loss],
                        label=f"{loss.upper()} {label}",
                    )
        if any(measure.startswith("auc13_") for measure, _, _ in measures):
            for i, (label, value) in enumerate(references.items()):
                ax.axhline(
                    value, color="grey", linestyle=("-.", ":")[i % 2], linewidth=1, label=label
                )
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(TICKS, labels=[f"{t // 1024}k" for t in TICKS])
        ax.set_xlabel("distinct training pairs")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--record", type=Path, default=RECORD, help="the record (CSV)")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("add-validation", help="a run's validation rows")
    a.add_argument("--metrics", type=Path, required=True, help="the run's metrics.csv")
    b = sub.add_parser("add-bench", help="a bench_head.py report")
    b.add_argument("--report", type=Path, required=True, help="report.json of bench_head.py")
    e = sub.add_parser(
        "add-eval", help="a tracker's runs on the test sequences, one folder per seed"
    )
    e.add_argument("--tracker", required=True)
    e.add_argument("folders", type=Path, nargs="+", help="ebmtrack eval output folders")
    for s in (a, b, e):
        s.add_argument("--loss", required=True, choices=LOSSES)
        s.add_argument(
            "--note", default="", help="where the number comes from (run, epoch, date, CPU)"
        )
    for s in (b, e):
        s.add_argument("--pairs", type=int, required=True, help="distinct pairs the head saw")
    c = sub.add_parser("paired", help="two sides per sequence, each over its seeds' folders")
    c.add_argument("--a", type=Path, nargs="+", required=True, help="side a's eval folders")
    c.add_argument("--b", type=Path, nargs="+", required=True, help="side b's eval folders")
    c.add_argument("--tracker", help="the tracker of both sides")
    c.add_argument("--tracker-a", help="side a's tracker (instead of --tracker)")
    c.add_argument("--tracker-b", help="side b's tracker (instead of --tracker)")
    q = sub.add_parser("plot", help="the figure")
    q.add_argument("--out", type=Path, default=FIGURE)
    q.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="LABEL=AUC",
        help="a horizontal line on the tracking panel, e.g. 'atom=66.4'",
    )
    args = p.parse_args(argv)

    if args.command == "plot":
        references = {}
        for item in args.reference:
            label, _, value = item.rpartition("=")
            try:
                references[label] = float(value)
            except ValueError:
                p.error(f"--reference: {item!r} is not LABEL=AUC")
        rows = read_record(args.record)
        if not rows:
            p.error(f"--record: {args.record} holds no rows")
        plot(rows, args.out, references)
        print(f"wrote {args.out}")
        return 0
    given = [
        ("--metrics", getattr(args, "metrics", None)),
        ("--report", getattr(args, "report", None)),
    ]
    given += [("folders", folder) for folder in getattr(args, "folders", [])]
    given += [("--a", folder) for folder in getattr(args, "a", [])]
    given += [("--b", folder) for folder in getattr(args, "b", [])]
    for flag, path in given:
        if path is not None and not path.exists():
            p.error(f"{flag}: {path} does not exist")
    if getattr(args, "pairs", 1) <= 0:
        p.error("--pairs must be positive")
    if args.command == "paired":
        tracker_a = args.tracker_a or args.tracker
        tracker_b = args.tracker_b or args.tracker
        if not tracker_a or not tracker_b:
            p.error("paired: give --tracker, or --tracker-a and --tracker-b")
    try:
        if args.command == "paired":
            print_paired(paired(args.a, tracker_a, args.b, tracker_b), tracker_a, tracker_b)
            return 0
        if args.command == "add-validation":
            new = validation_rows(args.metrics, args.loss, args.note)
        elif args.command == "add-bench":
            new = bench_rows(args.report, args.loss, args.pairs, args.note)
        else:
            new = eval_rows(args.folders, args.tracker, args.loss, args.pairs, args.note)
    except KeyError as err:
        print(
            f"error: the input has no field {err}: not a file of the kind {args.command} reads",
            file=sys.stderr,
        )
        return 2
    except json.JSONDecodeError as err:
        print(f"error: the input is not JSON ({err})", file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    write_record(args.record, merge(read_record(args.record), new))
    print(f"{len(new)} rows into {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
