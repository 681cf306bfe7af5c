"""The 1-D regression network f(x, y) of appendix B.2.

x-branch: Linear 1->10, ReLU, Linear 10->10, ReLU. y-branch: Linear 1->10, tanh. Head on the
concatenated 20 features: Linear 20->10, tanh, two residual blocks ``h <- tanh(Linear(h)) + h``,
Linear 10->1 (activations and residuals as in the reference code; the paper gives only sizes).

Training evaluates this network on ``B * M`` candidates (32 x 1025) per step, so the cost is
a few dozen passes over ``(10, 32800)`` tensors. ``Regression1dEnergy.forward`` arranges them for
a CPU (see its docstring); everything below it is that arrangement and its hand-written
backward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

HIDDEN = 10

_sigmoid_backward = torch.ops.aten.sigmoid_backward  # (grad wrt output, output) -> grad wrt input


class _FoldedHead(NamedTuple):
    """The head with ``tanh(z) = 2 sigmoid(2z) - 1`` and the residual stream ``h_k = 2 u_k - k``
    folded into its small tensors, so the big ``(H, N)`` ones need no extra affine passes.

    ``x_part`` ``(H, B)`` is everything that depends on the input alone; biases are ``(H, 1)``
    (``(1, 1)`` for the output) so that they broadcast over the ``N = B * M`` candidates.
    """

    x_part: Tensor
    y_weight: Tensor
    y_bias: Tensor
    w_y: Tensor
    w_res1: Tensor
    b_res1: Tensor
    w_res2: Tensor
    b_res2: Tensor
    w_out: Tensor
    b_out: Tensor

    def split(self, groups: int) -> list[_FoldedHead]:
        """One head per group of consecutive inputs (``x_part`` split along ``B``)."""
        return [self._replace(x_part=part) for part in self.x_part.chunk(groups, dim=1)]


def _candidates_forward(y_row: Tensor, head: _FoldedHead) -> tuple[Tensor, tuple[Tensor, ...]]:
    """``f`` for the candidates ``y_row`` ``(1, B*M)`` (batch-major): value ``(1, N)`` and the
    sigmoid outputs and residual sums ``u_k`` that ``_candidates_backward`` needs."""
    hidden, batch = head.x_part.shape
    s_y = torch.sigmoid(torch.addcmul(head.y_bias, head.y_weight, y_row))
    two_z = torch.mm(head.w_y, s_y).view(hidden, batch, -1) + head.x_part[:, :, None]
    s_1 = torch.sigmoid(two_z.view(hidden, -1))  # u_1 = s_1
    s_2 = torch.sigmoid(torch.addmm(head.b_res1, head.w_res1, s_1))
    u_2 = s_1 + s_2
    s_3 = torch.sigmoid(torch.addmm(head.b_res2, head.w_res2, u_2))
    u_3 = u_2 + s_3
    value = torch.addmm(head.b_out, head.w_out, u_3)
    return value, (s_y, s_1, s_2, u_2, s_3, u_3)


def _candidates_value_and_input_grad(y_row: Tensor, head: _FoldedHead) -> tuple[Tensor, Tensor]:
    """``f`` ``(1, N)`` and ``∂f/∂y`` ``(1, N)`` of every candidate: the chain rule of
    ``_candidates_backward`` for an upstream gradient of ones, without the weight gradients."""
    value, (s_y, s_1, s_2, _, s_3, _) = _candidates_forward(y_row, head)
    grad_u = head.w_out.t().expand(-1, y_row.shape[1]).contiguous()  # wrt u_3, u_2, s_1
    grad_u.addmm_(head.w_res2.t(), _sigmoid_backward(grad_u, s_3))
    grad_u.addmm_(head.w_res1.t(), _sigmoid_backward(grad_u, s_2))
    grad_pre = _sigmoid_backward(torch.mm(head.w_y.t(), _sigmoid_backward(grad_u, s_1)), s_y)
    return value, torch.mm(head.y_weight.t(), grad_pre)


def _candidates_backward(
    grad_value: Tensor,
    y_row: Tensor,
    head: _FoldedHead,
    saved: tuple[Tensor, ...],
) -> _FoldedHead:
    """Gradients of ``_candidates_forward`` wrt the head (``y_row`` is data here).

    One pass per product; the residual gradient is accumulated in place.
    """
    s_y, s_1, s_2, u_2, s_3, u_3 = saved
    hidden, batch = head.x_part.shape
    grad_w_out = torch.mm(grad_value, u_3.t())
    grad_b_out = grad_value.sum(1, keepdim=True)
    grad_u = head.w_out.t() * grad_value  # wrt u_3, then (in place) u_2 and s_1
    grad_pre = _sigmoid_backward(grad_u, s_3)
    grad_w_res2 = torch.mm(grad_pre, u_2.t())
    grad_b_res2 = grad_pre.sum(1, keepdim=True)
    grad_u.addmm_(head.w_res2.t(), grad_pre)
    grad_pre = _sigmoid_backward(grad_u, s_2)
    grad_w_res1 = torch.mm(grad_pre, s_1.t())
    grad_b_res1 = grad_pre.sum(1, keepdim=True)
    grad_u.addmm_(head.w_res1.t(), grad_pre)
    grad_pre = _sigmoid_backward(grad_u, s_1)  # wrt 2z
    grad_x_part = grad_pre.view(hidden, batch, -1).sum(2)
    grad_w_y = torch.mm(grad_pre, s_y.t())
    grad_pre = _sigmoid_backward(torch.mm(head.w_y.t(), grad_pre), s_y)  # wrt 2 y_fc(y)
    grad_y_weight = torch.mm(grad_pre, y_row.t())
    grad_y_bias = grad_pre.sum(1, keepdim=True)
    return _FoldedHead(grad_x_part, grad_y_weight, grad_y_bias, grad_w_y, grad_w_res1,
                       grad_b_res1, grad_w_res2, grad_b_res2, grad_w_out, grad_b_out)  # fmt: skip


class _Params(NamedTuple):
    """The network's parameters, in ``nn.Linear`` layout (weight ``(out, in)``, bias ``(out,)``)."""

    x_w1: Tensor
    x_b1: Tensor
    x_w2: Tensor
    x_b2: Tensor
    y_w: Tensor
    y_b: Tensor
    head_w: Tensor
    head_b: Tensor
    res1_w: Tensor
    res1_b: Tensor
    res2_w: Tensor
    res2_b: Tensor
    out_w: Tensor
    out_b: Tensor


