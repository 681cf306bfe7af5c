"""The 1-D regression study of "How to Train Your Energy-Based Model for Regression" (sec. 4.1).

Built on ``ebmtrack.ebm``: synthetic data sets (``data``), the B.2 network (``model``),
the nine method configurations (``methods``), training (``train``), D_KL on a grid (``kl``),
the D_KL floors of the smoothed targets of KLD-IS, NCE+ and DSM (``floors``),
the resumable multi-run study (``study``) and its tables and figures (``report``).
"""

from .methods import METHODS, PAPER_TABLE1, parse_methods
from .study import RunKey, StudyConfig, planned_runs, run_study
from .train import TrainConfig, train_model

__all__ = [
    "METHODS",
    "PAPER_TABLE1",
    "RunKey",
    "StudyConfig",
    "TrainConfig",
    "parse_methods",
    "planned_runs",
    "run_study",
    "train_model",
]
