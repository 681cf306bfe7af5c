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
    non_negative_int,
    positive_int,
    threads,
)
from ebmtrack.cli.options import OPTION_HELP, parse_option
from ebmtrack.cli.paths import check_not_an_input, check_output_folder, sequence_folder
from ebmtrack.cli.ray_option import add_ray_argument, ray_target
from ebmtrack.cli.tracker_options import (
    add_peer_models_argument,
    add_runtime_argument,
    tracker_options,
)


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _interval(text: str) -> tuple[int, int]:
    """argparse type: ``LOW,HIGH`` with 1 <= LOW <= HIGH."""
    low, comma, high = text.partition(",")
    try:
        interval = (int(low), int(high))
    except ValueError:
        interval = (0, 0)
    if not comma or not 1 <= interval[0] <= interval[1]:
        raise argparse.ArgumentTypeError(f"must be LOW,HIGH with 1 <= LOW <= HIGH, got {text!r}")
    return interval


def _shard(text: str) -> tuple[int, int]:
    """argparse type: ``K/N`` with 1 <= K <= N."""
    k, slash, n = text.partition("/")
    try:
        shard = (int(k), int(n))
    except ValueError:
        shard = (0, 0)
    if not slash or not 1 <= shard[0] <= shard[1]:
        raise argparse.ArgumentTypeError(f"must be K/N with 1 <= K <= N, got {text!r}")
    return shard


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
        "--trackers",
        type=_names,
        default=[],
        help="comma-separated tracker names (any case); NAME@VARIANT files the results of NAME "
        "with its own --option NAME@VARIANT.KEY=VALUE apart, e.g. atom,atom@s256",
    )
    add_out_argument(parser, "output folder (results/, report.md, metrics.json, plots)")
    parser.add_argument(
        "--runs",
        type=positive_int,
        help="runs per sequence (default 1; with --report-only: as many as OUT holds)",
    )
    parser.add_argument(
        "--workers",
        type=non_negative_int,
        help="worker processes (default 1), one thread each (--threads); 0 = run in this process",
    )
    add_ray_argument(parser, "the (tracker, run, sequence) jobs")
    add_threads_argument(parser, default=None, default_text="1")
    add_device_argument(parser, default=None, default_text="cpu; for atom and dimp-nce+")
    parser.add_argument("--sequences", type=_names, help="only these comma-separated sequences")
    parser.add_argument(
        "--split",
        help="data-set split (lasot: test/train/all, got10k: train/val/test, "
        "trackingnet: test/train/TRAIN_k, uav123: UAV123/UAV20L)",
    )
    add_peer_models_argument(parser)
    add_runtime_argument(parser)
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
    parser.add_argument(
        "--experiment",
        choices=("ope", "supervised"),
        default="ope",
        help="ope: one pass from the first box (default); supervised: VOT's baseline "
        "experiment, re-initialised 5 frames after each failure, scored by accuracy, "
        "robustness and EAO",
    )
    parser.add_argument(
        "--eao-interval",
        type=_interval,
        default=(100, 356),
        metavar="LOW,HIGH",
        help="sequence lengths EAO averages over (default 100,356: VOT2017/2018's; VOT2016 "
        "108,371, VOT2019 46,291)",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="score another tool's result files (pysot, pytracking or got10k folders; with "
        "--experiment supervised pysot's VOT baseline folders) as tracker NAME: copied into "
        "OUT/results/NAME/ and reported with the others; repeatable",
    )
    parser.add_argument(
        "--shard",
        type=_shard,
        metavar="K/N",
        help="run only share K of N (1 <= K <= N) of the (tracker, run, sequence) jobs into "
        "OUT, no report; --report-only builds it once every share is done",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="track nothing: score what OUT/results holds (every tracker there, or --trackers) "
        "and write the report",
    )
    add_progress_argument(parser)
    parser.set_defaults(
        func=run,
        interrupted_note="finished sequences are kept in {out}; the same command resumes",
    )