def _fold(x: Tensor, params: _Params) -> tuple[_FoldedHead, tuple[Tensor, Tensor]]:
    """The x-branch on ``x`` ``(B,)`` and the folded head; also the x-branch activations
    ``(B, H)`` that ``_fold_backward`` needs."""
    p = params
    hidden = p.y_w.shape[0]
    x_feat1 = F.relu(torch.addmm(p.x_b1, x[:, None], p.x_w1.t()))
    x_feat2 = F.relu(torch.addmm(p.x_b2, x_feat1, p.x_w2.t()))
    w_x, w_y = p.head_w.split(hidden, dim=1)
    # First head layer z = w_y (2 s_y - 1) + (w_x x_feat + b); the sigmoid needs 2z.
    x_term = torch.addmm(p.head_b - w_y.sum(1), x_feat2, w_x.t())
    # tanh(W h_k + b) with h_k = 2 u_k - k; h_{k+1} = h_k + tanh(...) = 2 u_{k+1} - (k+1).
    head = _FoldedHead(
        2 * x_term.t(),
        2 * p.y_w,
        2 * p.y_b[:, None],
        4 * w_y,
        4 * p.res1_w,
        2 * (p.res1_b - p.res1_w.sum(1))[:, None],
        4 * p.res2_w,
        2 * (p.res2_b - 2 * p.res2_w.sum(1))[:, None],
        2 * p.out_w,  # W (2 u_3 - 3) + b
        (p.out_b - 3 * p.out_w.sum(1))[:, None],
    )
    return head, (x_feat1, x_feat2)


