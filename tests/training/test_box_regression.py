import math

import pytest
import torch
from torch.utils.data import default_collate

from ebmtrack.ebm import LOSSES
from ebmtrack.ops.boxes import box_convert
from ebmtrack.training.box_regression import (
    EBM_RECIPES,
    BoxConditioning,
    BoxEnergy,
    BoxLossConfig,
    BoxRegressionModule,
    proposal_ranking_stats,
)
from ebmtrack.training.presets import preset_config


def smoke_module_and_batch(loss: str, batch_size: int = 8):
    config = preset_config("synthetic-smoke")
    config.loss = BoxLossConfig(loss)
    train, _ = config.build_datasets()
    batch = default_collate([train[i] for i in range(batch_size)])
    return config.build_module(), batch


def test_box_energy_is_the_iou_net_output_on_the_same_boxes():
    module, batch = smoke_module_and_batch("mse", batch_size=2)
    module.eval()
    net = module.iou_net
    modulation = net.modulation(module.features(batch["ref_image"]), batch["ref_box"])
    test_features = net.test_features(module.features(batch["test_image"]))
    size_norm = batch["test_box"][:, 2:]
    x = BoxConditioning(modulation, test_features, size_norm)
    assert x.shape[0] == 2
    energy = BoxEnergy(net)(x, box_convert(batch["proposals"], "xywh", "ebm", size_norm))
    direct = net.predict_iou(modulation, test_features, batch["proposals"])
    torch.testing.assert_close(energy, direct, rtol=1e-4, atol=1e-5)


# NCE+ starts far above its chance level log(M + 1) = 4.86 (random energies of large magnitude)
# and falls more slowly in relative terms than the MSE.
@pytest.mark.slow
@pytest.mark.parametrize(("loss", "factor"), [("mse", 0.7), ("nce+", 0.85)])
def test_a_few_steps_on_generated_pairs_lower_the_loss(loss, factor):
    module, batch = smoke_module_and_batch(loss)
    module.train()
    optimizer = torch.optim.Adam(module.iou_net.parameters(), lr=1e-3)

    def loss_value() -> torch.Tensor:
        torch.manual_seed(0)  # the same noise samples every time (NCE+)
        return module(batch)[0]

    before = loss_value().item()
    for _ in range(8):
        optimizer.zero_grad()
        loss_value().backward()
        optimizer.step()
    after = loss_value().item()
    assert math.isfinite(after)
    assert after < factor * before, (before, after)


def test_backbone_stays_frozen_and_out_of_checkpoints():
    from ebmtrack.training.checkpoint import trainable_state_dict

    module, _ = smoke_module_and_batch("mse", batch_size=1)
    module.train()
    assert not module.backbone.training
    assert not any(p.requires_grad for p in module.backbone.parameters())
    keys = trainable_state_dict(module)
    assert keys and all(k.startswith("iou_net.") for k in keys)


@pytest.mark.parametrize("loss", ["sm", "dsm"])
def test_every_ebm_loss_has_a_box_recipe_and_input_gradient_losses_train(loss):
    assert set(EBM_RECIPES) == set(LOSSES)
    module, batch = smoke_module_and_batch(loss, batch_size=2)
    assert module.needs_input_grad
    value, _ = module(batch)
    assert torch.isfinite(value)
    # Score matching differentiates df/dy again, through PrRoIPool's box gradient. (Parameters
    # that only shift f, like the last bias, get no gradient: df/dy does not depend on them.)
    value.backward()
    named = {n: p.grad for n, p in module.iou_net.named_parameters() if p.grad is not None}
    assert all(torch.isfinite(g).all() for g in named.values())
    assert any("feature_conv" in n or "conv" in n for n in named), sorted(named)
    assert sum(g.abs().sum() > 0 for g in named.values()) >= len(named) // 2


