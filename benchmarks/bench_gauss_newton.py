"""Benchmark of ebmtrack.optim on ATOM's online classification problem (CVPR 2019, eq. 2-3).

1. Convergence: Gauss-Newton / conjugate gradient (6 GN x 10 CG, Fletcher-Reeves, ATOM's
   preconditioner) against Adam and SGD with momentum given the same number of backward passes
   (GN-CG: 2 x 10 per GN iteration, 120 in all; each first-order step is one forward and one
   backward pass), each at its best learning rate from a grid, on synthetic features of the
   first-frame size: 30 samples of 256 x 18 x 18, projection to 64 channels, 4x4 filter.
2. Speed: the first-frame optimisation (6 x 10) and one per-frame update (5 CG iterations on the
   filter only, with 250 stored samples of 64 x 18 x 18 projected features), the update both
   with the generic solver (double backprop) and as the tracker runs it
   (``ebmtrack.models.atom_classifier.update_filter``: closed-form Jacobian products, in float32
   and with bfloat16 products; the bfloat16 update's loss is compared with the float32 one's).
   Ratios against the dense matrix products that this formulation must do, measured in the
   same run, and against the same residuals written with conv2d. ``--previous FILE`` also times the
   residuals of another version of ``ebmtrack/optim/problems.py`` (e.g. an older commit's,
   from ``git show``) on the same data.

Run it as ``python benchmarks/bench_gauss_newton.py``; it writes JSON files, a markdown table and
the convergence plot under runs/benchmarks/ (``--plot`` chooses another path for the PNG).
``--seeds 0`` skips the convergence part.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from bench_prroi_pool import load_module, measure

from ebmtrack.models.atom_classifier import AtomClassifier, ClassifierConfig, update_filter
from ebmtrack.optim import conjugate_gradient, gauss_newton_cg
from ebmtrack.optim.problems import AtomClassifierProblem, first_order_losses, pelu

GN_ITERS, CG_ITERS = 6, 10
BACKWARDS_PER_GN = 2 * CG_ITERS  # J^T u with its graph, 2 per CG iteration but 1 in the last
LEARNING_RATES = {"adam": (3e-5, 1e-4, 3e-4, 1e-3), "sgd": (1e-6, 3e-6, 1e-5, 2e-5)}


def conv2d_residuals(problem: AtomClassifierProblem):
    """The same residuals written with conv2d, for comparison with the matmul formulation."""

    def residuals(params):
        w1, w2 = params
        projected = F.conv2d(problem.features, w1[:, :, None, None])
        size = problem.features.shape[-1]
        scores = F.conv2d(projected, w2[None], padding=w2.shape[-1] // 2)[..., :size, :size]
        data = problem.sample_weights.sqrt().view(-1, 1, 1, 1) * (
            pelu(scores, problem.alpha) - problem.labels
        )
        return [data, math.sqrt(problem.projection_reg) * w1, math.sqrt(problem.filter_reg) * w2]

    return residuals


def convergence(seeds: int) -> list[dict]:
    runs = []
    budget = GN_ITERS * BACKWARDS_PER_GN
    for seed in range(seeds):
        generator = torch.Generator().manual_seed(seed)
        problem = AtomClassifierProblem.synthetic(generator=generator)
        start = problem.initial_params(generator=generator)
        result = gauss_newton_cg(
            problem.residuals, start, GN_ITERS, CG_ITERS, problem.preconditioner()
        )
        run = {
            "seed": seed,
            "gn_cg": {
                "backward_passes": [i * BACKWARDS_PER_GN for i in range(GN_ITERS + 1)],
                "losses": result.losses.tolist(),
            },
        }
        for name, lrs in LEARNING_RATES.items():
            curves = {lr: first_order_losses(problem.loss, start, budget, name, lr) for lr in lrs}
            finals = {lr: c[-1].nan_to_num(math.inf).item() for lr, c in curves.items()}
            best = min(finals, key=finals.get)
            run[name] = {"lr": best, "final_by_lr": finals, "losses": curves[best].tolist()}
        print(
            f"seed {seed}: initial {result.losses[0]:.4f}  GN-CG {result.losses[-1]:.4f}  "
            f"Adam {run['adam']['losses'][-1]:.4f} (lr {run['adam']['lr']})  "
            f"SGD {run['sgd']['losses'][-1]:.4f} (lr {run['sgd']['lr']})",
            flush=True,
        )
        runs.append(run)
    return runs


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, run in enumerate(runs):
        label = (lambda text: text) if i == 0 else (lambda text: None)
        gn = run["gn_cg"]
        ax.plot(gn["backward_passes"], gn["losses"], "o-", color="C0", label=label("GN-CG 6x10"))
        for name, color in (("adam", "C1"), ("sgd", "C2")):
            losses = run[name]["losses"]
            text = "SGD, momentum 0.9 (best lr)" if name == "sgd" else "Adam (best lr)"
            ax.plot(range(len(losses)), losses, color=color, label=label(text))
    ax.set_yscale("log")
    ax.set_xlabel("backward passes")
    ax.set_ylabel("loss 1/2 ||r||^2")
    ax.set_title(f"ATOM first-frame classifier problem ({len(runs)} seeds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def tracker_update(problem, filt, product_dtype, final_loss=False):
    """The tracker's update of ``filt`` (1 x D x k x k) on the problem's samples, as a callable
    returning the losses (before, and with ``final_loss`` after; the tracker skips that pass)."""
    config = ClassifierConfig(in_channels=problem.features.shape[1], projection_dim=filt.shape[1])
    classifier = AtomClassifier(config)
    labels, weights = problem.labels[:, 0], problem.sample_weights

    def run():
        with torch.no_grad():
            classifier.filter.copy_(filt)
        return update_filter(
            classifier, problem.features, labels, weights, 5, final_loss, product_dtype
        )

    return run


def solver_run(problem, params, residuals):
    """The timed call: GN-CG 6 x 10 on ``residuals``; (None) ATOM's update of the filter with the
    generic solver; (a dtype) the tracker's update with products in that dtype."""
    if isinstance(residuals, torch.dtype):
        return tracker_update(problem, params[0][None], residuals)
    if residuals is None:  # filter only, Polak-Ribiere, no preconditioner
        return lambda: conjugate_gradient(problem.filter_residuals, params, 5, final_loss=False)
    return lambda: gauss_newton_cg(
        residuals, params, GN_ITERS, CG_ITERS, problem.preconditioner(), final_loss=False
    )


