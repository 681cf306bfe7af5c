"""``ebmtrack eval``: run trackers on a data set, score them, write a report."""

from __future__ import annotations

import argparse
import logging
import shlex
from pathlib import Path

from ebmtrack.cli.main import CLIError


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate trackers on a data set (one-pass evaluation)",
        description=(
            "Run trackers on every sequence of DATASET, write pytracking-style result files, "
            "then score them (AUC, precision, normalised precision, AO/SR, FPS) into "
            "OUT/report.md, OUT/metrics.json and success/precision plots. Finished sequences "
            "are skipped, so an interrupted evaluation resumes."
        ),
    )
    parser.add_argument(
        "dataset",
        help="data set folder (layout detected) or LAYOUT:PATH with LAYOUT one of otb, nfs, "
        "uav123, lasot, got10k, trackingnet, vot, folder",
    )
    parser.add_argument(
        "--trackers", required=True, type=_names, help="comma-separated tracker names"
    )
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--runs", type=int, default=1, help="runs per sequence (default 1)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (default 1), one thread each; 0 = in process",
    )
    parser.add_argument("--sequences", type=_names, help="only these comma-separated sequences")
    parser.add_argument(
        "--split",
        help="data-set split (lasot: test/train/all, got10k: train/val/test, "
        "trackingnet: test/train/TRAIN_k, uav123: UAV123/UAV20L)",
    )
    parser.add_argument(
        "--peer-models", type=Path, help="folder with the ONNX files of OpenCV's nanotrack / vit"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="TRACKER.KEY=VALUE",
        help="an option for one tracker's factory, e.g. atom.weights=iou_net.safetensors "
        "(VALUE read as YAML: numbers, true/false, strings); repeatable",
    )
    parser.add_argument(
        "--pack",
        choices=("got10k", "trackingnet"),
        help="also zip the results for the GOT-10k or TrackingNet server (OUT/TRACKER_FORMAT.zip)",
    )
    parser.add_argument(
        "--seen",
        type=_names,
        default=[],
        help="comma-separated sequences some model was trained on: marked in the report, which "
        "then opens with the scores over the other (unseen) sequences",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _tracker_options(items: list[str], trackers: list[str]) -> dict[str, dict]:
    """``["atom.weights=x", ...]`` -> ``{"atom": {"weights": "x"}}``."""
    import yaml

    options: dict[str, dict] = {name: {} for name in trackers}
    for item in items:
        target, eq, value = item.partition("=")
        tracker, dot, key = target.partition(".")
        if not (eq and dot and tracker and key):
            raise CLIError(f"--option must look like TRACKER.KEY=VALUE, got {item!r}")
        if tracker not in options:
            raise CLIError(f"--option {item!r}: {tracker!r} is not among --trackers")
        options[tracker][key] = yaml.safe_load(value) if value else ""
    return options


def _command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this evaluation, for the report."""
    words = ["ebmtrack", "eval", args.dataset, "--trackers", ",".join(args.trackers)]
    words += ["--out", str(args.out)]
    if args.runs != 1:
        words += ["--runs", str(args.runs)]
    words += ["--workers", str(args.workers)]
    for item in args.option:
        words += ["--option", item]
    for flag, value in (
        ("--sequences", ",".join(args.sequences or [])),
        ("--split", args.split),
        ("--peer-models", args.peer_models),
        ("--pack", args.pack),
        ("--seen", ",".join(args.seen)),
    ):
        if value:
            words += [flag, str(value)]
    return " ".join(shlex.quote(w) for w in words)


def run(args: argparse.Namespace) -> int:
    from ebmtrack.data.datasets import load_dataset, parse_dataset_spec
    from ebmtrack.evaluation.packing import pack_got10k, pack_trackingnet
    from ebmtrack.evaluation.report import evaluate_results, write_report
    from ebmtrack.evaluation.runner import TrackerSpec, run_evaluation
    from ebmtrack.evaluation.scoring import protocol_for
    from ebmtrack.tracking.registry import accepted_options, check_options, get_factory

    if args.runs < 1:
        raise CLIError(f"--runs must be >= 1, got {args.runs}")
    if args.workers < 0:
        raise CLIError(f"--workers must be >= 0, got {args.workers}")
    if not args.trackers:
        raise CLIError("--trackers needs at least one tracker name")
    args.trackers = list(dict.fromkeys(args.trackers))
    layout, root = parse_dataset_spec(args.dataset)
    sequences = load_dataset(args.dataset, split=args.split, sequences=args.sequences)
    unknown = sorted(set(args.seen) - {s.name for s in sequences})
    if unknown:
        raise CLIError(f"--seen names sequences not in the data set: {', '.join(unknown)}")
    specs = []
    for name, options in _tracker_options(args.option, args.trackers).items():
        if args.peer_models is not None and "model_dir" in accepted_options(name):
            options.setdefault("model_dir", args.peer_models)
        check_options(name, options)
        spec = TrackerSpec(name, get_factory(name), options)
        spec.create()  # fail now, in one line, on missing model files or bad options
        specs.append(spec)

    logging.basicConfig(format="%(levelname)s: %(message)s")
    summary = run_evaluation(
        specs,
        sequences,
        args.out,
        runs=args.runs,
        workers=args.workers,
        progress=not args.no_progress,
    )
    protocol = protocol_for(layout)
    evaluations = evaluate_results(args.out, args.trackers, sequences, args.runs, protocol)
    report = write_report(
        evaluations,
        sequences,
        args.out,
        f"{layout}:{root.name}",
        protocol,
        args.runs,
        _command_line(args),
        seen=args.seen,
    )
    if args.pack:
        names = [s.name for s in sequences]
        for name in args.trackers:
            if args.pack == "got10k":
                pack_got10k(args.out, name, names, args.runs, args.out / f"{name}_got10k.zip")
            else:
                pack_trackingnet(args.out, name, names, args.out / f"{name}_trackingnet.zip")
    print(
        f"{len(summary.done)} sequence runs done, {len(summary.skipped)} found from before, "
        f"{len(summary.failed)} failed; report: {report}"
    )
    return 1 if summary.failed else 0
