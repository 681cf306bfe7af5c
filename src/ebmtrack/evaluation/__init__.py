"""Evaluating trackers on benchmarks (``ebmtrack eval``; conventions in docs/evaluation.md).

- :mod:`~ebmtrack.evaluation.metrics`: IoU, centre errors, success / precision curves, AUC, AO.
- :mod:`~ebmtrack.evaluation.scoring`: per-benchmark scoring protocols, averaging over runs.
- :mod:`~ebmtrack.evaluation.runner`: one-pass evaluation in worker processes, resumable.
- :mod:`~ebmtrack.evaluation.results`: result files in pytracking's layout.
- :mod:`~ebmtrack.evaluation.report`: report.md, metrics.json and plots.
- :mod:`~ebmtrack.evaluation.packing`: zips for the GOT-10k and TrackingNet servers.
- :mod:`~ebmtrack.evaluation.render`: boxes drawn on frames, MP4 and GIF writers.
- :mod:`~ebmtrack.evaluation.demo`: ``ebmtrack demo``, the default tracker on the shipped clip.
"""