def timings(threads: int, reps: int, previous: Path | None = None) -> list[dict]:
    torch.set_num_threads(threads)
    modules = {"": AtomClassifierProblem}
    if previous is not None:
        modules[" (previous)"] = load_module(previous).AtomClassifierProblem
    cases = []
    for label, problem_class in modules.items():
        # The same generator draws give the same data with every version of the module.
        generator = torch.Generator().manual_seed(0)
        first = problem_class.synthetic(generator=generator)
        start = first.initial_params(generator=generator)
        memory = problem_class.synthetic(250, 64, generator=generator)
        cases += [
            (f"first frame, 6 GN x 10 CG{label}", first, start, first.residuals),
            (f"update, 1 GN x 5 CG, 250 samples{label}", memory, [start[1]], None),
        ]
        if not label:
            residuals = conv2d_residuals(first)
            cases.append(("first frame, 6 GN x 10 CG (conv2d residuals)", first, start, residuals))
            for dtype in (torch.float32, torch.bfloat16):
                name = f"update, tracker's closed form, {str(dtype)[6:]} products"
                cases.append((name, memory, [start[1]], dtype))

    # The floors: the products that this formulation needs. First frame: per GN iteration 2
    # (forward, backward) and per CG iteration 2 (J p, J^T q; the last one only J p) products of
    # the folded filter (16 x 256) @ (256 x 9720); without the fold (the previous formulation)
    # they were as many (64 x 256) @ (256 x 9720) projections. Update: as many
    # (16 x 64) @ (64 x 81000).
    first_count, update_count = GN_ITERS * (1 + 2 * CG_ITERS), 1 + 2 * 5
    flat = torch.randn(256, 30 * 18 * 18)
    taps, projection = torch.randn(16, 256), torch.randn(64, 256)
    w2, flat_mem = torch.randn(16, 64), torch.randn(64, 250 * 18 * 18)
    floors = {
        "first frame": (lambda: taps @ flat, first_count),
        "projection": (lambda: projection @ flat, first_count),
        "update": (lambda: w2 @ flat_mem, update_count),
    }
    floors = {
        name: {k: v * count for k, v in measure(fn, 20).items() if k != "reps"}
        for name, (fn, count) in floors.items()
    }
    rows = []
    for name, problem, params, residuals in cases:
        runs = reps if "update" in name else max(1, reps // 4)
        call = solver_run(problem, params, residuals)
        ours = measure(call, runs, warmup=1)
        floor = floors["update" if "update" in name else "first frame"]
        row = {"threads": threads, "case": name, "ours": ours, "floor": floor}
        if isinstance(residuals, torch.dtype):
            update = tracker_update(problem, params[0][None], residuals, final_loss=True)
            row["losses_before_after"] = update().tolist()
        if "first frame" in name:
            row["unfolded_projection_floor"] = floors["projection"]
        row["ratio_wall_min"] = ours["wall_min_ms"] / floor["wall_min_ms"]
        row["ratio_cpu"] = ours["cpu_median_ms"] / floor["cpu_median_ms"]
        rows.append(row)
        print(
            f"{threads} thr {name:46s} {ours['wall_min_ms']:8.1f} ms (median "
            f"{ours['wall_median_ms']:.1f}, cpu {ours['cpu_median_ms']:.1f})  floor "
            f"{floor['wall_min_ms']:.1f} ms (cpu {floor['cpu_median_ms']:.1f})  "
            f"x{row['ratio_wall_min']:.2f} (cpu x{row['ratio_cpu']:.2f})",
            flush=True,
        )
    projection = floors["projection"]
    print(
        f"{threads} thr floor of the unfolded projection products {projection['wall_min_ms']:.1f}"
        f" ms (cpu {projection['cpu_median_ms']:.1f})",
        flush=True,
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--reps", type=int, default=20, help="repetitions of the update")
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks"))
    parser.add_argument("--plot", type=Path, default=None, help="PNG path of the curves")
    parser.add_argument(
        "--previous", type=Path, default=None, help="another problems.py to time as a baseline"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    torch.set_num_threads(min(args.threads))
    runs = convergence(args.seeds)
    if runs:
        plot(runs, args.plot or args.out / "gauss_newton_convergence.png")
        (args.out / "gauss_newton_convergence.json").write_text(json.dumps(runs, indent=1))
    speed = [row for t in args.threads for row in timings(t, args.reps, args.previous)]

    lines = [
        "| seed | initial loss | GN-CG 6x10 | Adam (best lr) | SGD+momentum (best lr) |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        lines.append(
            f"| {run['seed']} | {run['gn_cg']['losses'][0]:.4f} | "
            f"{run['gn_cg']['losses'][-1]:.4f} | "
            f"{run['adam']['losses'][-1]:.4f} (lr {run['adam']['lr']:g}) | "
            f"{run['sgd']['losses'][-1]:.4f} (lr {run['sgd']['lr']:g}) |"
        )
    lines += [
        "",
        "| threads | case | wall min / median (ms) | CPU median (ms) "
        "| matmul floor: wall min / CPU median (ms) | ratio to floor: wall min / CPU |",
        "|---|---|---|---|---|---|",
    ]
    for row in speed:
        o, f = row["ours"], row["floor"]
        lines.append(
            f"| {row['threads']} | {row['case']} | {o['wall_min_ms']:.1f} / "
            f"{o['wall_median_ms']:.1f} | {o['cpu_median_ms']:.1f} | {f['wall_min_ms']:.1f} / "
            f"{f['cpu_median_ms']:.1f} | {row['ratio_wall_min']:.2f} / {row['ratio_cpu']:.2f} |"
        )
    lines += ["", "Tracker updates, loss 1/2 ||r||^2 before -> after (same data and start):", ""]
    lines += [
        f"- {row['threads']} thr, {row['case']}: {before:.6g} -> {after:.6g}"
        for row in speed
        if "losses_before_after" in row
        for before, after in [row["losses_before_after"]]
    ]
    table = "\n".join(lines)
    print(table)
    (args.out / "gauss_newton.md").write_text(table + "\n")
    (args.out / "gauss_newton_speed.json").write_text(
        json.dumps({"torch": torch.__version__, "speed": speed}, indent=1)
    )


if __name__ == "__main__":
    main()