def _labels(names: list[str]) -> dict[str, str]:
    """``--trackers`` names -> {label: registered name}: names are case-insensitive, and
    ``NAME@VARIANT`` is tracker NAME filed as its own entry (ValueError for an unknown NAME,
    with the closest one)."""
    from ebmtrack.tracking.registry import canonical_name, get_factory

    labels = {}
    for text in names:
        label = canonical_name(text)
        base, at, variant = label.partition("@")
        plain = variant.replace("-", "").replace("_", "").replace("+", "")
        if at and not (plain.isalnum() and plain.isascii()):
            raise CLIError(
                f"--trackers {text!r}: a variant is NAME@VARIANT, VARIANT of letters, digits, "
                "-, _ or +"
            )
        get_factory(base)
        labels.setdefault(label, base)
    return labels


def _option_items(
    args: argparse.Namespace, labels: dict[str, str]
) -> dict[str, list[tuple[str, object, str]]]:
    """``--option atom.search_size=256`` -> ``{"atom": [("search_size", 256,
    "atom.search_size=256")]}``: the ``--option`` items of each label of ``--trackers``."""
    from ebmtrack.tracking.registry import canonical_name

    items: dict[str, list] = {label: [] for label in labels}
    for item in args.option:
        target, value = parse_option(item, form="TRACKER.KEY=VALUE")
        tracker, dot, key = target.rpartition(".")
        if not (dot and tracker and key):
            raise CLIError(f"--option must look like TRACKER.KEY=VALUE, got {item!r}")
        tracker = canonical_name(tracker)
        if tracker not in items:
            raise CLIError(f"--option {item!r}: {tracker!r} is not among --trackers")
        items[tracker].append((key, value, item))
    return items


def _specs(args: argparse.Namespace, labels: dict[str, str], create: bool) -> tuple[list, dict]:
    """One TrackerSpec per label, and with ``create`` what each is (its provenance): each is
    built once, so that a missing model file or a bad option fails now, in one line. The
    options come from the flags (``--weights`` and ``--device`` for every tracker,
    ``--peer-models`` where it applies) and each label's ``--option`` items, by the route of
    ``track`` (:func:`~ebmtrack.cli.tracker_options.tracker_options`)."""
    import functools

    from ebmtrack.evaluation.provenance import tracker_provenance
    from ebmtrack.evaluation.runner import TrackerSpec
    from ebmtrack.tracking.runtime import build_tracker

    specs, built = [], {}
    flags = {"--device": args.device, "--weights": args.weights, "--peer-models": args.peer_models}
    for label, items in _option_items(args, labels).items():
        name = labels[label]
        options = tracker_options(
            name,
            flags,
            items,
            optional=("--peer-models",),
            need_files=create,
            hint=lambda key, label=label: f"--option {label}.{key}=FILE",
            runtime=args.runtime,
        )
        if args.runtime is not None:  # recorded with the results: runtimes are not mixed
            options["runtime"] = args.runtime
        spec = TrackerSpec(label, functools.partial(build_tracker, name), options, tracker=name)
        if create:
            built[label] = tracker_provenance(spec.create())
        specs.append(spec)
    return specs, built


def _inputs(root, sequences) -> dict[str, Path]:
    """The folders ``--out`` must stay out of: the data set, and each sequence's folder by its
    real path (a data set of linked sequences keeps them elsewhere)."""
    inputs = {"data set": Path(root)}
    for sequence in sequences:
        if sequence.frames:
            folder = sequence_folder(sequence.frames[0].parent)
            inputs.setdefault(f"sequence folder of {sequence.name}", folder)
    return inputs


