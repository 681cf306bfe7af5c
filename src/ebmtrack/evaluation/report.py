"""Score the result files of an evaluation and write ``report.md``, ``metrics.json`` and plots."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation import metrics as M
from ebmtrack.evaluation.calibration import calibration_summary, frame_ious
from ebmtrack.evaluation.longterm_report import (
    LongTermEvaluation,
    evaluate_long_term,
    long_term_json,
    long_term_section,
)
from ebmtrack.evaluation.plots import plot_precision, plot_success
from ebmtrack.evaluation.results import has_result, read_confidence, read_result
from ebmtrack.evaluation.scoring import Protocol, Score, average, score_run


@dataclass
class TrackerEvaluation:
    """One tracker's scores: per sequence, per attribute, overall (mean over sequences), and
    where its results record a confidence, how well it is calibrated over all their frames
    (:func:`~ebmtrack.evaluation.calibration.calibration_summary`), and where sequences mark
    frames absent, its long-term scores on them (:mod:`ebmtrack.evaluation.longterm_report`)."""

    name: str
    sequences: dict[str, Score] = field(default_factory=dict)
    attributes: dict[str, Score] = field(default_factory=dict)
    overall: Score | None = None
    runs_found: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    calibration: dict | None = None
    long_term: LongTermEvaluation | None = None


def evaluate_results(
    out_dir: str | Path,
    tracker_names: Seq[str],
    sequences: Seq[Sequence],
    runs: int,
    protocol: Protocol,
) -> list[TrackerEvaluation]:
    """Score every result file under ``out_dir`` for these trackers, runs and sequences.

    Sequences without any annotated frame after the first (GOT-10k / TrackingNet test) are not
    scored. Missing or malformed result files are listed in ``problems``; the tracker's overall
    numbers then average the sequences it has. Sequences that mark frames absent are scored on
    their present frames here, and also with long-term scores (``long_term``).
    """
    scorable = [s for s in sequences if s.annotated()[1:].any()]
    evaluations = []
    for name in tracker_names:
        evaluation = TrackerEvaluation(name)
        confidences, ious = [], []
        for sequence in scorable:
            run_scores = []
            for run in range(runs):
                if not has_result(out_dir, name, run, sequence.name):
                    evaluation.problems.append(f"no result for {sequence.name} run {run}")
                    continue
                try:
                    boxes, times = read_result(out_dir, name, run, sequence.name)
                    run_scores.append(score_run(boxes, sequence, protocol, times))
                    recorded = read_confidence(out_dir, name, run, sequence.name)
                    if recorded is not None and np.isfinite(recorded[1]).any():
                        confidences.append(recorded[1])
                        ious.append(frame_ious(boxes, sequence, protocol.clip_to_image))
                except ValueError as err:
                    evaluation.problems.append(f"{sequence.name} run {run}: {err}")
            if run_scores:
                evaluation.sequences[sequence.name] = average(run_scores)
                evaluation.runs_found[sequence.name] = len(run_scores)
        if evaluation.sequences:
            evaluation.overall = average(list(evaluation.sequences.values()))
        if confidences:
            evaluation.calibration = calibration_summary(
                np.concatenate(confidences), np.concatenate(ious)
            )
        evaluation.long_term, problems = evaluate_long_term(out_dir, name, scorable, runs)
        evaluation.problems += problems
        by_attribute: dict[str, list[Score]] = {}
        for sequence in scorable:
            if sequence.name in evaluation.sequences:
                for attribute in sequence.attributes:
                    by_attribute.setdefault(attribute, []).append(
                        evaluation.sequences[sequence.name]
                    )
        evaluation.attributes = {a: average(s) for a, s in sorted(by_attribute.items())}
        evaluations.append(evaluation)
    return evaluations


def restrict(evaluations: Seq[TrackerEvaluation], names: Seq[str]) -> list[TrackerEvaluation]:
    """The same evaluations over only the sequences ``names`` (overall re-averaged; attributes
    dropped): e.g. the sequences no model was trained on."""
    keep = set(names)
    restricted = []
    for e in evaluations:
        sequences = {n: s for n, s in e.sequences.items() if n in keep}
        overall = average(list(sequences.values())) if sequences else None
        runs_found = {n: r for n, r in e.runs_found.items() if n in keep}
        restricted.append(TrackerEvaluation(e.name, sequences, {}, overall, runs_found))
    return restricted


def _clean(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def _score_json(score: Score, with_curves: bool) -> dict:
    out = {k: _clean(v) for k, v in score.summary().items()}
    out["frames_scored"] = int(score.ious.size)
    if with_curves:
        out["success_curve"] = [_clean(v) for v in score.success]
        out["precision_curve"] = [_clean(v) for v in score.precision]
        out["norm_precision_curve"] = [_clean(v) for v in score.norm_precision]
    return out


def metrics_dict(
    evaluations: Seq[TrackerEvaluation],
    dataset: str,
    protocol: Protocol,
    runs: int,
    seen: Seq[str] = (),
) -> dict:
    """Everything :func:`write_report` writes to ``metrics.json``; with ``seen`` (sequences a
    model was trained on) each tracker also gets ``unseen_overall``, its mean over the others."""
    unseen = {}
    if seen:
        for e in evaluations:
            names = [n for n in e.sequences if n not in set(seen)]
            (unseen[e.name],) = restrict([e], names)
    data = {
        "dataset": dataset,
        "protocol": protocol.name,
        "runs": runs,
        "thresholds": {
            "success": M.SUCCESS_THRESHOLDS.tolist(),
            "precision_px": M.PRECISION_THRESHOLDS.tolist(),
            "norm_precision": M.NORM_PRECISION_THRESHOLDS.tolist(),
        },
        "trackers": {
            e.name: {
                "overall": _score_json(e.overall, True) if e.overall else None,
                "sequences": {n: _score_json(s, False) for n, s in e.sequences.items()},
                "attributes": {a: _score_json(s, False) for a, s in e.attributes.items()},
                "problems": e.problems,
                **(
                    {"calibration": {k: _clean(v) for k, v in e.calibration.items()}}
                    if e.calibration
                    else {}
                ),
                **({"long_term": long_term_json(e.long_term)} if e.long_term else {}),
            }
            for e in evaluations
        },
    }
    if seen:
        data["seen_sequences"] = sorted(seen)
        for name, e in unseen.items():
            data["trackers"][name]["unseen_overall"] = (
                _score_json(e.overall, True) if e.overall else None
            )
    return data


def _fmt(value: float, percent: bool = True) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{100 * value:.1f}" if percent else f"{value:.1f}"


_COLUMNS = (
    ("auc", "AUC"),
    ("op50", "OP50"),
    ("op75", "OP75"),
    ("precision", "Prec@20px"),
    ("norm_precision", "NormPrec@0.2"),
    ("ao", "AO"),
    ("sr50", "SR0.5"),
    ("sr75", "SR0.75"),
)


def overall_table(evaluations: Seq[TrackerEvaluation], num_sequences: int) -> str:
    """The overall table, sorted by AUC, scores in %."""
    ranked = sorted(
        evaluations, key=lambda e: -e.overall.summary()["auc"] if e.overall else math.inf
    )
    lines = [
        "| Tracker | " + " | ".join(t for _, t in _COLUMNS) + " | FPS | sequences |",
        "|---" * (len(_COLUMNS) + 3) + "|",
    ]
    for e in ranked:
        s = e.overall.summary() if e.overall else {}
        cells = [_fmt(s.get(k, math.nan)) for k, _ in _COLUMNS]
        cells += [_fmt(s.get("fps", math.nan), False), f"{len(e.sequences)}/{num_sequences}"]
        lines.append(f"| {e.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _decimals(value: float) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.3f}"


def confidence_table(evaluations: Seq[TrackerEvaluation]) -> str:
    """How well each tracker's confidence predicts IoU > 0.5, over every scored frame after the
    first of every run (docs/evaluation.md, "Confidence")."""
    lines = [
        "| Tracker | ECE | AUROC (IoU < 0.5) | Brier | lost: precision | lost: recall | frames |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in evaluations:
        c = e.calibration
        cells = [_decimals(c[k]) for k in ("ece", "auroc_wrong", "brier")]
        cells += [_fmt(c["lost_precision"]), _fmt(c["lost_recall"]), str(c["frames"])]
        lines.append(f"| {e.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_tables(
    evaluations: Seq[TrackerEvaluation], sequence_names: Seq[str], seen: Seq[str] = ()
) -> str:
    """The overall table (sorted by AUC), per-sequence AUC and precision tables (sequences in
    ``seen`` marked "(seen)"), and a per-attribute AUC table when sequences have attributes.
    Scores in %."""
    ranked = sorted(
        evaluations, key=lambda e: -e.overall.summary()["auc"] if e.overall else math.inf
    )
    text = overall_table(ranked, len(sequence_names))
    for key, title in (("auc", "AUC (%)"), ("precision", "precision at 20 px (%)")):
        rows = [
            f"\n\n### Per sequence: {title}\n",
            "| Sequence | " + " | ".join(e.name for e in ranked) + " |",
            "|---" * (len(ranked) + 1) + "|",
        ]
        for name in sequence_names:
            cells = [
                _fmt(e.sequences[name].summary()[key]) if name in e.sequences else "–"
                for e in ranked
            ]
            label = f"{name} (seen)" if name in seen else name
            rows.append(f"| {label} | " + " | ".join(cells) + " |")
        text += "\n".join(rows)
    attributes = sorted({a for e in ranked for a in e.attributes})
    if attributes:
        rows = [
            "\n\n### Per attribute: AUC (%)\n",
            "| Attribute | " + " | ".join(e.name for e in ranked) + " |",
            "|---" * (len(ranked) + 1) + "|",
        ]
        for attribute in attributes:
            cells = [
                _fmt(e.attributes[attribute].summary()["auc"]) if attribute in e.attributes else "–"
                for e in ranked
            ]
            rows.append(f"| {attribute} | " + " | ".join(cells) + " |")
        text += "\n".join(rows)
    return text


def write_report(
    evaluations: Seq[TrackerEvaluation],
    sequences: Seq[Sequence],
    out_dir: str | Path,
    dataset: str,
    protocol: Protocol,
    runs: int,
    command: str = "",
    seen: Seq[str] = (),
    produced_by: dict | None = None,
) -> Path:
    """Write ``report.md``, ``metrics.json``, ``success.png`` and ``precision.png`` to
    ``out_dir``; returns the report's path. ``produced_by`` (what made the results: weights,
    precision, runtime, versions) goes into ``metrics.json`` as it is.

    ``seen``: names of sequences some evaluated model was trained on. They are marked in the
    per-sequence tables, and the report opens with the overall table and success plot
    (``success_unseen.png``) over the other sequences, where accuracy claims belong.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = metrics_dict(evaluations, dataset, protocol, runs, seen)
    if produced_by is not None:
        data["produced_by"] = produced_by
    (out_dir / "metrics.json").write_text(json.dumps(data, indent=1) + "\n")
    scored = [e for e in evaluations if e.overall is not None]
    if scored:
        plot_success(
            {e.name: e.overall.success for e in scored}, out_dir / "success.png", title=dataset
        )
        plot_precision(
            {e.name: e.overall.precision for e in scored}, out_dir / "precision.png", title=dataset
        )
    names = [s.name for s in sequences if s.annotated()[1:].any()]
    unscored = [s.name for s in sequences if not s.annotated()[1:].any()]
    frames = int(sum(len(s) for s in sequences))
    parts = [
        f"# Evaluation on {dataset}\n",
        f"{len(sequences)} sequences, {frames} frames, {runs} run(s) per sequence, "
        f"scoring protocol `{protocol.name}` (see docs/evaluation.md). Scores in %, the mean "
        "over sequences (AO / SR: frames pooled over sequences). FPS = frames / total time of "
        "initialize + track calls.\n",
    ]
    if command:
        parts.append(f"Command:\n\n```\n{command}\n```\n")
    if unscored:
        parts.append(
            f"Not scored (no ground truth after the first frame; submit packed results to the "
            f"benchmark's server): {len(unscored)} sequence(s).\n"
        )
    unseen_names = [n for n in names if n not in set(seen)]
    if seen:
        unseen = restrict(evaluations, unseen_names)
        parts += [
            f"## Overall on the {len(unseen_names)} sequences no model was trained on\n",
            f"Unseen: {', '.join(unseen_names)}. Seen (trained on by some model, marked below): "
            f"{', '.join(n for n in names if n in set(seen))}.\n",
            overall_table(unseen, len(unseen_names)) + "\n",
        ]
        unseen_scored = [e for e in unseen if e.overall is not None]
        if unseen_scored:
            plot_success(
                {e.name: e.overall.success for e in unseen_scored},
                out_dir / "success_unseen.png",
                title=f"{dataset}, unseen sequences",
            )
            parts.append("![success plot, unseen sequences](success_unseen.png)\n")
    parts += [
        "## Overall on all sequences\n" if seen else "## Overall\n",
        markdown_tables(evaluations, names, seen) + "\n",
    ]
    long_term = [(e.name, e.long_term) for e in evaluations if e.long_term]
    if long_term:
        parts.append(long_term_section(long_term, len(names)))
    calibrated = [e for e in evaluations if e.calibration]
    if calibrated:
        parts += ["## Confidence\n", confidence_table(calibrated) + "\n"]
    if scored:
        parts += ["## Plots\n", "![success plot](success.png) ![precision plot](precision.png)\n"]
    problems = [f"- {e.name}: {p}" for e in evaluations for p in e.problems]
    if problems:
        parts += ["\n## Missing or bad results\n", "\n".join(problems) + "\n"]
    report = out_dir / "report.md"
    report.write_text("\n".join(parts))
    return report
