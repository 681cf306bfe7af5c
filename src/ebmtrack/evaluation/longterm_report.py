"""Long-term scores in ``ebmtrack eval``'s report, on the sequences whose ground truth marks
frames absent: VOT-LT's precision, recall and F and OxUvA's TPR, TNR and MaxGM, both computed
by :mod:`ebmtrack.evaluation.longterm`.

A sequence is long-term here when some frame after the first has its target absent (a NaN or
zero-size box, or a frame its data set flags invisible: :meth:`Sequence.annotated` is False)
and some frame after the first has it present. A frame is reported absent by the tracker when
its recorded status (``SEQ_status.txt``, :mod:`ebmtrack.evaluation.results`) is one of
:data:`ABSENT_STATUSES`; results without statuses (written before they were recorded, other
tools' files) report every frame present. The thresholds run over the tracker's calibrated
``confidence`` where all its runs record one, else over its raw ``score`` where all record one,
else over nothing (the status alone decides).
"""

from __future__ import annotations

import math
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation.longterm import (
    LongTermRun,
    LongTermScore,
    OxUvAScore,
    frame_scores,
    score_long_term,
    score_oxuva,
)
from ebmtrack.evaluation.results import has_result, read_confidence, read_result, read_status

__all__ = [
    "ABSENT_STATUSES",
    "LongTermEvaluation",
    "evaluate_long_term",
    "has_absences",
    "long_term_json",
    "long_term_section",
]

ABSENT_STATUSES = ("lost", "not_found")
"""The statuses by which a tracker says the target is not in the frame."""


def has_absences(sequence: Sequence) -> bool:
    """Whether the target is absent in some frame after the first and present in another."""
    later = sequence.annotated()[1:]
    return bool(later.any() and not later.all())


@dataclass(frozen=True)
class LongTermEvaluation:
    """One tracker's long-term scores.

    Attributes:
        sequences: the long-term sequences it has results of.
        runs, runs_with_status: runs scored, and of them those with recorded statuses.
        thresholded: ``confidence``, ``score`` or ``none``: what the thresholds run over.
        reports_absence: whether any scored frame has a status of :data:`ABSENT_STATUSES`.
        vot: VOT-LT's scores (statuses of :data:`ABSENT_STATUSES` predict nothing).
        oxuva: OxUvA's.
    """

    sequences: list[str]
    runs: int
    runs_with_status: int
    thresholded: str
    reports_absence: bool
    vot: LongTermScore
    oxuva: OxUvAScore


def _read_runs(out_dir, name: str, sequences: Seq[Sequence], runs: int):
    """(sequence, boxes, (score, confidence) or None, statuses or None) of every readable run,
    and the problems of status files (those of box files are the OTB scores' to list)."""
    found, problems = [], []
    for sequence in sequences:
        for run in range(runs):
            if not has_result(out_dir, name, run, sequence.name):
                continue
            try:
                boxes, _ = read_result(out_dir, name, run, sequence.name)
                recorded = read_confidence(out_dir, name, run, sequence.name)
            except ValueError:
                continue
            if len(boxes) != len(sequence):
                continue
            statuses = read_status(out_dir, name, run, sequence.name)
            if statuses is not None and len(statuses) != len(boxes):
                problems.append(
                    f"{sequence.name} run {run}: {len(statuses)} statuses for {len(boxes)} "
                    "frames (read as none)"
                )
                statuses = None
            if recorded is not None and len(recorded[0]) != len(boxes):
                recorded = None
            found.append((sequence, boxes, recorded, statuses))
    return found, problems


def _thresholded(found) -> str:
    def everywhere(column: int) -> bool:
        return all(r is not None and np.isfinite(r[column][1:]).any() for _, _, r, _ in found)

    return "confidence" if everywhere(1) else "score" if everywhere(0) else "none"


def evaluate_long_term(
    out_dir: str | Path, name: str, sequences: Seq[Sequence], runs: int
) -> tuple[LongTermEvaluation | None, list[str]]:
    """``name``'s long-term scores over the long-term ones of ``sequences`` (None when it has
    no result of any), and the problems met."""
    found, problems = _read_runs(out_dir, name, [s for s in sequences if has_absences(s)], runs)
    if not found:
        return None, problems
    thresholded = _thresholded(found)
    pairs = []
    for sequence, boxes, recorded, statuses in found:
        if thresholded == "none" or recorded is None:
            values = np.full(len(boxes), np.nan)
        else:
            values = recorded[1 if thresholded == "confidence" else 0]
        if statuses is None:
            statuses = np.full(len(boxes), "unknown")
        pairs.append((sequence, LongTermRun(boxes, values, statuses, np.zeros(len(boxes)))))
    frames = [frame_scores(run, sequence, ABSENT_STATUSES) for sequence, run in pairs]
    evaluation = LongTermEvaluation(
        sequences=list(dict.fromkeys(sequence.name for sequence, *_ in found)),
        runs=len(found),
        runs_with_status=sum(statuses is not None for *_, statuses in found),
        thresholded=thresholded,
        reports_absence=any(np.any(c == -np.inf) for _, _, c in frames),
        vot=score_long_term(pairs, absent=ABSENT_STATUSES),
        oxuva=score_oxuva(frames),
    )
    return evaluation, problems


