"""The DiMP-NCE+ tracker (BMVC 2020 section 5): DiMP's classifier + an EBM box head.

Per frame, as ATOM (:mod:`ebmtrack.tracking.atom.tracker`) but with DiMP's classifier:

1. one square search region of ``search_area_scale`` times the target's size around the previous
   position, resized to ``search_size``; one backbone pass feeds both heads;
2. the target filter, predicted by DiMP's meta-learned model optimizer
   (:class:`~ebmtrack.models.dimp.DiMPClassifier`), scores every location; the peak gives the
   position and a status (ATOM's localisation: normal, uncertain, hard negative, not found);
3. unless the target is lost, the box is refined from the located position by gradient ascent on
   the EBM head's f(x, y) (Algorithm S1, :mod:`ebmtrack.tracking.ebm_refine`);
4. normal and hard-negative frames enter the sample memory with their box; the filter takes
   ``update_iters`` optimizer steps every ``train_skipping`` frames, ``hard_negative_iters`` right
   after a hard negative. Lost and uncertain frames change nothing (reference ``update_flag``).

The first frame: ATOM's augmentations of the target crop (shifts, flip, blurs, rotations) plus
channel dropout on the classification features; the filter initializer pools the target from all
of them and the model optimizer takes ``init_iters`` steps; the box head's modulation comes from
the unaugmented crop. Geometry as ATOM: continuous frame pixels, crops with exact affine maps.
"""

from __future__ import annotations

import torch

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.backbones.runtime import select_runtime
from ebmtrack.models.dimp import DiMPClassifier
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.tracking.box_head import BoxHead
from ebmtrack.tracking.composition import SearchRegionTracker, build_box_estimator
from ebmtrack.tracking.dimp.box import BOX_ESTIMATORS
from ebmtrack.tracking.dimp.classifier import LearntClassifier, LearntConfig
from ebmtrack.tracking.dimp.params import DiMPParams
from ebmtrack.tracking.params import part_config
from ebmtrack.tracking.search_region import SearchRegion

__all__ = ["DiMPTracker"]


class DiMPTracker(SearchRegionTracker):
    """DiMP-NCE+ behind the :class:`~ebmtrack.tracking.base.Tracker` interface: a search region,
    :class:`~ebmtrack.tracking.dimp.classifier.LearntClassifier` and
    the box estimator of ``params.box_mode`` (:data:`~ebmtrack.tracking.dimp.box.BOX_ESTIMATORS`;
    :mod:`ebmtrack.tracking.composition`), each part with its own config.

    Args:
        backbone: a backbone from :func:`ebmtrack.models.backbones.create_backbone`; the
            classifier reads ``backbone.classifier_layer``, the box head ``default_layers``.
        classifier: DiMP's target classifier for this backbone's classifier layer.
        box_head: the IoU-Net trained as an EBM (any loss of :data:`ebmtrack.ebm.LOSSES`);
            given exactly when ``params.box_mode`` is ``refine`` (ValueError otherwise).
        params: :class:`DiMPParams`; its ``backbone`` name is informational here.
        calibrator: maps the per-frame features of :mod:`ebmtrack.tracking.confidence` to
            ``TrackResult.confidence``; None: the confidence is NaN.

    The modules are moved to ``device`` and set to eval mode; the box head runs as a private
    BatchNorm-folded copy (:class:`~ebmtrack.tracking.box_head.BoxHead`), the backbone as
    ATOM's (:func:`~ebmtrack.models.backbones.runtime.feature_extractor`), in float32.
    """

    name = "dimp-nce+"

    def __init__(
        self,
        backbone: Backbone,
        classifier: DiMPClassifier,
        box_head: AtomIoUNet | None = None,
        params: DiMPParams | None = None,
        calibrator=None,
    ) -> None:
        params = params or DiMPParams()
        device = torch.device(params.device)
        self.backbone = backbone.to(device).eval()
        config = part_config(LearntConfig, params)
        part = LearntClassifier(classifier, self.backbone, config, device)
        head = BoxHead(box_head, self.backbone, device) if box_head is not None else None
        self.box_head = head.net if head is not None else None
        estimator = build_box_estimator(BOX_ESTIMATORS, params.box_mode, params, head)
        layers = tuple(dict.fromkeys((*estimator.layers, part.layer)))
        runtime = select_runtime("float32", params.backbone_runtime, device)
        search = SearchRegion(params, self.backbone, layers, runtime, device, estimator.slots)
        super().__init__(params, search, part, estimator, calibrator)
