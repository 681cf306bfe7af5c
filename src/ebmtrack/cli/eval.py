"""``ebmtrack eval``: run trackers on a data set, score them, write a report."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ebmtrack.cli.main import (
    CLIError,
    add_device_argument,
    add_out_argument,
    add_progress_argument,
    add_threads_argument,
    check_output_folder,
    non_negative_int,
    positive_int,
    resolve_device,
    threads,
)
from ebmtrack.cli.options import OPTION_HELP, add_option, parse_option
from ebmtrack.cli.trackers import (
    OURS,
    PEER_MODEL_TRACKERS,
    add_peer_models_argument,
    peer_models_check,
)


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
    add_out_argument(parser, "output folder (results/, report.md, metrics.json, plots)")
    parser.add_argument(
        "--runs", type=positive_int, default=1, help="runs per sequence (default 1)"
    )
    parser.add_argument(
        "--workers",
        type=non_negative_int,
        default=1,
        help="worker processes (default 1), one thread each (--threads); 0 = run in this process",
    )
    add_threads_argument(parser, default=None, default_text="1")
    add_device_argument(parser, default=None, default_text="cpu; for atom and dimp-nce+")
    parser.add_argument("--sequences", type=_names, help="only these comma-separated sequences")
    parser.add_argument(
        "--split",
        help="data-set split (lasot: test/train/all, got10k: train/val/test, "
        "trackingnet: test/train/TRAIN_k, uav123: UAV123/UAV20L)",
    )
    add_peer_models_argument(parser)
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="TRACKER.KEY=VALUE",
        help="an option of one tracker, e.g. atom-iounet.weights=iou_net.safetensors or "
        f"atom.search_size=256 ({OPTION_HELP})",
    )
    parser.add_argument(
        "--weights",
        type=Path,
        help="box-head weights file for every tracker in --trackers (option weights; refused "
        "if one of them takes none)",
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
    add_progress_argument(parser)
    parser.set_defaults(
        func=run,
        interrupted_note="finished sequences are kept in {out}; the same command resumes",
    )


def _tracker_options(args: argparse.Namespace) -> dict[str, dict]:
    """``--option atom.search_size=256 --weights w`` -> ``{"atom": {"search_size": 256,
    "weights": Path("w")}}`` (one dict per tracker in ``--trackers``)."""
    options: dict[str, dict] = {name: {} for name in args.trackers}
    for item in args.option:
        target, value = parse_option(item, form="TRACKER.KEY=VALUE")
        tracker, dot, key = target.rpartition(".")
        if not (dot and tracker and key):
            raise CLIError(f"--option must look like TRACKER.KEY=VALUE, got {item!r}")
        if tracker not in options:
            raise CLIError(f"--option {item!r}: {tracker!r} is not among --trackers")
        add_option(options[tracker], key, value, f"--option {item!r}")
    if args.weights is not None:
        for tracker in args.trackers:
            add_option(options[tracker], "weights", args.weights, f"--weights for {tracker!r}")
    return options


def _command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this evaluation, for the report."""
    words = ["ebmtrack", "eval", args.dataset, "--trackers", ",".join(args.trackers)]
    words += ["--out", str(args.out)]
    if args.runs != 1:
        words += ["--runs", str(args.runs)]
    words += ["--workers", str(args.workers)]
    if args.threads is not None:
        words += ["--threads", str(args.threads)]
    for item in args.option:
        words += ["--option", item]
    if args.weights is not None:
        words += ["--weights", str(args.weights)]
    for flag, value in (
        ("--sequences", ",".join(args.sequences or [])),
        ("--split", args.split),
        ("--peer-models", args.peer_models),
        ("--device", args.device),
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

    if not args.trackers:
        raise CLIError("--trackers needs at least one tracker name")
    args.trackers = list(dict.fromkeys(args.trackers))
    layout, root = parse_dataset_spec(args.dataset)
    sequences = load_dataset(args.dataset, split=args.split, sequences=args.sequences)
    unknown = sorted(set(args.seen) - {s.name for s in sequences})
    if unknown:
        raise CLIError(f"--seen names sequences not in the data set: {', '.join(unknown)}")
    check_output_folder(args.out)
    specs = []
    for name, options in _tracker_options(args).items():
        if args.peer_models is not None and "model_dir" in accepted_options(name):
            options.setdefault("model_dir", args.peer_models)
        if name in PEER_MODEL_TRACKERS and not options:
            peer_models_check(name, args.peer_models)
        if args.device is not None and name in OURS:
            options.setdefault("device", resolve_device(args.device))
        check_options(name, options)
        spec = TrackerSpec(name, get_factory(name), options)
        spec.create()  # fail now, in one line, on missing model files or bad options
        specs.append(spec)

    with threads(args.threads if args.workers == 0 else None):
        summary = run_evaluation(
            specs,
            sequences,
            args.out,
            runs=args.runs,
            workers=args.workers,
            progress=not args.no_progress,
            threads=args.threads,
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