def _number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def long_term_json(e: LongTermEvaluation) -> dict:
    """The ``long_term`` entry of a tracker in ``metrics.json`` (non-finite numbers as null: a
    threshold of null is none, every frame not reported absent counts)."""
    vot, ox = e.vot, e.oxuva
    return {
        "sequences": e.sequences,
        "runs": e.runs,
        "runs_with_status": e.runs_with_status,
        "thresholded": e.thresholded,
        "reports_absence": e.reports_absence,
        "frames_present": ox.frames_present,
        "frames_absent": ox.frames_absent,
        "vot_lt": {
            "precision": _number(vot.precision[vot.best]),
            "recall": _number(vot.recall[vot.best]),
            "f": _number(vot.f_score),
            "threshold": _number(vot.threshold),
            "reacquire_median": _number(vot.median_reacquire()),
            "returns": len(vot.reacquire),
            "per_run": [
                {"sequence": n, "f": _number(f), "auc_present": _number(auc)}
                for n, f, auc, _ in vot.per_sequence
            ],
        },
        "oxuva": {
            "tpr": _number(ox.tpr),
            "tnr": _number(ox.tnr),
            "gm": _number(ox.gm),
            "max_gm": _number(ox.max_gm),
            "best_threshold": _number(ox.best_threshold),
            "best_tpr": _number(ox.best_tpr),
            "best_tnr": _number(ox.best_tnr),
            "best_max_gm": _number(ox.best_max_gm),
        },
    }


def _pct(value: float) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{100 * value:.1f}"


def _tau(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:.3f}"


def _frames(value: float) -> str:
    return "–" if math.isnan(value) else "never" if math.isinf(value) else f"{value:g}"


def long_term_section(named: Seq[tuple[str, LongTermEvaluation]], scored: int) -> str:
    """The report's section: a table of the trackers ``named`` and its notes; ``scored``: the
    number of sequences the report scores."""
    names = list(dict.fromkeys(n for _, e in named for n in e.sequences))
    lines = [
        "## Long-term: sequences with absent frames\n",
        "Sequences whose ground truth marks frames absent (a NaN or zero-size box, or a frame "
        f"flagged invisible): {', '.join(names)} ({len(names)} of the {scored} scored). The "
        "tables above score only their frames with the target present; here the absent ones "
        'count too (docs/evaluation.md, "Long-term scores"). Scores in %, frame 1 left out.\n',
        "| Tracker | Pr | Re | F | τ (F) | re-acquire (frames) | TPR | TNR | MaxGM "
        "| best MaxGM | τ (MaxGM) | thresholds on | runs |",
        "|---" * 13 + "|",
    ]
    for name, e in sorted(named, key=lambda item: -item[1].vot.f_score):
        vot, ox = e.vot, e.oxuva
        cells = [
            _pct(vot.precision[vot.best]),
            _pct(vot.recall[vot.best]),
            _pct(vot.f_score),
            _tau(vot.threshold),
            _frames(vot.median_reacquire()),
            _pct(ox.tpr),
            _pct(ox.tnr),
            _pct(ox.max_gm),
            _pct(ox.best_max_gm),
            _tau(ox.best_threshold),
            e.thresholded,
            str(e.runs),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    silent = [n for n, e in named if not e.reports_absence]
    unrecorded = [
        f"{n} ({e.runs - e.runs_with_status} of {e.runs})"
        for n, e in named
        if e.runs_with_status < e.runs
    ]
    notes = [
        "",
        "- **VOT-LT**: at a threshold τ a frame counts as predicted when its status is not "
        "`lost` / `not_found` and its confidence is >= τ (or it has none); tracking precision "
        "(mean IoU of the predicted frames, IoU 0 where the target is absent) and recall (IoU "
        "summed over the present frames) are averaged over sequences, F is their harmonic mean, "
        "at the τ that maximises it. Re-acquire: the median number of frames from each return "
        "of the target to the first predicted frame with IoU >= 0.5 at that τ.",
        "- **OxUvA**: frames pooled over sequences and runs. TPR: the share of present frames "
        "predicted present with IoU >= 0.5; TNR: the share of absent frames predicted absent; "
        "MaxGM: the OxUvA toolkit's best geometric mean of the two on the way to reporting "
        "every frame absent. TPR, TNR and MaxGM are at the tracker's own verdict (present "
        "unless its status is `lost` or `not_found`); best MaxGM and its τ also call absent "
        "every frame whose confidence is below τ.",
        "- τ: over the tracker's calibrated confidence, or its raw score where it records no "
        'confidence (column "thresholds on"); – where there is no threshold.',
    ]
    notes.append(
        "- A tracker that never reports the target absent (OpenCV's peers say `not_found` only "
        "where OpenCV reports a failure) is scored as well: its TNR is 0 at its own verdict, "
        "unless its status says otherwise; a threshold on its confidence can still call frames "
        "absent."
        + (f" No frame `lost` or `not_found` here: {', '.join(silent)}." if silent else "")
    )
    if unrecorded:
        notes.append(
            "- Runs without recorded statuses (results written before statuses were, or "
            f"another tool's), read as never absent: {', '.join(unrecorded)}."
        )
    return "\n".join(lines + notes) + "\n"
