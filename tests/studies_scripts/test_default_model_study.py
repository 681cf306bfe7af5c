"""The default-model study (``studies/default_model.py``): its refinement test of a head."""

import numpy as np
import pytest
import torch
from refinement import RefinementSamples, perturb_box, refinement_scores

from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.training.presets import preset_config


def test_refinement_without_proposals_or_steps_keeps_the_start_box():
    params = AtomParams(num_random_proposals=0, box_steps=0, box_top_k=1)
    config = preset_config("synthetic-smoke")
    config.feature_cache.enabled = True
    module = config.build_module()
    rng = np.random.default_rng(0)
    truth = np.array([30.0, 28.0, 24.0, 30.0])
    starts = np.stack([perturb_box(truth, 0.1, 0.15, rng) for _ in range(3)])
    feats = module.features(torch.rand(4, 3, 96, 96) * 255)
    samples = RefinementSamples(
        "x",
        [f[:1] for f in feats],
        torch.tensor([[36.0, 36.0, 24.0, 24.0]]),
        [f[1:] for f in feats],
        torch.as_tensor(starts, dtype=torch.float32),
        torch.as_tensor(truth, dtype=torch.float32).expand(3, 4),
    )
    scores = refinement_scores(module.iou_net, [samples], params)
    assert scores["iou_after"] == pytest.approx(scores["iou_before"])
    assert scores["improved"] == 0.0 and scores["num_boxes"] == 3
