"""An energy-based box head on the siamese estimator's own features, refining its box: trained
here with NCE+ on the training pack, judged on its held-out clips (never the test sequences).

The siamese box estimator (NanoTrack v2's networks, :mod:`ebmtrack.lite.siamese`) ends in a box
tower: 96 channels on its 16 x 16 grid, computed for every frame anyway. This script asks
whether an EBM f(x, y) on those tracking-trained features, p(y | x) as in the BMVC paper but
conditioned spatially (PrRoIPool of the tower at the box y), refines the decoded box on objects
it never saw, with DiMP-NCE+'s climb (relative box coordinates, a step kept only where f rises,
else halved).

One script, top to bottom:

1. **samples**: pairs of frames of one sequence (template from one, search crop from the other,
   centred near the true centre and scaled from a jittered size, as a tracker's crop is), the
   siamese decoding of each; the tower's features, the true box and the decoded box, in search
   crop pixels. Training pairs from the pack's training tracks and clips, held-out pairs from its
   held-out clips (``CLIP_HOLDOUT``); cached in ``OUT/samples-*.npz``.
2. **train**: f(x, y) = MLP(PrRoIPool(tower, y, 4 x 4)); NCE+ (128 noise boxes, sigmas 0.05 /
   0.5, beta 0.1: the box settings of :mod:`ebmtrack.training.box_regression`), Adam.
3. **measure**, after every epoch, on held-out and training pairs: the mean IoU of the decoded box
   and of the box after the climb (5 steps, S1), the gain, the share of boxes made worse.

Usage::

    python studies/siamese_ebm.py --out runs/siamese-ebm --epochs 8
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.ebm.losses import nce_plus_loss
from ebmtrack.ebm.sampling import gradient_ascent
from ebmtrack.lite.crop import crop_square
from ebmtrack.lite.siamese import (
    EXEMPLAR_SIZE,
    INSTANCE_SIZE,
    SiameseBoxConfig,
    SiameseBoxEstimator,
    decode_box,
    template_side,
)
from ebmtrack.ops.boxes import box_convert, iou_xywh
from ebmtrack.ops.prroi_pool import prroi_pool
from ebmtrack.process import configure_threads
from ebmtrack.training.sources.pack import CLIP_HOLDOUT, PACK_HOLDOUT
from ebmtrack.weights import shipped_file

TOWER = "/bbox_pw_tower/bbox_pw_tower.23/Clip_output_0"
"""The box tower's last activation in NanoTrack v2's head graph: (1, 96, 16, 16)."""
CENTER_JITTER, SCALE_JITTER = 0.08, 0.1
"""The crop's centre off the truth by N(0, 0.08 sqrt(w h)) per axis, its size by exp(N(0, 0.1))."""


class TowerEstimator(SiameseBoxEstimator):
    """The shipped siamese estimator whose head also returns the box tower's features."""

    def __init__(self, config: SiameseBoxConfig, folder: Path) -> None:
        head = onnx.load(str(shipped_file("siamese-head", "nanotrack").checked_path()))
        head.graph.output.append(onnx.helper.make_tensor_value_info(TOWER, 1, None))
        path = folder / "head-with-tower.onnx"
        onnx.save(head, str(path))
        super().__init__(shipped_file("siamese-backbone", "nanotrack").checked_path(), path, config)

    def sample(self, frame, template, center, size, truth) -> tuple[np.ndarray, ...]:
        """(tower (96, 16, 16), truth xywh, decoded box xywh) in search-crop px."""
        side = template_side(size, self.config.siamese_context)
        scale = EXEMPLAR_SIZE / side
        patch, matrix = crop_square(frame, tuple(center), side * INSTANCE_SIZE / EXEMPLAR_SIZE,
                                    INSTANCE_SIZE)
        out = self.head({"input1": template, "input2": self._features(patch)})
        offset, raw, rate, _ = decode_box(out["output1"][0], out["output2"][0], size * scale,
                                          self.config)
        box_size = raw * rate + size * scale * (1 - rate)  # the reported box, smoothed
        centre = INSTANCE_SIZE / 2 + offset
        decoded = np.concatenate([centre - box_size / 2, box_size])
        true_centre = matrix[:, :2] @ (truth[:2] + truth[2:] / 2) + matrix[:, 2]
        true_box = np.concatenate([true_centre - truth[2:] * scale / 2, truth[2:] * scale])
        return out[TOWER][0].astype(np.float16), true_box, decoded


def make_samples(estimator, sequences, pairs_per_sequence, rng) -> dict[str, np.ndarray]:
    towers, truths, decoded, names = [], [], [], []
    for sequence in sequences:
        truth = sequence.ground_truth
        count = len(sequence)
        for _ in range(pairs_per_sequence):
            a, b = rng.choice(count, 2, replace=False)
            box_a, box_b = truth[a], truth[b]
            template = estimator.template(
                sequence.frame(a), box_a[:2] + box_a[2:] / 2, box_a[2:]
            )
            scale = float(np.sqrt(box_b[2] * box_b[3]))
            center = box_b[:2] + box_b[2:] / 2 + rng.normal(0, CENTER_JITTER * scale, 2)
            size = box_b[2:] * np.exp(rng.normal(0, SCALE_JITTER))
            tower, true_box, box = estimator.sample(
                sequence.frame(b), template, center, size, box_b
            )
            towers.append(tower)
            truths.append(true_box)
            decoded.append(box)
            names.append(sequence.name)
    return {
        "tower": np.stack(towers),
        "truth": np.stack(truths).astype(np.float32),
        "decoded": np.stack(decoded).astype(np.float32),
        "sequence": np.asarray(names),
    }


