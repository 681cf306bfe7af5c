import csv

import cv2
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.experiment import MODEL_FILE, DataConfig, preset_config, run_experiment


def tiny_config(loss: BoxLossConfig, num_workers: int = 0):
    """Three epochs of two batches of 4 pairs on the synthetic-smoke model."""
    config = preset_config("synthetic-smoke")
    config.loss = loss
    trainer = config.trainer
    trainer.epochs, trainer.samples_per_epoch, trainer.batch_size = 3, 8, 4
    trainer.val_samples, trainer.progress, trainer.num_workers = 4, False, num_workers
    return config


NCE_PLUS = BoxLossConfig("nce+", {"num_samples": 16})


@pytest.mark.slow
def test_box_training_resumed_after_a_stop_matches_the_uninterrupted_run(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_experiment(tiny_config(NCE_PLUS), tmp_path / "full")
        cut = run_experiment(tiny_config(NCE_PLUS), tmp_path / "cut", stop_after_epoch=1)
        assert [r.epoch for r in cut] == [1] and not (tmp_path / "cut" / MODEL_FILE).exists()
        torch.manual_seed(777)  # as if in a new process
        # The resumed part loads its data in 2 worker processes: pairs are seeded by their index,
        # so where they are made does not matter.
        resumed = run_experiment(
            tiny_config(NCE_PLUS, num_workers=2), tmp_path / "cut", resume=True
        )
        assert [r.epoch for r in resumed] == [2, 3]
    finally:
        torch.set_num_threads(threads)
    # NCE+ draws noise and jitter every step: equal weights need exact RNG handling.
    full = load_file(str(tmp_path / "full" / MODEL_FILE))
    again = load_file(str(tmp_path / "cut" / MODEL_FILE))
    assert full.keys() == again.keys()
    for key in full:
        torch.testing.assert_close(again[key], full[key], rtol=0, atol=1e-6)


def write_got10k_split(root, split: str, sequences) -> None:
    """A GOT-10k-layout split folder made of generated sequences."""
    split_dir = root / split
    split_dir.mkdir(parents=True)
    names = []
    for k, sequence in enumerate(sequences):
        name = f"GOT-10k_{split.title()}_{k + 1:06d}"
        folder = split_dir / name
        folder.mkdir()
        for i in range(len(sequence)):
            frame = cv2.cvtColor(sequence.frame(i), cv2.COLOR_RGB2BGR)
            cv2.imwrite(str(folder / f"{i + 1:08d}.jpg"), frame)
        np.savetxt(folder / "groundtruth.txt", sequence.ground_truth, fmt="%.4f", delimiter=",")
        np.savetxt(folder / "cover.label", sequence.visible.astype(int) * 8, fmt="%d")
        names.append(name)
    (split_dir / "list.txt").write_text("\n".join(names) + "\n")


def test_training_on_a_data_set_folder_with_validation_split(tmp_path):
    look = SyntheticConfig(num_frames=6, frame_size=(96, 128))
    write_got10k_split(tmp_path / "got10k", "train", SyntheticSequences(3, look, seed=5))
    write_got10k_split(tmp_path / "got10k", "val", SyntheticSequences(2, look, seed=6))
    config = tiny_config(BoxLossConfig("mse"))
    config.data = DataConfig(
        roots={"got10k": str(tmp_path / "got10k")}, val_splits={"got10k": "val"}
    )
    config.trainer.epochs = 1
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        (result,) = run_experiment(config, tmp_path / "run")
    finally:
        torch.set_num_threads(threads)
    assert result.val is not None and 0 <= result.val["top1_iou"] <= 1
    with open(tmp_path / "run" / "metrics.csv") as handle:
        assert [row["split"] for row in csv.DictReader(handle)] == ["train", "val"]
