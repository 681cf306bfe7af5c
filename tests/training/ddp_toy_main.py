"""Entry point for the distributed test: ``torchrun ... ddp_toy_main.py RUN_DIR`` (not a test)."""

import sys

import torch
from training_toy import ToyModule, ToyRegression, toy_config

from ebmtrack.training import Trainer
from ebmtrack.training.distributed import init_distributed, shutdown_distributed

if __name__ == "__main__":
    torch.set_num_threads(1)
    context = init_distributed("cpu")
    trainer = Trainer(
        ToyModule(),
        ToyRegression(),
        toy_config(),
        sys.argv[1],
        val_data=ToyRegression(seed=1),
        context=context,
    )
    trainer.fit()
    shutdown_distributed()
