"""The report of VOT's supervised experiment: accuracy, robustness, lost and EAO per tracker
(:mod:`ebmtrack.evaluation.vot`), into ``report.md`` and ``metrics.json``."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence as Seq
from pathlib import Path

from ebmtrack.data.datasets import Sequence
from ebmtrack.data.io import read_image
from ebmtrack.evaluation.results import SUPERVISED_NAME, has_result, result_paths
from ebmtrack.evaluation.vot import SupervisedScore, read_trajectory, score_supervised

__all__ = ["evaluate_supervised", "supervised_table", "write_supervised_report"]


def evaluate_supervised(
    out_dir: str | Path,
    names: Seq[str],
    sequences: Seq[Sequence],
    runs: int,
    interval: tuple[int, int],
) -> tuple[dict[str, SupervisedScore | None], dict[str, list[str]]]:
    """Scores of each tracker in ``names`` over the sequences it has trajectories of, and the
    problems (missing or unreadable trajectories) per tracker."""
    sizes = {}
    for s in sequences:
        height, width = read_image(s.frames[0], keep_gray=True).shape[:2]
        sizes[s.name] = (width, height)
    scores, problems = {}, {}
    for name in names:
        found, problems[name] = {}, []
        for sequence in sequences:
            for run in range(runs):
                if not has_result(out_dir, name, run, sequence.name, SUPERVISED_NAME):
                    problems[name].append(f"no result for {sequence.name} run {run}")
                    continue
                path = result_paths(out_dir, name, run, sequence.name, SUPERVISED_NAME)[0]
                try:
                    trajectory = read_trajectory(path)
                except ValueError as err:
                    problems[name].append(str(err))
                    continue
                if len(trajectory[1]) != len(sequence):
                    problems[name].append(
                        f"{sequence.name} run {run}: {len(trajectory[1])} lines for "
                        f"{len(sequence)} frames"
                    )
                    continue
                found.setdefault(sequence.name, []).append(trajectory)
        scores[name] = score_supervised(found, sequences, sizes, interval) if found else None
    return scores, problems


def _fmt(value: float, digits: int = 3) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def supervised_table(scores: dict[str, SupervisedScore | None]) -> str:
    """The results table, sorted by EAO, as pysot prints it."""
    ranked = sorted(scores, key=lambda n: -(scores[n].eao if scores[n] else -math.inf))
    lines = ["| Tracker | Accuracy | Robustness | Lost | EAO |", "|---|---|---|---|---|"]
    for name in ranked:
        s = scores[name]
        cells = ["–"] * 4 if s is None else [
            _fmt(s.accuracy), _fmt(s.robustness), _fmt(s.lost, 1), _fmt(s.eao)
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _clean(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def write_supervised_report(
    scores: dict[str, SupervisedScore | None],
    problems: dict[str, list[str]],
    out_dir: str | Path,
    dataset: str,
    runs: int,
    interval: tuple[int, int],
    command: str = "",
    produced_by: dict | None = None,
) -> Path:
    """Write ``report.md`` and ``metrics.json`` (with ``produced_by``, when given) of the
    supervised experiment; returns the report's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "dataset": dataset,
        "experiment": "supervised",
        "runs": runs,
        "skip": 5,
        "burnin": 10,
        "eao_interval": list(interval),
        "trackers": {
            name: {
                **({k: _clean(v) for k, v in s.summary().items()} if s else {}),
                "frames": s.frames if s else 0,
                "expected_overlap_curve": [_clean(v) for v in s.curve] if s else [],
                "problems": problems.get(name, []),
            }
            for name, s in scores.items()
        },
    }
    if produced_by is not None:
        data["produced_by"] = produced_by
    (out_dir / "metrics.json").write_text(json.dumps(data, indent=1) + "\n")
    parts = [
        f"# Supervised (VOT baseline) evaluation on {dataset}\n",
        f"{runs} run(s) per sequence; re-initialised 5 frames after a failure (overlap 0), "
        f"accuracy without the 10 frames after each initialisation, robustness = failures per "
        f"100 frames, EAO over sequence lengths {interval[0]}..{interval[1]} "
        "(docs/evaluation.md).\n",
    ]
    if command:
        parts.append(f"Command:\n\n```\n{command}\n```\n")
    parts += ["## Overall\n", supervised_table(scores) + "\n"]
    listed = [f"- {n}: {p}" for n, items in problems.items() for p in items]
    if listed:
        parts += ["\n## Missing or bad results\n", "\n".join(listed) + "\n"]
    report = out_dir / "report.md"
    report.write_text("\n".join(parts))
    return report
