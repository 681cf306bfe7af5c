"""``ebmtrack regress1d``: the 1-D regression study of the EBM-training paper (section 4.1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ebmtrack.cli.main import (
    add_out_argument,
    add_progress_argument,
    add_threads_argument,
    non_negative_int,
    positive_int,
)
from ebmtrack.cli.paths import check_output_folder

QUICK_METHODS = "ml-is,kld-is,nce,nce+,sm,dsm"


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,2; got {text!r}") from None


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "regress1d",
        help="train and compare the seven EBM training methods on the 1-D data sets",
        description="Reproduce Table 1 and Figure 2 of 'How to Train Your Energy-Based Model "
        "for Regression': train every method on both synthetic data sets, evaluate D_KL on a "
        "2048x2048 grid, write table.md, table.csv and figures. Finished runs are kept under "
        "OUT/runs, so an interrupted study resumes where it stopped.",
    )
    add_out_argument(p, "output folder (runs/, table.md, table.csv, figures)")
    p.add_argument("--methods", default=None, help="comma-separated names or 'all' (default all)")
    p.add_argument(
        "--datasets", type=_int_list, default=(1, 2), help="data sets to run, 1 and/or 2 (1,2)"
    )
    p.add_argument(
        "--runs", type=positive_int, default=None, help="runs per method and data set (20)"
    )
    p.add_argument(
        "--costly-runs",
        type=positive_int,
        default=None,
        help="runs for ml-mcmc-16 and ml-mcmc-256 (default: --runs)",
    )
    p.add_argument("--epochs", type=positive_int, default=None, help="training epochs (75)")
    p.add_argument("--figure2-m", type=_int_list, default=None, help="extra M values for Figure 2")
    p.add_argument(
        "--figure2-runs",
        type=non_negative_int,
        default=None,
        help="runs per extra M of Figure 2 (default 5; 0: none)",
    )
    p.add_argument("--workers", type=positive_int, default=1, help="worker processes (default 1)")
    # On 2 cores, 2 threads train one run up to 1.4x faster, while two 1-thread workers train
    # two runs at once.
    add_threads_argument(p, default=1)
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a few-minute preset: {QUICK_METHODS}, 2 runs, 10 epochs, no Figure 2 runs",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write tables and figures from the runs already finished in OUT",
    )
    add_progress_argument(p)
    p.set_defaults(
        func=run,
        interrupted_note="finished runs are kept in {out}/runs; the same command resumes",
    )


def run(args: argparse.Namespace) -> int:
    import torch

    from ebmtrack.regression1d import StudyConfig, parse_methods, run_study
    from ebmtrack.regression1d.report import write_report
    from ebmtrack.regression1d.study import load_results

    check_output_folder(args.out)
    threads = args.threads or torch.get_num_threads()
    quick = args.quick
    methods = parse_methods(args.methods or (QUICK_METHODS if quick else "all"))
    runs = args.runs if args.runs is not None else (2 if quick else 20)
    costly = {} if args.costly_runs is None else {"ml-mcmc-16": args.costly_runs}
    if args.costly_runs is not None:
        costly["ml-mcmc-256"] = args.costly_runs
    defaults = StudyConfig()
    config = StudyConfig(
        methods=tuple(methods),
        datasets=args.datasets,
        runs=runs,
        runs_per_method=costly,
        epochs=args.epochs if args.epochs is not None else (10 if quick else defaults.epochs),
        figure2_samples=args.figure2_m
        if args.figure2_m is not None
        else (() if quick else defaults.figure2_samples),
        figure2_runs=(
            args.figure2_runs if args.figure2_runs is not None else defaults.figure2_runs
        ),
        workers=args.workers,
    )
    if args.report_only:
        results = load_results(Path(args.out) / "runs")
        if not results:
            raise FileNotFoundError(f"no finished runs under {Path(args.out) / 'runs'}")
    else:
        results = run_study(config, args.out, threads, progress=not args.no_progress)
    print(write_report(results, args.out, config.num_samples, config.epochs), end="")
    if quick:
        print(
            f"quick preset ({config.epochs} epochs, {runs} runs): D_KL is not comparable with "
            "the paper's 75-epoch, best-5-of-20 values"
        )
    print(f"tables and figures in {args.out}")
    return 0
