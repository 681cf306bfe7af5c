"""Offline training: the generic loop (:class:`Trainer`) and the box-regression experiments."""

from .config import TrainerConfig, config_from_dict, config_to_dict, save_config
from .trainer import EpochResult, NonFiniteLossError, Trainer

__all__ = [
    "EpochResult",
    "NonFiniteLossError",
    "Trainer",
    "TrainerConfig",
    "config_from_dict",
    "config_to_dict",
    "save_config",
]
