"""Optimizers of the dual encoder: Adam for dense parameters with a lazy Adam for sparse embedding
tables (only the rows of the batch move), or plain SGD for all (the BiDE+AM paper: SGD, lr 0.003)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from marginmine.encoders.base import EncoderError

OPTIMIZERS = ("adam", "sgd")


def check_optimizer(kind: str) -> str:
    """``kind`` if it is a known optimizer, else ``EncoderError`` naming the known ones."""
    if kind not in OPTIMIZERS:
        raise EncoderError(f"unknown dual-encoder optimizer {kind!r} (known: {', '.join(OPTIMIZERS)})")
    return kind


class LazyAdam(torch.optim.Optimizer):
    """Adam for sparse gradients: only the rows in the batch are updated (dense ops, fast on CPU)."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):  # noqa: D102
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.coalesce()
                rows, val = grad.indices()[0], grad.values()
                st = self.state[p]
                if not st:
                    st["step"] = torch.zeros((), dtype=torch.float64)
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["step"] += 1
                t = float(st["step"])
                m = st["exp_avg"].index_select(0, rows).mul_(b1).add_(val, alpha=1 - b1)
                v = st["exp_avg_sq"].index_select(0, rows).mul_(b2).addcmul_(val, val, value=1 - b2)
                st["exp_avg"].index_copy_(0, rows, m)
                st["exp_avg_sq"].index_copy_(0, rows, v)
                denom = v.div_(1 - b2 ** t).sqrt_().add_(group["eps"])
                p.index_add_(0, rows, m.div_(denom), alpha=-group["lr"] / (1 - b1 ** t))
        return None


def make_optimizers(model: nn.Module, lr: float, kind: str = "adam") -> list[torch.optim.Optimizer]:
    """Adam for dense parameters, :class:`LazyAdam` for sparse embedding tables; or plain SGD for
    all (it takes sparse gradients as they are)."""
    if check_optimizer(kind) == "sgd":
        return [torch.optim.SGD(model.parameters(), lr=lr)]
    sparse = {id(m.weight) for m in model.modules()
              if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse}
    dense = [p for p in model.parameters() if id(p) not in sparse]
    opts: list[torch.optim.Optimizer] = [torch.optim.Adam(dense, lr=lr)]
    if sparse:
        opts.append(LazyAdam([p for p in model.parameters() if id(p) in sparse], lr=lr))
    return opts