def _fold_backward(
    grad: _FoldedHead, x: Tensor, params: _Params, x_feats: tuple[Tensor, Tensor]
) -> _Params:
    """The chain rule through ``_fold``: gradients wrt the parameters from those wrt the head."""
    p = params
    x_feat1, x_feat2 = x_feats
    hidden = p.y_w.shape[0]
    w_x = p.head_w[:, :hidden]
    grad_x_term = 2 * grad.x_part.t()  # (B, H)
    grad_head_b = grad_x_term.sum(0)
    grad_w_y = 4 * grad.w_y - grad_head_b[:, None]
    grad_x_feat2 = torch.mm(grad_x_term, w_x) * (x_feat2 > 0)
    grad_x_feat1 = torch.mm(grad_x_feat2, p.x_w2) * (x_feat1 > 0)
    return _Params(
        torch.mm(grad_x_feat1.t(), x[:, None]),
        grad_x_feat1.sum(0),
        torch.mm(grad_x_feat2.t(), x_feat1),
        grad_x_feat2.sum(0),
        2 * grad.y_weight,
        2 * grad.y_bias[:, 0],
        torch.cat([torch.mm(grad_x_term.t(), x_feat2), grad_w_y], dim=1),
        grad_head_b,
        4 * grad.w_res1 - 2 * grad.b_res1,
        2 * grad.b_res1[:, 0],
        4 * grad.w_res2 - 4 * grad.b_res2,
        2 * grad.b_res2[:, 0],
        2 * grad.w_out - 3 * grad.b_out,
        grad.b_out[:, 0],
    )


def _split(y_row: Tensor, head: _FoldedHead, groups: int) -> tuple[list, list[_FoldedHead]]:
    """``y_row`` and ``head`` in ``groups`` groups of consecutive inputs (``y_row`` is
    batch-major, so a group of inputs is a run of columns)."""
    per_input = y_row.shape[1] // head.x_part.shape[1]
    heads = head.split(groups)
    return list(y_row.split([h.x_part.shape[1] * per_input for h in heads], dim=1)), heads


@cache
def _thread_pool(threads: int) -> ThreadPoolExecutor:
    """Shared by all models: torch releases the GIL inside its kernels, so Python threads with
    one torch thread each keep the cores busy where intra-op threading, which forks and joins
    around each ~100 us kernel, does not."""
    return ThreadPoolExecutor(threads, "regression1d", torch.set_num_threads, (1,))


def _map_no_grad(fn: Callable, *iterables: Sequence) -> list:
    """``list(map(fn, *iterables))`` without autograd recording; the first item in this
    thread, the others in a pool (whose threads do not inherit this one's grad mode)."""
    fn = torch.no_grad()(fn)
    if len(iterables[0]) == 1:
        return [fn(*(it[0] for it in iterables))]
    rest = _thread_pool(len(iterables[0]) - 1).map(fn, *(it[1:] for it in iterables))
    first = fn(*(it[0] for it in iterables))
    return [first, *rest]


class _Network(torch.autograd.Function):
    """The whole network as one autograd node with a hand-written backward pass; the candidate
    part is split over ``threads`` threads by groups of inputs.

    Autograd's own version of this graph spends about half its time on bookkeeping (some 60
    nodes for a 14-tensor network), copies of the ``(H, N)`` operands for the weight gradients
    and zero-filled gradient buffers. Gradients wrt the parameters only, first order
    (``once_differentiable``): SM and DSM, which differentiate twice in ``y``, use the composed
    path; the samplers use ``Regression1dEnergy.score_and_grad``.
    """

    @staticmethod
    def forward(ctx, x: Tensor, y_row: Tensor, threads: int, *param_tensors: Tensor) -> Tensor:
        params = _Params(*param_tensors)
        head, x_feats = _fold(x, params)
        rows, heads = _split(y_row, head, threads)
        results = _map_no_grad(_candidates_forward, rows, heads)
        ctx.x, ctx.params, ctx.x_feats = x, params, x_feats
        ctx.heads, ctx.rows, ctx.saved = heads, rows, [saved for _, saved in results]
        return torch.cat([value for value, _ in results], dim=1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_value: Tensor) -> tuple[Tensor | None, ...]:
        grad_values = grad_value.split([row.shape[1] for row in ctx.rows], dim=1)
        grads = _map_no_grad(_candidates_backward, grad_values, ctx.rows, ctx.heads, ctx.saved)
        grad_head = _FoldedHead(
            torch.cat([g.x_part for g in grads], dim=1),
            *(sum(parts) for parts in zip(*(g[1:] for g in grads))),
        )
        return None, None, None, *_fold_backward(grad_head, ctx.x, ctx.params, ctx.x_feats)


