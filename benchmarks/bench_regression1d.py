"""Training cost of the 1-D regression study, seconds per epoch for each method.

Times ``--steps`` optimizer steps (batch 32, M = 1024, the study's hyperparameters) and
extrapolates to an epoch of 2000 examples (63 steps). Each method is timed with the study's
network, set up as the study trains it, and with a plain implementation of the same network
(row-major, ``torch.tanh``, autograd, default Adam and allocator); the ratio is measured in the
same run, which matters on a shared machine, and CPU (process) time is reported next to
wall-clock time for the same reason.

    python benchmarks/bench_regression1d.py [--methods nce+,ml-is] [--steps 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
from torch import nn

from ebmtrack.ebm import get_loss
from ebmtrack.process import retain_freed_memory
from ebmtrack.regression1d.data import NUM_TRAIN, sample_dataset
from ebmtrack.regression1d.methods import METHODS, PAPER_TABLE1, parse_methods
from ebmtrack.regression1d.model import Regression1dEnergy

BATCH = 32


class PlainNetwork(nn.Module):
    """The same parameters evaluated by ``Regression1dEnergy.reference_forward``."""

    def __init__(self, net: Regression1dEnergy):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return self.net.reference_forward(x, y)


def seconds_per_epoch(method: str, plain: bool, steps: int, threads: int) -> tuple[float, float]:
    """Wall-clock and CPU (process) seconds per epoch on ``threads`` threads.

    Ours runs as ``train_model`` runs it: the model's own threads, one torch thread, fused Adam.
    The plain network uses torch's intra-op threads and the default Adam.
    """
    spec = METHODS[method]
    x_all, y_all = (torch.from_numpy(a) for a in sample_dataset(1, seed=1))
    torch.manual_seed(0)
    net = Regression1dEnergy(threads=1 if plain else threads)
    model = PlainNetwork(net) if plain else net
    torch.set_num_threads(threads if plain else 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, **({} if plain else {"fused": True}))
    kwargs = spec.loss_kwargs(1024)
    if spec.sample_based:
        kwargs["generator"] = torch.Generator().manual_seed(0)
    loss_fn = get_loss(spec.loss)
    batches = torch.randperm(NUM_TRAIN).split(BATCH)

    def step(i):
        idx = batches[i % len(batches)]
        loss = loss_fn(model, x_all[idx], y_all[idx, None], **kwargs)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step(0)  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        step(i + 1)
    scale = math.ceil(NUM_TRAIN / BATCH) / steps
    return (time.perf_counter() - wall) * scale, (time.process_time() - cpu) * scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--methods", default="all")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per method")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {args.threads} thread(s), load average {os.getloadavg()}")
    methods = parse_methods(args.methods)
    # L = 256 costs ~250 steps' worth per step: time fewer steps
    steps = {m: max(1, args.steps // 10) if m == "ml-mcmc-256" else args.steps for m in methods}
    # the plain network first, with glibc's default allocator; then ours, as the study runs it
    plain_times = {m: seconds_per_epoch(m, True, steps[m], args.threads) for m in methods}
    retain_freed_memory()
    print(
        "| method | s/epoch ours (CPU s) | s/epoch plain network (CPU s) | speed-up (CPU) "
        "| paper s/epoch (GPU) |"
    )
    print("|---|---|---|---|---|")
    for method in methods:
        ours = seconds_per_epoch(method, False, steps[method], args.threads)
        plain = plain_times[method]
        print(
            f"| {method} | {ours[0]:.3f} ({ours[1]:.3f}) | {plain[0]:.3f} ({plain[1]:.3f}) | "
            f"{plain[0] / ours[0]:.2f}x ({plain[1] / ours[1]:.2f}x) | "
            f"{PAPER_TABLE1[method][1]:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
