"""The ATOM tracker (Danelljan et al., CVPR 2019): online classifier + IoU-Net box refinement.

Per frame (paper 3.3, reference B.1): one square search region of ``search_area_scale`` times the
target's size around the previous position, resized to ``search_size``; one backbone pass whose
features feed both heads; the classifier's peak gives the position and a status; the IoU-Net
refines the box from there; the frame becomes a training sample; every ``train_skipping`` frames
(and at once after a hard negative) the classifier's filter takes a few CG steps.

All geometry is done in continuous pixel coordinates (:mod:`ebmtrack.tracking.base`): the state
is the target centre and size in frame pixels; the crop's affine map converts to and from crop
pixels, where the classifier (stride ``s``: score cell ``i`` at pixel ``s * i``) and the IoU-Net
(boxes in crop pixels) work.

With box mode ``siamese`` and ``classifier_features`` ``auto`` (the default) or ``siamese``
(:attr:`~ebmtrack.tracking.atom.params.AtomParams.one_pass`) the frame has one backbone pass:
the search region is the siamese box estimator's search crop and the classifier reads its
backbone's features (:class:`~ebmtrack.tracking.search_region.SiameseSearchRegion`), which the
siamese head decodes too (:class:`~ebmtrack.tracking.atom.box.SiameseOnePassBox`); the backbone
is neither run nor needed.
"""

from __future__ import annotations

import functools

import torch

from ebmtrack.lite.siamese import STRIDE
from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.backbones.runtime import int8_available, select_runtime
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.models.precision import resolve_precision
from ebmtrack.tracking.atom.box import BOX_ESTIMATORS, SiameseOnePassBox
from ebmtrack.tracking.atom.classifier import (
    FeatureLayer,
    GaussNewtonClassifier,
    GaussNewtonConfig,
)
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.box_head import BoxHead
from ebmtrack.tracking.composition import Mode, SearchRegionTracker, build_box_estimator
from ebmtrack.tracking.params import part_config
from ebmtrack.tracking.search_region import SIAMESE_LAYER, SearchRegion, SiameseSearchRegion

__all__ = ["AtomTracker"]


class AtomTracker(SearchRegionTracker):
    """ATOM behind the :class:`~ebmtrack.tracking.base.Tracker` interface: a search region,
    :class:`~ebmtrack.tracking.atom.classifier.GaussNewtonClassifier` and the box estimator of
    ``params.box_mode`` (:data:`~ebmtrack.tracking.atom.box.BOX_ESTIMATORS`;
    :mod:`ebmtrack.tracking.composition`), each part with its own config.

    Args:
        backbone: a backbone from :func:`ebmtrack.models.backbones.create_backbone`; the
            classifier reads ``backbone.classifier_layer``, the box head ``default_layers``.
            None with one backbone pass (``params.one_pass``), which runs none (one given is
            kept as :attr:`backbone`, unused).
        box_head: the offline-trained IoU-Net for this backbone; given exactly when
            ``params.box_mode`` reads one (``refine``, ``gated``, ``polished``; ValueError
            otherwise).
        params: :class:`AtomParams`; its ``backbone`` name is informational here.
        calibrator: maps the per-frame features of :mod:`ebmtrack.tracking.confidence` to
            ``TrackResult.confidence``; None: the confidence is NaN.
        mode: a :class:`~ebmtrack.tracking.composition.Mode` of the frame loop (``atom-lt``:
            the long-term mode); None: none.
        head_features: the backbone runtime whose features ``box_head`` was trained on
            (:func:`~ebmtrack.models.serialization.trained_features`): ``onnx-int8`` lets
            ``backbone_runtime="auto"`` run the int8 backbone under the head, as without one;
            ``float32`` (a head trained on float32 features) keeps it float32.

    For speed the tracker runs private copies with BatchNorm folded in: the eager backbone via
    :func:`~ebmtrack.models.backbones.optimize_for_inference` (channels-last too) and the box
    head via :class:`~ebmtrack.tracking.box_head.BoxHead`, whose ascent takes closed-form
    gradients (:class:`~ebmtrack.tracking.iou_gradient.IoUGradient`). The same numbers up to
    float rounding; the modules passed in are only moved to ``device`` and set to eval mode.
    """

    name = "atom"

    def __init__(
        self,
        backbone: Backbone | None,
        box_head: AtomIoUNet | None = None,
        params: AtomParams | None = None,
        calibrator=None,
        mode: Mode | None = None,
        head_features: str = "float32",
    ) -> None:
        params = params or AtomParams()
        device = torch.device(params.device)
        if params.one_pass:
            self.backbone = backbone
            self._one_pass(params, device, box_head, calibrator, mode)
            return
        if backbone is None:
            raise ValueError(
                "AtomTracker needs a backbone unless it runs one pass (classifier_features auto "
                "or siamese with box_mode siamese)"
            )
        self.backbone = backbone.to(device).eval()
        head = BoxHead(box_head, backbone, device) if box_head is not None else None
        estimator = build_box_estimator(BOX_ESTIMATORS, params.box_mode, params, head)
        self.box_head = head.net if head is not None else None
        # auto: int8 where ranges ship for these weights (docs/results/speed.md), for the
        # classifier alone or with a head trained on int8 features; a head trained on float32
        # features reads float32 ones.
        int8_head = head is None or head_features == "onnx-int8"
        runtime = select_runtime(
            params.precision,
            params.backbone_runtime,
            device,
            int8=int8_head and functools.partial(int8_available, self.backbone),
        )
        config = part_config(GaussNewtonConfig, params)
        features = FeatureLayer.of_backbone(backbone, params.search_size)
        classifier = GaussNewtonClassifier(features, config, device, runtime.dtype)
        layers = tuple(dict.fromkeys((*estimator.layers, classifier.layer)))
        search = SearchRegion(params, self.backbone, layers, runtime, device, estimator.slots)
        super().__init__(params, search, classifier, estimator, calibrator, mode)

    def _one_pass(self, params: AtomParams, device: torch.device, box_head, calibrator, mode):
        """The parts of ``classifier_features="siamese"``: the siamese estimator's search region
        and features for the classifier, its head decoding them (module docstring)."""
        if box_head is not None:
            raise ValueError(f"box_mode={params.box_mode!r} reads no box_head: pass none")
        estimator = build_box_estimator(
            {params.box_mode: SiameseOnePassBox}, params.box_mode, params, None
        )
        self.box_head = None
        # The features are ONNX Runtime's float32; the filter update's products too unless
        # bfloat16 is asked for.
        auto = params.precision == "auto"
        dtype = torch.float32 if auto else resolve_precision(params.precision, device)
        siamese = estimator.siamese
        search = SiameseSearchRegion(params, siamese, device, dtype)
        features = FeatureLayer(SIAMESE_LAYER, STRIDE, siamese.channels, search.size)
        config = part_config(GaussNewtonConfig, params)
        classifier = GaussNewtonClassifier(features, config, device, dtype)
        super().__init__(params, search, classifier, estimator, calibrator, mode)