def test_bad_loss_configs_are_rejected():
    with pytest.raises(ValueError, match="choose from mse, ml-is"):
        BoxLossConfig("l1")
    with pytest.raises(ValueError, match="takes no params"):
        BoxLossConfig("mse", {"beta": 0.1})
    with pytest.raises(ValueError, match="unknown param.s. betta of loss nce.; valid: num_samples"):
        BoxLossConfig("nce+", {"betta": 0.1})
    assert BoxLossConfig("nce+", {"beta": 0.2}).resolved_params()["beta"] == 0.2
    assert BoxLossConfig("kld-is").resolved_params()["label_sigma"] == 0.05


def test_head_must_match_the_backbone_layers():
    from ebmtrack.models.backbones import create_backbone
    from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig

    backbone = create_backbone("mobilenetv2", pretrained=False)
    with pytest.raises(ValueError, match="do not match the backbone layers"):
        BoxRegressionModule(backbone, AtomIoUNet(IoUNetConfig(width=0.1)))


def test_both_levels_may_read_one_layer():
    # A one-level backbone (nanotrack's) feeds the same map to the fine and the coarse branch.
    from ebmtrack.models.backbones import create_backbone
    from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig

    backbone = create_backbone("mobilenetv2", pretrained=False)
    dims = (16, 16)
    head = IoUNetConfig((96, 96), dims, dims, width=0.1, strides=(16, 16))
    module = BoxRegressionModule(backbone, AtomIoUNet(head), layers=("features.13",) * 2)
    fine, coarse = module.features(torch.rand(2, 3, 64, 64) * 255)
    assert fine.shape == (2, 96, 4, 4)
    assert torch.equal(fine, coarse)
    with pytest.raises(ValueError, match="valid layers"):
        BoxRegressionModule(backbone, AtomIoUNet(head), layers=("features.99",) * 2)


def test_proposal_ranking_stats_on_known_orders():
    iou = torch.tensor([[0.2, 0.9, 0.5, 0.7], [0.1, 0.3, 0.8, 0.6]]) * 2 - 1
    perfect = proposal_ranking_stats(iou * 3 + 1, iou)  # any increasing map of the IoU
    assert perfect["rank_corr"].item() == pytest.approx(1.0)
    assert perfect["top1_iou"].item() == pytest.approx((0.9 + 0.8) / 2)
    reversed_ = proposal_ranking_stats(-iou, iou)
    assert reversed_["rank_corr"].item() == pytest.approx(-1.0)
    assert reversed_["top1_iou"].item() == pytest.approx((0.2 + 0.1) / 2)
    flat = proposal_ranking_stats(torch.zeros_like(iou), iou)
    assert torch.isfinite(flat["rank_corr"])


def test_validation_mode_adds_ranking_stats_for_ebm_losses():
    module, batch = smoke_module_and_batch("kld-is", batch_size=2)
    assert module.train()(batch)[1] == {}
    stats = module.eval()(batch)[1]
    assert set(stats) == {"rank_corr", "top1_iou"}
    assert -1 <= stats["rank_corr"].item() <= 1 and 0 <= stats["top1_iou"].item() <= 1


@pytest.mark.parametrize("loss", ["mse", "nce+"])
def test_the_head_on_windows_has_the_whole_maps_loss_and_gradients(loss):
    module, batch = smoke_module_and_batch(loss, batch_size=4)
    module.windows = True
    module.eval()  # BatchNorm from running statistics: a window cannot change them

    def loss_and_grads():
        module.iou_net.zero_grad()
        torch.manual_seed(0)  # the same noise samples (NCE+)
        value, stats = module(batch)
        value.backward()
        return value.detach(), stats, [p.grad.clone() for p in module.iou_net.parameters()]

    windowed = loss_and_grads()

    module.windows = False
    full = loss_and_grads()
    torch.testing.assert_close(windowed[0], full[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(windowed[1], full[1], rtol=1e-5, atol=1e-6)
    for mine, theirs in zip(windowed[2], full[2]):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-6)
