import pytest
import torch
from torch import nn

from ebmtrack.training.checkpoint import (
    capture_rng_state,
    latest_checkpoint,
    read_checkpoint,
    read_checkpoint_config,
    restore_rng_state,
    save_checkpoint,
)
from ebmtrack.training.resume_point import restore_resume_point, write_resume_point


def a_run(folder, steps: int = 3):
    """A run folder whose checkpoint holds a real Adam state of a model with a large layer."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.Linear(512, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(8, 64)).square().mean().backward()
        optimizer.step()
        scheduler.step()
    state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
    (folder / "config.yaml").parent.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text("model: iou-net\n")
    return save_checkpoint(
        folder / "checkpoints", 4, steps, model.state_dict(), state, [capture_rng_state()],
        {"model": "iou-net"},
    )


def test_a_restored_point_is_the_checkpoint_with_its_moments_rounded(tmp_path):
    original = a_run(tmp_path / "run")
    point = tmp_path / "point.safetensors.gz"
    assert write_resume_point(tmp_path / "run", point).epoch == 4
    restored = restore_resume_point(point, tmp_path / "moved")
    assert (restored.epoch, restored.global_step) == (4, 3)
    assert latest_checkpoint(tmp_path / "moved" / "checkpoints") == restored
    assert (tmp_path / "moved" / "config.yaml").read_text() == "model: iou-net\n"
    assert read_checkpoint_config(restored) == {"model": "iou-net"}
    model, state, rng = read_checkpoint(original)
    model2, state2, rng2 = read_checkpoint(restored)
    assert model.keys() == model2.keys()
    assert all(torch.equal(model[k], model2[k]) for k in model)  # the model exact
    assert state2["scheduler"] == state["scheduler"]
    assert state2["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]
    moments = state["optimizer"]["state"]
    for index, entry in moments.items():
        again = state2["optimizer"]["state"][index]
        assert torch.equal(again["step"], entry["step"])
        for key in ("exp_avg", "exp_avg_sq"):
            assert again[key].dtype == entry[key].dtype
            # large moments in bfloat16 (8 bits of mantissa), small ones exact
            tol = 2**-8 if entry[key].numel() >= 4096 else 0.0
            torch.testing.assert_close(again[key], entry[key], rtol=tol, atol=0.0)
    assert torch.equal(rng2[0]["torch"], rng[0]["torch"])
    restore_rng_state(rng2[0])
    expected = torch.rand(3)
    restore_rng_state(rng[0])
    assert torch.equal(torch.rand(3), expected)
    # Smaller than the checkpoint it carries (the moments are two thirds of it).
    on_disk = sum(p.stat().st_size for p in original.path.iterdir())
    assert point.stat().st_size < 0.75 * on_disk


def test_a_point_is_restored_only_into_an_empty_folder_and_only_from_a_point(tmp_path):
    a_run(tmp_path / "run")
    point = tmp_path / "point.safetensors.gz"
    write_resume_point(tmp_path / "run", point)
    with pytest.raises(ValueError, match="already holds a run"):
        restore_resume_point(point, tmp_path / "run")
    (tmp_path / "other.safetensors.gz").write_bytes(b"not a point")
    with pytest.raises(ValueError, match="is not a resume point"):
        restore_resume_point(tmp_path / "other.safetensors.gz", tmp_path / "new")
    with pytest.raises(FileNotFoundError):
        restore_resume_point(tmp_path / "missing.safetensors.gz", tmp_path / "new")
    with pytest.raises(ValueError, match="holds no checkpoint yet"):
        write_resume_point(tmp_path / "new", point)


def test_a_large_point_is_stored_as_parts_and_replaced_whole_or_split(tmp_path):
    a_run(tmp_path / "run")
    whole = tmp_path / "whole.safetensors.gz"
    write_resume_point(tmp_path / "run", whole)
    size = whole.stat().st_size
    point = tmp_path / "point.safetensors.gz"
    write_resume_point(tmp_path / "run", point, part_bytes=size // 3 + 1)  # three parts
    parts = sorted(tmp_path.glob("point.safetensors.gz.part*"))
    assert [p.name[-5:] for p in parts] == ["part1", "part2", "part3"] and not point.exists()
    assert b"".join(p.read_bytes() for p in parts) == whole.read_bytes()
    assert all(p.stat().st_size <= size // 3 + 1 for p in parts)
    restored = restore_resume_point(point, tmp_path / "moved")
    assert restored.epoch == 4
    # Fewer parts, then whole again: nothing of the earlier point is left to be joined to it.
    write_resume_point(tmp_path / "run", point, part_bytes=size // 2 + 1)
    assert sorted(p.name for p in tmp_path.glob("point.safetensors.gz*")) == [
        "point.safetensors.gz.part1",
        "point.safetensors.gz.part2",
    ]
    write_resume_point(tmp_path / "run", point)
    assert [p.name for p in tmp_path.glob("point.safetensors.gz*")] == ["point.safetensors.gz"]
    assert point.read_bytes() == whole.read_bytes()
    assert not list(tmp_path.glob(".*partial"))
