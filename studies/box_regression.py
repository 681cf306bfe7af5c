"""Every EBM training method on the box head, on real images (BMVC 2020, section 4.2 at CPU scale).

The paper's Table 2 trains one box-regression head per method (ML-IS, KLD-IS, ML-MCMC with L = 1,
4 and 8 Langevin steps, NCE, NCE+, DSM) on the same detector, data and budget, and scores the
boxes that gradient ascent on each head (Algorithm S1) makes of a detector's boxes; its Figure 3
repeats the best methods for M = 1 .. 128 samples (here NCE+ and KLD-IS). Here the head is the
tracker's IoU-Net on the ``pack-cpu`` preset (frozen ImageNet MobileNetV2, cached features of
2048 training pairs of the training pack; ``--preset default-cpu`` for the protocol of the
one-seed record of docs/results/box-regression.md), every method gets the same iterations,
ATOM's MSE is a reference row, and the "detector's errors" are ground-truth boxes perturbed to an
IoU drawn uniformly from 0.5-0.9 (``refinement.py``).

Prediction follows appendix C.1: T = 10 iterations of Algorithm S1 (step decay 0.5) from the
perturbed box, in the EBM's box parametrisation, with the step length of each head chosen from
:attr:`StudyConfig.step_lengths` on a tuning set (the paper tunes it on COCO val and reports
test-dev): frames of the training pack's held-out tracks, never trained on; the heads are then
tested on 15 frames of each of the 13 test sequences, on which nothing is trained or chosen
(:func:`evaluation_sources`). The MSE head is also scored with the tracker's own box estimation
(ATOM's ascent). Reported per head: mean IoU after refinement, the share of boxes above IoU 0.5
and 0.75 (the AP50 / AP75 analogue), training seconds per iteration.

Run (resumable: finished trainings and evaluations are skipped)::

    python studies/box_regression.py --out runs/box-regression --seeds 1,2,3 \
        [--features DIR]   # an existing cache of the same pairs, only read

With several seeds every run is trained once per seed (initialisation, data order, proposals and
the losses' draws, on the cached pairs of :data:`DATA_SEED`; the first seed's run keeps the plain
name, e.g. ``nce+``, the others ``nce+-seed2``), and the report adds each method's mean IoU after
refinement as a mean over per-sequence means, with its standard deviation over seeds and its
standard error over sequences (:func:`seed_summary`), and the differences of :data:`SEED_PAIRS`.

Writes ``OUT/<run>/`` (the trained head ``iou_net.safetensors``, ``metrics.csv``,
``refinement.json``), ``OUT/features/`` (the cache, or links to ``--features``),
``OUT/refinement-samples.safetensors`` (the tuning and test crops' features and boxes, shared by
every head), ``OUT/timing.json``, ``OUT/results.json``, ``OUT/report.md`` and ``OUT/m-curve.png``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import torch
from box_regression_report import write_report
from box_regression_runs import (
    DATA_SEED,
    PRESETS,
    RESULT_FILE,
    SAMPLES_FILE,
    TABLE_METHODS,
    TEST_FOLDER,
    StudyConfig,
    base_losses,
    experiment_config,
    link_features,
    run_losses,
    seeded_run,
    split_run,
    stale_chunks,
    time_methods,
    train_run,
)
from refinement import (
    RefinementConfig,
    RefinementSamples,
    ebm_refine,
    overlap_scores,
    refinement_samples,
    refinement_scores,
)
from safetensors.torch import load_file, safe_open, save_file
from tqdm import tqdm

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.datasets.sequence import select
from ebmtrack.files import write_atomic, write_json_atomic
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.models.serialization import load_model
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.experiment import IoUNetExperiment
from ebmtrack.training.presets import preset_config


def _tracker_params(preset: str) -> AtomParams:
    """The tracker's settings for the preset's backbone and crop size (crops, box estimation)."""
    experiment = preset_config(preset)
    return AtomParams(backbone=experiment.backbone, search_size=experiment.processing.output_size)


def _split_config(config: StudyConfig, split: str) -> RefinementConfig:
    """The refinement test of the ``test`` split, or of the ``tuning`` split (other
    perturbations; with ``default-cpu`` also other frames of the same sequences)."""
    pack = config.preset == "pack-cpu"
    return RefinementConfig(
        frames_per_sequence=(
            config.tuning_frames_per_sequence
            if pack and split == "tuning"
            else config.frames_per_sequence
        ),
        seed=config.refinement_seed + (split == "tuning"),
        start_iou=config.start_iou,
        frame_offset=0.5 if split == "tuning" and not pack else 0.0,
    )


def evaluation_sources(
    config: StudyConfig, test_folder: str | None = None
) -> dict[str, tuple[str, list[str] | None]]:
    """Where each split's sequences come from: ``{split: (folder, names or None for all)}``.

    ``pack-cpu``: the step lengths are tuned on the training pack's held-out tracks
    (``data.holdout``, never trained on) and the heads are tested on every sequence of
    ``test_folder`` (default :data:`TEST_FOLDER`), on which nothing is trained or chosen.
    ``default-cpu`` (the one-seed record's protocol): both splits are frames of the preset's
    held-out sequences of ``test_folder`` (default the preset's ``data.sequence_folder``).

    Raises ValueError if with ``pack-cpu`` the test folder is the pack's track folder.
    """
    experiment = preset_config(config.preset)
    data = experiment.data
    if config.preset == "pack-cpu":
        tuning = str(Path(data.pack) / "sequences")
        test = test_folder or TEST_FOLDER
        if Path(tuning).resolve() == Path(test).resolve():
            raise ValueError(f"the test folder {test} is the training pack's tracks")
        return {"test": (test, None), "tuning": (tuning, list(data.holdout))}
    folder = test_folder or data.sequence_folder
    return {split: (folder, list(data.holdout)) for split in ("test", "tuning")}


def _protocol(config: StudyConfig, sources: dict) -> str:
    """What the stored samples are a function of (a different one rebuilds them)."""
    splits = {
        split: {"folder": folder, "names": names, **asdict(_split_config(config, split))}
        for split, (folder, names) in sources.items()
    }
    return json.dumps({"preset": config.preset, "splits": splits}, sort_keys=True)


def prepare_samples(
    out: Path, config: StudyConfig, sequence_folder: str | None = None
) -> dict[str, list[RefinementSamples]]:
    """The crops, features and boxes of the ``test`` and ``tuning`` splits
    (:func:`evaluation_sources`; disjoint sequences, or with ``default-cpu`` disjoint frames),
    computed once for every head and stored in ``OUT/refinement-samples.safetensors`` (rebuilt
    when the protocol changed)."""
    path = out / SAMPLES_FILE
    sources = evaluation_sources(config, sequence_folder)
    protocol = _protocol(config, sources)
    if path.is_file():
        with safe_open(str(path), framework="pt") as handle:
            if (handle.metadata() or {}).get("protocol") != protocol:
                path.unlink()
    if not path.is_file():
        experiment = preset_config(config.preset)
        params = _tracker_params(config.preset)
        module = experiment.build_module()
        tensors, order = {}, {}
        for split in ("test", "tuning"):
            folder, names = sources[split]
            sequences = load_folder(folder)
            if names is not None:
                sequences = select(sequences, names)
            refinement = _split_config(config, split)
            sets = [
                refinement_samples(s, module.backbone, module.layers, refinement, params)
                for s in tqdm(sequences, desc=f"refinement samples ({split})")
            ]
            order[split] = [s.name for s in sets]
            for s in sets:
                prefix = f"{split}.{s.name}."
                tensors.update({f"{prefix}ref_feat{k}": f for k, f in enumerate(s.ref_feats)})
                tensors.update({f"{prefix}test_feat{k}": f for k, f in enumerate(s.test_feats)})
                tensors.update(
                    {
                        f"{prefix}ref_box": s.ref_box,
                        f"{prefix}start_boxes": s.start_boxes,
                        f"{prefix}true_boxes": s.true_boxes,
                    }
                )
        if config.preset == "pack-cpu" and set(order["test"]) & set(order["tuning"]):
            raise ValueError(f"tuning and test share {set(order['test']) & set(order['tuning'])}")
        tensors = {name: value.contiguous() for name, value in tensors.items()}
        metadata = {"order": json.dumps(order), "protocol": protocol}
        write_atomic(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))
    with safe_open(str(path), framework="pt") as handle:
        order = json.loads(handle.metadata()["order"])
    tensors = load_file(str(path))

    def samples(split: str, name: str) -> RefinementSamples:
        get = lambda key: tensors[f"{split}.{name}.{key}"]  # noqa: E731
        return RefinementSamples(
            name,
            [get("ref_feat0"), get("ref_feat1")],
            get("ref_box"),
            [get("test_feat0"), get("test_feat1")],
            get("start_boxes"),
            get("true_boxes"),
        )

    return {split: [samples(split, name) for name in names] for split, names in order.items()}


def ebm_scores(
    iou_net: AtomIoUNet,
    sets: list[RefinementSamples],
    step_lengths: tuple[float, ...],
    config: StudyConfig,
) -> list[dict]:
    """:func:`refinement.overlap_scores` of Algorithm S1 over all ``sets``, one
    per step length."""
    refined = torch.cat(
        [ebm_refine(iou_net, s, step_lengths, config.num_iters, config.decay) for s in sets]
    )
    starts = torch.cat([s.start_boxes for s in sets])
    truths = torch.cat([s.true_boxes for s in sets])
    return [overlap_scores(starts, refined[:, k], truths) for k in range(len(step_lengths))]


def evaluate_head(
    iou_net: AtomIoUNet,
    samples: dict[str, list[RefinementSamples]],
    config: StudyConfig,
    atom_ascent: bool = False,
) -> dict:
    """Algorithm S1 with the step length that is best on the tuning split, scored on the test
    split; with ``atom_ascent`` also the tracker's box estimation (ATOM's ascent) on the test
    split (``atom``)."""
    tuning = ebm_scores(iou_net, samples["tuning"], config.step_lengths, config)
    after = {step: scores["iou_after"] for step, scores in zip(config.step_lengths, tuning)}
    best = max(after, key=after.get)
    result = {"step_length": best, "tuning_iou_after": {str(k): v for k, v in after.items()}}
    result.update(ebm_scores(iou_net, samples["test"], (best,), config)[0])
    # which boxes of ``ious_after`` belong to which sequence, for means over sequences
    result["sequences"] = [s.name for s in samples["test"]]
    result["sequence_boxes"] = [len(s.start_boxes) for s in samples["test"]]
    if atom_ascent:
        result["atom"] = refinement_scores(
            iou_net, samples["test"], _tracker_params(config.preset), config.refinement_seed
        )
    return result


def run_study(
    out: str | Path,
    config: StudyConfig | None = None,
    features: str | Path | None = None,
    only: tuple[str, ...] | None = None,
    train: bool = True,
    evaluate: bool = True,
    sequence_folder: str | None = None,
) -> dict:
    """Train, time and evaluate every run (or the ``only`` ones), then write the report.

    Args:
        out: the study folder.
        config: budget and protocol (default :class:`StudyConfig`'s defaults).
        features: an existing feature cache of the preset's 2048 training pairs, only read: its
            chunks are linked into ``OUT/features`` (:func:`link_features`), where the runs
            read them and where a stale or missing chunk is built (~10 minutes for all);
            e.g. the data-scaling study's ``features-d`` for ``pack-cpu``.
        only: names of :func:`run_losses` to train and evaluate (default all; a method's plain
            name stands for its runs of every seed); the report covers
            every run with results in ``out``, so parallel processes can share the runs out.
        train: train missing runs.
        evaluate: evaluate trained runs without results, time the methods (once), and report.
        sequence_folder: the test sequences' folder (:func:`evaluation_sources`; with
            ``default-cpu`` also the folder it trains on).

    Returns:
        The report's record (also ``OUT/results.json``).
    """
    config = config or StudyConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    folder = out / "features"
    if features is not None and Path(features).resolve() != folder.resolve():
        link_features(Path(features), folder)
    features = folder
    if train:
        probe = experiment_config(
            seeded_run(TABLE_METHODS[0], DATA_SEED), BoxLossConfig(), config, features
        )
        stale = stale_chunks(probe)
        if stale:
            print(
                f"{len(stale)} chunk(s) of {features} hold other pairs; rebuilt by the first run: "
                f"{', '.join(stale)}",
                flush=True,
            )
    runs = run_losses(config)
    if only:  # a method's plain name selects its runs of every seed
        base = base_losses(config)
        only = [
            run
            for name in only
            for run in ([seeded_run(name, s) for s in config.seeds] if name in base else [name])
        ]
    unknown = sorted(set(only or ()) - set(runs))
    if unknown:
        raise ValueError(f"unknown run(s) {unknown}; choose from {', '.join(runs)}")
    selected = {name: runs[name] for name in only} if only else runs
    if train:
        for name, loss in selected.items():
            experiment = experiment_config(name, loss, config, features)
            if sequence_folder is not None and experiment.data.sequence_folder is not None:
                experiment.data.sequence_folder = sequence_folder  # default-cpu trains on it
            print(f"{name}: {train_run(name, experiment, out / name)}", flush=True)
    if not evaluate:
        return {}
    if not (out / "timing.json").is_file():
        base = base_losses(config)
        table = {name: base[name] for name in TABLE_METHODS}
        write_json_atomic(out / "timing.json", time_methods(table, config, features))
    samples = prepare_samples(out, config, sequence_folder)
    untrained = out / "untrained" / RESULT_FILE
    if not untrained.is_file():
        untrained.parent.mkdir(exist_ok=True)
        # every run's seeded initialisation
        head = preset_config(config.preset).build_module().iou_net
        starts = torch.cat([s.start_boxes for s in samples["test"]])
        truths = torch.cat([s.true_boxes for s in samples["test"]])
        no_refinement = overlap_scores(starts, starts, truths)  # the start boxes' shares
        record = {**evaluate_head(head, samples, config), "start": no_refinement}
        write_json_atomic(untrained, record)
    for name in selected:
        result = out / name / RESULT_FILE
        if (out / name / IoUNetExperiment.model_file).is_file() and not result.is_file():
            head = load_model(out / name / IoUNetExperiment.model_file, expected="AtomIoUNet")
            atom_ascent = split_run(name)[0] == "mse"  # the MSE head of every seed
            write_json_atomic(result, evaluate_head(head, samples, config, atom_ascent=atom_ascent))
    return write_report(out, config)


def _seed_list(text: str) -> tuple[int, ...]:
    """argparse type of ``--seeds``: distinct integers >= 0, e.g. ``1,2,3``."""
    try:
        seeds = tuple(int(v) for v in text.split(",") if v.strip())
        return StudyConfig(seeds=seeds).seeds
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected distinct integers >= 0 like 1,2,3; got {text!r}"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="study folder")
    parser.add_argument(
        "--features",
        type=Path,
        help="existing feature cache of the preset's pairs, only read (linked into OUT/features; "
        "default: built there once)",
    )
    parser.add_argument(
        "--preset", choices=PRESETS, default=StudyConfig().preset, help="training preset"
    )
    parser.add_argument("--runs", help="comma-separated runs to train/evaluate (default all)")
    parser.add_argument(
        "--sequences",
        help=f"test sequences' folder (pack-cpu: default {TEST_FOLDER}; default-cpu: the folder "
        "it trains on and tests the held-out sequences of, default the preset's)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--no-train", action="store_true", help="evaluate finished runs only")
    parser.add_argument("--no-eval", action="store_true", help="train only")
    parser.add_argument(
        "--seeds",
        type=_seed_list,
        default=StudyConfig().seeds,
        help="comma-separated seeds, every run trained once per seed (default 1)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    only = (
        tuple(name.strip() for name in args.runs.split(",") if name.strip()) if args.runs else None
    )
    run_study(
        args.out,
        StudyConfig(seeds=args.seeds, preset=args.preset),
        features=args.features,
        only=only,
        train=not args.no_train,
        evaluate=not args.no_eval,
        sequence_folder=args.sequences,
    )
    if not args.no_eval:
        print((args.out / "report.md").read_text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
