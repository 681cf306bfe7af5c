"""DiMP's discriminative target classifier (Bhat et al., ICCV 2019), the coarse localiser of the
EBM paper's DiMP-NCE+ tracker: an offline meta-learned filter predictor (feature block,
initializer, unrolled steepest-descent optimizer) and its hinge classification loss."""

from ebmtrack.models.dimp.layers import (
    apply_filter,
    apply_filter_transpose,
    box_centers_in_cells,
    distance_bins,
    instance_l2_norm,
    leaky_relu_par,
    leaky_relu_par_deriv,
    score_map_size,
)
from ebmtrack.models.dimp.loss import classification_loss, hinge_mse, score_labels
from ebmtrack.models.dimp.model import DiMPClassifier, DiMPConfig, pool_filter
from ebmtrack.models.dimp.optimizer import SteepestDescentGN

__all__ = [
    "DiMPClassifier",
    "DiMPConfig",
    "SteepestDescentGN",
    "apply_filter",
    "apply_filter_transpose",
    "box_centers_in_cells",
    "classification_loss",
    "distance_bins",
    "hinge_mse",
    "instance_l2_norm",
    "leaky_relu_par",
    "leaky_relu_par_deriv",
    "pool_filter",
    "score_labels",
    "score_map_size",
]