def _command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this evaluation, for the report."""
    words = ["ebmtrack", "eval", args.dataset]
    if args.trackers:
        words += ["--trackers", ",".join(args.trackers)]
    words += ["--out", str(args.out)]
    if args.runs is not None and args.runs != 1:
        words += ["--runs", str(args.runs)]
    if args.ray is not None:
        words += ["--ray"] + ([args.ray] if args.ray else [])
    elif not args.report_only:
        words += ["--workers", str(args.workers)]
    if args.threads is not None:
        words += ["--threads", str(args.threads)]
    for item in args.option:
        words += ["--option", item]
    for item in args.imports:
        words += ["--import", item]
    if args.weights is not None:
        words += ["--weights", str(args.weights)]
    for flag, value in (
        ("--sequences", ",".join(args.sequences or [])),
        ("--split", args.split),
        ("--peer-models", args.peer_models),
        ("--device", args.device),
        ("--runtime", getattr(args, "runtime", None)),
        ("--pack", args.pack),
        ("--seen", ",".join(args.seen)),
    ):
        if value:
            words += [flag, str(value)]
    if args.experiment != "ope":
        words += ["--experiment", args.experiment]
        if args.eao_interval != (100, 356):
            words += ["--eao-interval", ",".join(map(str, args.eao_interval))]
    if args.report_only:
        words.append("--report-only")
    return " ".join(shlex.quote(w) for w in words)


def _imports(args: argparse.Namespace, sequences) -> list[str]:
    """Copy each ``--import NAME=DIR`` into OUT/results/NAME; returns the names."""
    from ebmtrack.evaluation.foreign import import_results, import_trajectories
    from ebmtrack.tracking.registry import canonical_name

    reader = import_trajectories if args.experiment == "supervised" else import_results
    names = []
    for item in args.imports:
        name, eq, folder = item.partition("=")
        name = canonical_name(name)
        if not (eq and name and folder):
            raise CLIError(f"--import must look like NAME=DIR, got {item!r}")
        if name in names or name in (canonical_name(t) for t in args.trackers):
            raise CLIError(f"--import {item!r}: {name!r} is named twice")
        imported = reader(Path(folder), args.out, name, sequences)
        print(f"{name}: imported {imported.summary()}")
        names.append(name)
    return names


def _report_names(out: Path, first: list[str]) -> list[str]:
    """``first``, then every other tracker whose results ``out`` holds (an extended run)."""
    results = out / "results"
    found = (
        sorted(p.name for p in results.iterdir() if (p / "options.json").is_file())
        if (results.is_dir())
        else []
    )
    return list(dict.fromkeys([*first, *found]))


def _runs_found(out: Path, names: list[str], experiment: str) -> int:
    from ebmtrack.evaluation.results import PARAMETER_NAME, SUPERVISED_NAME, run_dir

    parameter = SUPERVISED_NAME if experiment == "supervised" else PARAMETER_NAME
    runs = 1
    for name in names:
        while run_dir(out, name, runs, parameter).is_dir():
            runs += 1
    return runs


def run(args: argparse.Namespace) -> int:
    from ebmtrack.data.datasets import load_dataset, parse_dataset_spec
    from ebmtrack.evaluation.runner import check_recorded_options, run_evaluation
    from ebmtrack.evaluation.workers import log_skipped

    labels = _labels(args.trackers)
    ray = ray_target(args)
    if args.report_only and ray:
        raise CLIError("--report-only tracks nothing: drop --ray")
    args.workers = 1 if args.workers is None else args.workers
    if not (labels or args.imports or args.report_only):
        raise CLIError("--trackers needs at least one tracker name (or --import NAME=DIR)")
    if args.report_only and (args.shard or args.imports):
        raise CLIError("--report-only tracks and imports nothing: drop --shard and --import")
    if args.experiment == "supervised":
        unused = (("--pack", args.pack), ("--seen", args.seen))
        for flag, value in unused:
            if value:
                raise CLIError(f"{flag}: not used by --experiment supervised")
    layout, root = parse_dataset_spec(args.dataset)
    # A broken sequence among those asked for is skipped, as a failed job is: one line.
    broken: dict[str, str] = {}
    sequences = load_dataset(
        args.dataset, split=args.split, sequences=args.sequences, problems=broken
    )
    if not sequences:
        raise CLIError(
            f"{args.dataset}: no sequence left to evaluate, each one asked for is broken: "
            + "; ".join(broken.values())
        )
    unknown = sorted(set(args.seen) - {s.name for s in sequences} - set(broken))
    if unknown:
        raise CLIError(f"--seen names sequences not in the data set: {', '.join(unknown)}")
    check_output_folder(args.out)
    check_not_an_input(args.out, "--out", _inputs(root, sequences))
    specs, built = _specs(args, labels, create=not args.report_only)
    if broken:
        log_skipped(args.out, broken)
    runs = args.runs or 1
    if args.report_only:
        for spec in specs:
            check_recorded_options(args.out, spec)
        names = list(labels) or _report_names(args.out, [])
        if not names:
            raise CLIError(f"--out {args.out}: holds no results to report")
        runs = args.runs or _runs_found(args.out, names, args.experiment)
        return _report(args, layout, root, sequences, names, runs, failed=len(broken))
    imported = _imports(args, sequences)
    with threads(args.threads if args.workers == 0 else None):
        summary = run_evaluation(
            specs,
            sequences,
            args.out,
            runs=runs,
            workers=args.workers,
            progress=not args.no_progress,
            threads=args.threads,
            shard=args.shard,
            experiment=args.experiment,
            provenance=built,
            ray=ray,
        )
    done = (
        f"{len(summary.done)} sequence runs done, {len(summary.skipped)} found from before, "
        f"{len(summary.failed)} failed"
    )
    if broken:
        done += f", {len(broken)} broken sequence(s) skipped"
    failed = len(summary.failed) + len(broken)
    if args.shard:
        k, n = args.shard
        print(
            f"shard {k}/{n}: {done}; once every shard is done: the same command with "
            "--report-only instead of --shard"
        )
        return 1 if failed else 0
    names = _report_names(args.out, [*labels, *imported])
    return _report(args, layout, root, sequences, names, runs, failed, done)


def _produced_by(out: Path, names: list[str]) -> dict:
    """What made each tracker's results (``results/NAME/provenance.json``; for an imported
    folder, where it came from) and what scored them."""
    from ebmtrack.evaluation.provenance import environment, read_provenance
    from ebmtrack.evaluation.results import read_options

    trackers = {}
    for name in names:
        options = read_options(out, name) or {}
        trackers[name] = read_provenance(out, name) or (
            [{"imported_from": options["imported_from"]}] if "imported_from" in options else []
        )
    return {"trackers": trackers, "scored_with": environment()}


def _supervised_report(args, layout, root, sequences, names, runs, failed, done="") -> int:
    from ebmtrack.evaluation.vot_report import (
        evaluate_supervised,
        supervised_table,
        write_supervised_report,
    )

    scores, problems = evaluate_supervised(args.out, names, sequences, runs, args.eao_interval)
    report = write_supervised_report(
        scores,
        problems,
        args.out,
        f"{layout}:{root.name}",
        runs,
        args.eao_interval,
        _command_line(args),
        produced_by=_produced_by(args.out, names),
    )
    print(supervised_table(scores))
    print(f"{done}; report: {report}" if done else f"report: {report}")
    return 1 if failed else 0


def _report(args, layout, root, sequences, names, runs, failed, done="") -> int:
    """Score ``names``' results in OUT, write the report (and packs), print the table."""
    if args.experiment == "supervised":
        return _supervised_report(args, layout, root, sequences, names, runs, failed, done)
    from ebmtrack.evaluation.packing import pack_got10k, pack_trackingnet
    from ebmtrack.evaluation.report import evaluate_results, overall_table, write_report
    from ebmtrack.evaluation.scoring import protocol_for

    protocol = protocol_for(layout)
    evaluations = evaluate_results(args.out, names, sequences, runs, protocol)
    report = write_report(
        evaluations,
        sequences,
        args.out,
        f"{layout}:{root.name}",
        protocol,
        runs,
        _command_line(args),
        seen=args.seen,
        produced_by=_produced_by(args.out, names),
    )
    if args.pack:
        seq_names = [s.name for s in sequences]
        for name in names:
            if args.pack == "got10k":
                pack_got10k(args.out, name, seq_names, runs, args.out / f"{name}_got10k.zip")
            else:
                pack_trackingnet(args.out, name, seq_names, args.out / f"{name}_trackingnet.zip")
    scorable = sum(1 for s in sequences if s.annotated()[1:].any())
    if any(e.overall is not None for e in evaluations):
        print(overall_table(evaluations, scorable))
    print(f"{done}; report: {report}" if done else f"report: {report}")
    return 1 if failed else 0
