"""The nine method configurations of Table 1 with their appendix B.4 hyperparameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MethodSpec:
    """A table row: which ``ebmtrack.ebm`` loss, with which hyperparameters.

    ``sample_based`` methods take ``num_samples`` (M). Offsets are shared across a mini-batch,
    as in the reference code, for the importance-sampling and NCE methods.
    """

    name: str
    loss: str
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    sample_based: bool = True

    def loss_kwargs(self, num_samples: int) -> dict[str, Any]:
        kwargs = dict(self.hyperparameters)
        if self.sample_based:
            kwargs["num_samples"] = num_samples
        return kwargs


_IS = {"proposal_sigmas": (0.2, 1.6), "shared_samples": True}
_NCE = {"noise_sigmas": (0.1, 0.8), "shared_samples": True}

METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec("ml-is", "ml-is", _IS),
        MethodSpec("ml-mcmc-1", "ml-mcmc", {"num_steps": 1, "step_length": 0.05}),
        MethodSpec("ml-mcmc-16", "ml-mcmc", {"num_steps": 16, "step_length": 0.05}),
        MethodSpec("ml-mcmc-256", "ml-mcmc", {"num_steps": 256, "step_length": 0.05}),
        MethodSpec("kld-is", "kld-is", {**_IS, "label_sigma": 0.025}),
        MethodSpec("nce", "nce", _NCE),
        MethodSpec("sm", "sm", sample_based=False),
        MethodSpec("dsm", "dsm", {"sigma": 0.2}),
        MethodSpec("nce+", "nce+", {**_NCE, "beta": 0.025}),
    )
}

# Table 1 of the paper: D_KL (mean of the best 5 of 20 runs, averaged over both data sets) and
# training cost in seconds per epoch on the authors' hardware.
PAPER_TABLE1: dict[str, tuple[float, float]] = {
    "ml-is": (0.062, 0.44),
    "ml-mcmc-1": (0.865, 0.54),
    "ml-mcmc-16": (0.449, 2.41),
    "ml-mcmc-256": (0.106, 30.8),
    "kld-is": (0.088, 0.44),
    "nce": (0.068, 0.45),
    "sm": (0.781, 0.60),
    "dsm": (0.395, 0.47),
    "nce+": (0.066, 0.46),
}

# Figure 2 compares these methods over the number of samples M.
FIGURE2_METHODS = ("ml-is", "kld-is", "nce", "nce+")


def parse_methods(text: str) -> list[str]:
    """Comma-separated method names (or ``all``) -> list; ``ValueError`` naming valid choices."""
    names = list(METHODS) if text.strip() == "all" else [n.strip() for n in text.split(",") if n]
    unknown = [n for n in names if n not in METHODS]
    if unknown or not names:
        raise ValueError(
            f"methods: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from all, {', '.join(METHODS)}"
        )
    return names