class Regression1dEnergy(nn.Module):
    """``f(x, y)``: ``x`` of shape ``(B,)`` or ``(B, 1)``, ``y`` ``(B, M, 1)`` -> ``(B, M)``.

    Parameters are ordinary ``nn.Linear`` layers; the forward pass evaluates exactly the network
    above, arranged for speed on a CPU, where the ``B * M`` candidates dominate the cost and
    every full-size elementwise pass counts:

    - x-features and their share of the first head layer are computed once per input and
      broadcast over the ``M`` candidates;
    - candidate features are kept feature-major, ``(H, B*M)``, so the 10x10 matrix products are
      wide (about 5x faster than ``(B*M, H) @ (H, H)`` with MKL);
    - ``tanh(z) = 2 sigmoid(2z) - 1`` (sigmoid has a vectorized CPU kernel, tanh is ~6x slower),
      with the affine parts folded into the small tensors (``_FoldedHead``);
    - when ``y`` needs no gradient (the sample-based losses), the candidate part is one autograd
      node with a hand-written backward pass, split over ``threads`` Python threads by groups of
      inputs. On two cores, ``threads=2`` with ``torch.set_num_threads(1)`` was 1.0-1.4x faster
      than one thread, depending on the machine's load; torch's own intra-op threads made these
      sizes slower.
    """

    def __init__(self, hidden: int = HIDDEN, threads: int = 1):
        super().__init__()
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self.x_fc1 = nn.Linear(1, hidden)
        self.x_fc2 = nn.Linear(hidden, hidden)
        self.y_fc = nn.Linear(1, hidden)
        self.head_fc1 = nn.Linear(2 * hidden, hidden)  # input order: (x features, y features)
        self.head_res1 = nn.Linear(hidden, hidden)
        self.head_res2 = nn.Linear(hidden, hidden)
        self.head_out = nn.Linear(hidden, 1)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        batch, num = y.shape[0], y.shape[1]
        x = x.reshape(batch)
        y_row = y.reshape(1, batch * num)
        params = self._params()
        if y.requires_grad or x.requires_grad or not torch.is_grad_enabled():
            value = _candidates_forward(y_row, _fold(x, params)[0])[0]
        else:
            value = _Network.apply(x, y_row, min(self.threads, batch), *params)
        return value.view(batch, num)

    def score_and_grad(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """``f(x, y)`` ``(B, M)`` and ``∇_y f`` ``(B, M, 1)``, detached, without autograd and
        over ``threads`` threads: ``ebmtrack.ebm.score_and_grad`` (Langevin sampling, gradient
        ascent) uses this when a model has it."""
        batch, num = y.shape[0], y.shape[1]
        with torch.no_grad():
            params = self._params()
            head, _ = _fold(x.reshape(batch), params)
            rows, heads = _split(y.reshape(1, batch * num), head, min(self.threads, batch))
            results = _map_no_grad(_candidates_value_and_input_grad, rows, heads)
            value, grad = (torch.cat(parts, dim=1) for parts in zip(*results))
        return value.view(batch, num), grad.view(batch, num, 1)

    def _params(self) -> _Params:
        layers = (self.x_fc1, self.x_fc2, self.y_fc, self.head_fc1, self.head_res1,
                  self.head_res2, self.head_out)  # fmt: skip
        return _Params(*(t for layer in layers for t in (layer.weight, layer.bias)))

    def reference_forward(self, x: Tensor, y: Tensor) -> Tensor:
        """The same function written plainly (row-major, tanh): for tests and benchmarks."""
        x_feat = F.relu(self.x_fc2(F.relu(self.x_fc1(x.reshape(-1, 1)))))
        y_feat = torch.tanh(self.y_fc(y))
        x_feat = x_feat[:, None, :].expand(-1, y.shape[1], -1)
        h = torch.tanh(self.head_fc1(torch.cat([x_feat, y_feat], dim=-1)))
        h = torch.tanh(self.head_res1(h)) + h
        h = torch.tanh(self.head_res2(h)) + h
        return self.head_out(h).squeeze(-1)
