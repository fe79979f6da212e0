"""The calibrated confidence score (Guo et al. 2018, Sec. 2.4.2 and 3.2), a *fitted* score kind.

The raw similarity ``phi(x, y) = u . v`` ranks the targets of one source well but is not comparable
across sources. The calibrated score scales and shifts it by two small networks over the source
embedding alone::

    z = dropout_0.4([u; u^2])
    scale(u) = w_s . relu(W_s z + b_s) + c_s        bias(u) = w_b . relu(W_b z + b_b) + c_b
    confidence = sigmoid(scale(u) * phi(x, y) + bias(u))

Training (:meth:`Calibrated.fit`) is the paper's confidence task: batches of ``batch_size`` positive
pairs, each source with its own target as the positive and the batch's other targets as the
negatives (1 positive, 127 negatives at 128), binary cross-entropy on the calibrated logit. The
encoder is frozen (the paper's stop-gradient), so we fit on fixed embeddings after the encoder has
trained instead of jointly: the same model and loss, one CPU job.

Score files hold the *logit* ``scale * phi + bias`` (the sigmoid is monotone: the order is the
confidence's, and saturated confidences keep their order); the paper's threshold 0.5 is logit 0.
Each pair's score depends on its own two embeddings only, so split score files are byte-identical.
Because scale and bias come from the source alone, the calibration never changes which target a
source retrieves: mining retrieves by cosine (``mines = "absolute"``) and calibrates the found
pairs (:meth:`Calibrated.pair_scores`).

The fitted head is a directory (``head.npz``, arrays only, no pickle; ``head.json``, the manifest
with the npz's SHA-256, written last): :mod:`marginmine.scoring.heads` fits and saves it, the
workflow names it in the scorer's ``head`` param.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from marginmine.errors import MarginmineError
from marginmine.scoring.heads import FittedKind
from marginmine.scoring.kinds import register

#: the arrays of a fitted calibration head, in order
HEAD_ARRAYS = ("scale_w1", "scale_b1", "scale_w2", "scale_b2", "bias_w1", "bias_b1", "bias_w2", "bias_b2")


def features(u: np.ndarray) -> np.ndarray:
    """``[u; u^2]`` (float64)."""
    u = np.asarray(u, np.float64)
    return np.concatenate([u, u * u], axis=1)


def head_logit(arrays: dict[str, np.ndarray], u: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """``scale(u) * phi + bias(u)`` per row, in float64 (inference: no dropout)."""
    z = features(u)
    out = []
    for part in ("scale", "bias"):
        h = np.maximum(z @ arrays[f"{part}_w1"].astype(np.float64) + arrays[f"{part}_b1"], 0.0)
        out.append(h @ arrays[f"{part}_w2"].astype(np.float64) + arrays[f"{part}_b2"])
    return out[0] * np.asarray(phi, np.float64) + out[1]


@register("calibrated")
@dataclass(frozen=True)
class Calibrated(FittedKind):
    """Guo et al. (2018)'s calibrated confidence over an encoder's embeddings (fitted: ``head``)."""

    hidden: int = 64
    steps: int = 1000
    batch_size: int = 128
    dropout: float = 0.4
    lr: float = 0.01
    init_scale: float = 20.0  # the dual encoder's training scale (in_batch_loss)
    head: str = ""  # the fitted head's directory (the workflow fills it in)

    mines: ClassVar[str | None] = "absolute"  # retrieval by phi; the found pairs are calibrated
    fitted: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.steps < 1 or self.batch_size < 2:
            raise ValueError("hidden and steps must be >= 1 and batch_size >= 2 (one positive, some negatives)")
        if not 0 <= self.dropout < 1 or self.lr <= 0:
            raise ValueError("dropout must be in [0, 1) and lr > 0")

    def apply(self, arrays: dict[str, np.ndarray], u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The calibrated logit of the pairs ``(u[i], v[i])`` with given head arrays (float32)."""
        if u.shape[1] * 2 != arrays["scale_w1"].shape[0]:
            raise MarginmineError(f"calibrated head {self.head or '(given)'}: fitted on "
                                  f"{arrays['scale_w1'].shape[0] // 2}-dim embeddings, given {u.shape[1]}-dim ones "
                                  "(another encoder's?)")
        phi = np.einsum("ij,ij->i", np.asarray(u, np.float64), np.asarray(v, np.float64))
        return head_logit(arrays, u, phi).astype(np.float32)

    def fit(self, u: np.ndarray, v: np.ndarray, seed: int) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """Fit the head on positive pairs ``(u[i], v[i])`` (unit rows): the arrays and the training
        stats (first and last 50 steps' mean loss). Deterministic for a seed on one machine."""
        import torch
        from torch import nn

        if len(u) < self.batch_size:
            raise MarginmineError(f"calibrated: {len(u)} held-out pairs, fewer than one batch ({self.batch_size})")
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        dim = u.shape[1]

        def mlp() -> nn.Sequential:
            return nn.Sequential(nn.Dropout(self.dropout), nn.Linear(2 * dim, self.hidden), nn.ReLU(),
                                 nn.Linear(self.hidden, 1))

        scale, bias = mlp(), mlp()
        with torch.no_grad():  # start from one global calibration: logit = init_scale * (phi - 0.5)
            scale[3].bias.fill_(self.init_scale)
            bias[3].bias.fill_(-self.init_scale / 2)
            for m in (scale, bias):
                m[3].weight.mul_(0.01)
        opt = torch.optim.Adam([*scale.parameters(), *bias.parameters()], lr=self.lr)
        U, V = torch.from_numpy(np.asarray(u, np.float32)), torch.from_numpy(np.asarray(v, np.float32))
        losses = []
        loss_fn = nn.BCEWithLogitsLoss()
        for _ in range(self.steps):
            idx = torch.randperm(len(U), generator=gen)[: self.batch_size]
            x, y = U[idx], V[idx]
            z = torch.cat([x, x * x], dim=1)
            phi = x @ y.T  # row i: source i against every target of the batch
            logit = scale(z) * phi + bias(z)
            loss = loss_fn(logit, torch.eye(len(idx)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        arrays = {}
        for part, m in (("scale", scale), ("bias", bias)):
            arrays[f"{part}_w1"] = m[1].weight.detach().numpy().T.copy()
            arrays[f"{part}_b1"] = m[1].bias.detach().numpy().copy()
            arrays[f"{part}_w2"] = m[3].weight.detach().numpy().T[:, 0].copy()
            arrays[f"{part}_b2"] = m[3].bias.detach().numpy()[0].copy()
        stats = {"loss_first_50": float(np.mean(losses[:50])), "loss_last_50": float(np.mean(losses[-50:]))}
        return arrays, stats
