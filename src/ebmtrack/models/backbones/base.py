"""The backbone interface: named feature layers of an ImageNet CNN, input normalisation inside.

Conventions shared by every backbone:

- Input ``images``: float tensor (B, 3, H, W), RGB, values in [0, 255]. Each backbone subtracts its
  own mean and divides by its own std (ImageNet statistics for ResNet and MobileNetV2, 127 / 128
  for EfficientNet-Lite), so callers never normalise.
- Output: a dict from layer name to a (B, C, ceil(H / s), ceil(W / s)) tensor, where
  ``feature_info[name]`` gives the stride s and the channels C.
- BatchNorm is frozen (:class:`FrozenBatchNorm2d`): the running statistics never change, in train
  mode too. That is the tracker's "frozen backbone"; convolution weights can still be trained by
  switching ``requires_grad`` back on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

IMAGENET_MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)

Stage = tuple[str, Callable[[Tensor], Tensor]]


@dataclass(frozen=True)
class FeatureInfo:
    """Where a feature layer sits: its stride in input pixels and its number of channels."""

    stride: int
    channels: int


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d with fixed statistics and affine parameters, all stored as buffers.

    Same state-dict keys as :class:`torch.nn.BatchNorm2d` minus ``num_batches_tracked`` (which is
    dropped on load), so torchvision checkpoints load as they are. The forward pass is the eval-mode
    batch norm in every mode, and nothing in it is a parameter, so optimisers never see it.
    """

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x: Tensor) -> Tensor:
        # One fused kernel (and one ONNX BatchNormalization node that ORT folds into the conv).
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps
        )

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


class Backbone(nn.Module):
    """Base class: runs ``stages()`` in order and keeps the requested outputs.

    Subclasses set the class attributes below, define :meth:`stages` (the named feature layers in
    forward order) and :meth:`logits_from` (the ImageNet head on top of the last stage).

    Attributes:
        name: the registry name, e.g. ``"resnet18"``.
        feature_info: layer name -> :class:`FeatureInfo`, in forward order.
        default_layers: the (stride-8, stride-16) pair a two-level head such as IoU-Net uses.
        classifier_layer: the stride-16 layer the online classifier uses.
        classifier_prefixes: state-dict key prefixes of the ImageNet head; a checkpoint may omit
            all of them (a features-only file), and then :meth:`classify` refuses to run.
        weights_sha256: sha256 of the file the weights came from, or None (random init).
        has_classifier: False after loading a features-only checkpoint (the head is untrained).
    """

    name: str
    feature_info: dict[str, FeatureInfo]
    default_layers: tuple[str, str]
    classifier_layer: str
    classifier_prefixes: tuple[str, ...]

    def __init__(self, mean_rgb: Sequence[float], std_rgb: Sequence[float]) -> None:
        super().__init__()
        # Not persistent: the state dict keeps exactly the upstream checkpoints' keys.
        self.register_buffer("input_mean", torch.tensor(mean_rgb).view(1, 3, 1, 1), False)
        self.register_buffer("input_std", torch.tensor(std_rgb).view(1, 3, 1, 1), False)
        self.weights_sha256: str | None = None
        self.has_classifier = True

    def stages(self) -> list[Stage]:
        """(layer name, function) pairs in forward order; each function maps the previous output."""
        raise NotImplementedError

    def logits_from(self, last_features: Tensor) -> Tensor:
        """ImageNet logits (B, 1000) from the last layer of ``feature_info``."""
        raise NotImplementedError

    def convert_state_dict(self, state: dict[str, Tensor]) -> dict[str, Tensor]:
        """Rename a foreign checkpoint's keys to this module's; the default keeps them."""
        return state

    def normalize(self, images: Tensor) -> Tensor:
        """Map [0, 255] RGB images (B, 3, H, W) to the network's input scale."""
        if images.dim() != 4 or images.shape[1] != 3 or not images.is_floating_point():
            raise ValueError(
                f"images must be a float tensor (B, 3, H, W) with RGB values in [0, 255], "
                f"got dtype {images.dtype} and shape {tuple(images.shape)}"
            )
        x = (images.to(self.input_mean.dtype) - self.input_mean) / self.input_std
        if _weights_are_channels_last(self):
            x = x.contiguous(memory_format=torch.channels_last)
        return x

    def check_layers(self, layers: Iterable[str] | None) -> tuple[str, ...]:
        """Return ``layers`` (default: ``default_layers``) as a tuple without repeats, or raise
        ValueError."""
        if layers is None:
            return self.default_layers
        if isinstance(layers, str):
            layers = (layers,)
        layers = tuple(dict.fromkeys(layers))
        unknown = [layer for layer in layers if layer not in self.feature_info]
        if unknown or not layers:
            raise ValueError(
                f"layers {list(layers)} of backbone {self.name!r}: valid layers are "
                f"{list(self.feature_info)}"
            )
        return layers

    def forward(self, images: Tensor, layers: Iterable[str] | None = None) -> dict[str, Tensor]:
        """Feature maps of ``images`` (B, 3, H, W) in [0, 255] for ``layers``.

        Args:
            images: float RGB images, values in [0, 255].
            layers: names from ``feature_info``; default ``default_layers``.

        Returns:
            ``{layer: (B, C, H / stride, W / stride)}`` in the order of ``layers``. Computation
            stops after the deepest requested layer.
        """
        wanted = self.check_layers(layers)
        remaining = set(wanted)
        found: dict[str, Tensor] = {}
        x = self.normalize(images)
        for name, stage in self.stages():
            x = stage(x)
            if name in remaining:
                found[name] = x
                remaining.discard(name)
                if not remaining:
                    break
        # Channels-last outputs would break callers' .view(); the copy of these small maps is cheap.
        return {layer: found[layer].contiguous() for layer in wanted}

    def classify(self, images: Tensor) -> Tensor:
        """ImageNet logits (B, 1000) of ``images`` (B, 3, H, W) in [0, 255]."""
        if not self.has_classifier:
            raise ValueError(
                f"backbone {self.name!r} was loaded from a features-only checkpoint: it has no "
                "ImageNet classifier weights"
            )
        last_layer = next(reversed(self.feature_info))
        return self.logits_from(self.forward(images, (last_layer,))[last_layer])


def _weights_are_channels_last(module: nn.Module) -> bool:
    """Whether the first convolution's weight is stored channels-last (after ``.to(memory_format=
    torch.channels_last)``), in which case inputs are converted to match and stay that way."""
    for sub in module.modules():
        if isinstance(sub, nn.Conv2d):
            return sub.weight.is_contiguous(memory_format=torch.channels_last) and not (
                sub.weight.is_contiguous()
            )
    return False