class TowerEnergy(nn.Module):
    """f(x, y): an MLP on the 4 x 4 PrRoIPool of the tower at box y (EBM coordinates of
    :func:`~ebmtrack.ops.boxes.box_convert`, normalised by ``size_norm``). ``x`` indexes the
    rows of the features bound with :meth:`bind` (the calling convention of
    :mod:`ebmtrack.ebm`)."""

    def __init__(self, channels: int = 96, hidden: int = 256) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, 32, 1)
        self.mlp = nn.Sequential(nn.Linear(32 * 16, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.features = self.size_norm = None

    def bind(self, features: torch.Tensor, size_norm: torch.Tensor) -> None:
        self.features, self.size_norm = self.reduce(features), size_norm

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        batch, count = y.shape[:2]
        boxes = box_convert(y, "ebm", "xywh", self.size_norm[x])
        xyxy = torch.cat([boxes[..., :2], boxes[..., :2] + boxes[..., 2:]], -1)
        index = torch.arange(batch, dtype=y.dtype).repeat_interleave(count)[:, None]
        rois = torch.cat([index, xyxy.reshape(-1, 4)], 1)
        pooled = prroi_pool(self.features[x], rois, 4, 1 / 16)
        return self.mlp(pooled.flatten(1)).reshape(batch, count)


def measure(model: TowerEnergy, data: dict, step: float, steps: int = 5) -> dict[str, float]:
    """Mean IoU of the decoded box and of the climbed one, over ``data``'s pairs."""
    features = torch.from_numpy(data["tower"].astype(np.float32))
    decoded = torch.from_numpy(data["decoded"])
    truth = torch.from_numpy(data["truth"])
    before, after = [], []
    with torch.no_grad():
        for start in range(0, len(decoded), 256):
            part = slice(start, start + 256)
            norm = decoded[part, 2:]
            model.bind(features[part], norm)
            y0 = box_convert(decoded[part][:, None], "xywh", "ebm", norm)
            index = torch.arange(len(y0))
            y, _ = gradient_ascent(model, index, y0, steps, step, 0.5)
            climbed = box_convert(y, "ebm", "xywh", norm)[:, 0]
            before.append(iou_xywh(decoded[part], truth[part]))
            after.append(iou_xywh(climbed, truth[part]))
    before, after = torch.cat(before), torch.cat(after)
    return {
        "decoded": float(before.mean()),
        "climbed": float(after.mean()),
        "gain": float((after - before).mean()),
        "worse": float((after < before - 1e-4).float().mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", type=Path, default=Path("../shared/data/train"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=200, help="training pairs per sequence")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--steps", default="1e-3,2.5e-3,1e-2", help="climb step lengths measured")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    configure_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    sets = {
        "train": [s for s in load_folder(args.pack / "sequences") if s.name not in PACK_HOLDOUT]
        + [s for s in load_folder(args.pack / "clips") if s.name not in CLIP_HOLDOUT],
        "held-out": [s for s in load_folder(args.pack / "clips") if s.name in CLIP_HOLDOUT],
    }
    estimator = None
    data = {}
    for name, sequences in sets.items():
        path = args.out / f"samples-{name}.npz"
        if not path.exists():
            estimator = estimator or TowerEstimator(SiameseBoxConfig(), args.out)
            tic = time.time()
            pairs = args.pairs if name == "train" else 100
            np.savez(path, **make_samples(estimator, sequences, pairs, rng))
            print(f"{name}: {len(sequences)} sequences, {time.time() - tic:.0f} s", flush=True)
        data[name] = dict(np.load(path))
    torch.manual_seed(args.seed)
    model = TowerEnergy()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train = data["train"]
    features = torch.from_numpy(train["tower"].astype(np.float32))
    truth = torch.from_numpy(train["truth"])
    steps = [float(s) for s in args.steps.split(",")]
    record = []
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(truth))
        losses, tic = [], time.time()
        for start in range(0, len(order) - 31, 32):
            batch = order[start : start + 32]
            norm = truth[batch, 2:]
            model.bind(features[batch], norm)
            y = box_convert(truth[batch][:, None], "xywh", "ebm", norm)[:, 0]
            loss = nce_plus_loss(
                model, torch.arange(len(batch)), y, num_samples=128,
                noise_sigmas=(0.05, 0.5), beta=0.1,
            )  # fmt: skip
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        row = {"epoch": epoch, "pairs_seen": epoch * len(truth), "loss": float(np.mean(losses))}
        for name in ("held-out", "train"):
            for step in steps:
                row[f"{name} {step:g}"] = measure(model, data[name], step)
        model.train()
        record.append(row)
        held = {k: round(v["gain"], 4) for k, v in row.items() if k.startswith("held-out")}
        trained = {k: round(v["gain"], 4) for k, v in row.items() if k.startswith("train ")}
        print(f"epoch {epoch}: loss {row['loss']:.3f} ({time.time() - tic:.0f} s); gains "
              f"held-out {held}; train {trained}", flush=True)
        (args.out / "record.json").write_text(json.dumps(record, indent=1))
        torch.save(model.state_dict(), args.out / "head.pt")


if __name__ == "__main__":
    main()
