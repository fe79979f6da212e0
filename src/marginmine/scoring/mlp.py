"""MLP similarity on the concatenated embeddings (the MLP-similarity seed paper, Sec. 3.3 Eq. 13-15),
a *fitted* score kind whose negatives come from the corpus.

``q(a, b) = sigmoid(MLP([a; b]))``: ``layers`` hidden layers of ``hidden`` units with ReLU and one
output, trained on the loss ``-sum_pos log q - sum_neg log(1 - q)`` (Eq. 15, misprinted ``1 - log q``
in the paper). Two trainers (``trainer``):

* ``sklearn`` (default), as the paper trains it ("with SCIKIT-LEARN ... with maximum 1,000 updates",
  001 l.512-517): scikit-learn's ``MLPClassifier`` with ``hidden_layer_sizes = (hidden,) * layers``,
  ReLU, ``max_iter`` (1,000) and its defaults otherwise - Adam at 0.001, batches of 200, L2 1e-4,
  shuffled every epoch, and its stop: ``max_iter`` counts *epochs*, and training ends earlier once the
  loss has not fallen by ``tol`` (1e-4) for 10 epochs in a row. Its log-loss is Eq. 15 divided by the
  number of pairs, plus the L2 term.
* ``steps``: our torch loop, ``steps`` Adam updates of ``batch_size`` pairs, each batch half positives,
  half negatives (1,000 updates of 128: a few epochs of 8,000 pairs; kept to compare).

* Positives: clean parallel pairs (``heads.positives``: by default a sample of the encoder's
  training data; the paper's are news test sets, its test domain; see
  :mod:`marginmine.scoring.heads` for the sources and the leakage check,
  :mod:`marginmine.evaluate.shortcut` for the check that the fit learnt translation, not the
  positives' domain).
* Negatives, as many as positives, from the corpus being filtered, by its own cosine: rank the
  eligible pairs by cosine, keep the top ``band`` share (0.2 ... 1.0) and take the *last* pairs of that
  cut (:func:`band_negatives`; ``negatives: random`` draws them uniformly instead). Pairs of the
  human-labelled evaluation file are never eligible, and the corpus' labels are never read.

Score files hold the logit (the MLP saturates: many pairs at q = 0 keep their order). The MLP does
not mine (``mines = None``): it scores pairs given to it. Each pair's score depends on its two
embeddings only, so split score files are byte-identical.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from marginmine.errors import MarginmineError
from marginmine.scoring.heads import FittedKind
from marginmine.scoring.kinds import register

NEGATIVE_KINDS = ("band", "random")
TRAINERS = ("sklearn", "steps")


def band_negatives(cos: np.ndarray, eligible: np.ndarray, n: int, band: float, kind: str = "band",
                   seed: int = 0) -> np.ndarray:
    """Indices of ``n`` negative pairs among the ``eligible`` ones: the last ``n`` of the top ``band``
    share by descending cosine (ties: lower index first), or ``n`` uniformly random ones."""
    idx = np.flatnonzero(eligible)
    if kind == "random":
        if len(idx) < n:
            raise MarginmineError(f"mlp: {len(idx)} eligible corpus pairs, fewer than the {n} positives")
        return np.sort(np.random.default_rng(seed).choice(idx, n, replace=False))
    order = idx[np.lexsort((idx, -np.asarray(cos, np.float64)[idx]))]
    cut = order[: math.ceil(band * len(order))]
    if len(cut) < n:
        raise MarginmineError(f"mlp: the top {band:.0%} of the corpus by cosine holds {len(cut)} pairs, fewer "
                              f"than the {n} positives (a larger band, or fewer held-out pairs)")
    return cut[len(cut) - n:]


def eq15_loss(pos_logit, neg_logit):  # noqa: ANN001, ANN201 (torch tensors; torch is imported lazily)
    """Eq. 15 as a mean over the batch: ``-(sum_pos log q + sum_neg log(1 - q)) / (n_pos + n_neg)``
    with ``q = sigmoid(logit)`` (log-sigmoid: stable where q saturates)."""
    from torch.nn.functional import logsigmoid

    return -(logsigmoid(pos_logit).sum() + logsigmoid(-neg_logit).sum()) / (len(pos_logit) + len(neg_logit))


def mlp_logit(arrays: dict[str, np.ndarray], u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The MLP's output before the sigmoid, float64 (``w0, b0, w1, b1, ...``; the last layer has one unit)."""
    h = np.concatenate([np.asarray(u, np.float64), np.asarray(v, np.float64)], axis=1)
    n = len([k for k in arrays if k.startswith("w")])
    for i in range(n):
        h = h @ arrays[f"w{i}"].astype(np.float64) + arrays[f"b{i}"]
        if i < n - 1:
            h = np.maximum(h, 0.0)
    return h[:, 0]


#: weights below this magnitude are taken as 0 by :func:`logit_matrix` (2**-100, about 7.9e-31)
NEGLIGIBLE = 2.0 ** -100


def drop_negligible(a: np.ndarray, below: float = NEGLIGIBLE) -> np.ndarray:
    """``a`` with its entries of magnitude below ``below`` set to 0 (a copy only when there are some)."""
    small = (a != 0) & (np.abs(a) < below)
    if not small.any():
        return a
    out = a.copy()
    out[small] = 0
    return out


def logit_matrix(arrays: dict[str, np.ndarray], u: np.ndarray, v: np.ndarray, chunk: int = 32,
                 negligible: float = NEGLIGIBLE) -> np.ndarray:
    """float32 ``(len(u), len(v))``: the MLP's logit of every pair (row i of ``u`` with row j of
    ``v``), in float32 and chunks of ``chunk`` rows (the first layer split as ``[a; b] W0 = a W0a +
    b W0b``, so each side is multiplied once). Weights and biases below ``negligible`` in magnitude are
    taken as 0: a fitted head holds some (scikit-learn's weight decay shrinks a dead unit's weights
    towards 0, down to subnormal numbers), and their products with small activations are subnormal,
    each of which costs the CPU tens of times a normal product (the smoke suite's 64-unit head on
    newstest2012's 3,003 x 3,003 pairs: its eval-similarity job 67 s, 8.4 s without them). Such a
    product is 2**-100 of the activation it multiplies or less, far below float32's resolution
    (2**-24) of any sum that also holds a normal-sized term: in practice the logits keep their bytes
    (tests/test_mlp.py checks it on a fitted head). A head whose useful weights are themselves that
    small would lose them; a fitted one has none."""
    w = {k: drop_negligible(np.asarray(a, np.float32), negligible) for k, a in arrays.items()}
    n_layers = len([k for k in w if k.startswith("w")])
    d = u.shape[1]
    a = np.asarray(u, np.float32) @ w["w0"][:d] + w["b0"]
    b = np.asarray(v, np.float32) @ w["w0"][d:]
    out = np.empty((len(u), len(v)), np.float32)
    for i in range(0, len(u), chunk):
        h = np.maximum(a[i:i + chunk, None, :] + b[None, :, :], 0).reshape(-1, a.shape[1])
        for layer in range(1, n_layers):
            h = h @ w[f"w{layer}"] + w[f"b{layer}"]
            if layer < n_layers - 1:
                h = np.maximum(h, 0)
        out[i:i + chunk] = h.reshape(-1, len(v))
    return out


@register("mlp")
@dataclass(frozen=True)
class MLP(FittedKind):
    """``q(a, b)`` = an MLP on ``[a; b]`` (fitted: ``head``)."""

    hidden: int = 512
    layers: int = 2
    trainer: str = "sklearn"
    max_iter: int = 1000
    steps: int = 1000
    batch_size: int = 128
    lr: float = 0.001
    band: float = 0.6
    negatives: str = "band"
    head: str = ""

    mines: ClassVar[str | None] = None
    fitted: ClassVar[bool] = True
    corpus_negatives: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if (self.hidden < 1 or self.layers < 1 or self.steps < 1 or self.max_iter < 1 or self.batch_size < 2
                or self.lr <= 0):
            raise ValueError("hidden, layers, steps and max_iter must be >= 1, batch_size >= 2, lr > 0")
        if self.trainer not in TRAINERS:
            raise ValueError(f"trainer must be one of {', '.join(TRAINERS)}, got {self.trainer!r}")
        if not 0 < self.band <= 1:
            raise ValueError(f"band must be in (0, 1], got {self.band}")
        if self.negatives not in NEGATIVE_KINDS:
            raise ValueError(f"negatives must be one of {', '.join(NEGATIVE_KINDS)}, got {self.negatives!r}")

    def choose_negatives(self, cos: np.ndarray, eligible: np.ndarray, n: int, seed: int) -> np.ndarray:
        return band_negatives(cos, eligible, n, self.band, self.negatives, seed)

    def pair_matrix(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The logit of every pair of rows of ``u`` and ``v`` (:func:`logit_matrix`), e.g. retrieval
        with the MLP as the similarity."""
        from marginmine.scoring.heads import load_arrays

        return logit_matrix(load_arrays(self.head), u, v)

    def apply(self, arrays: dict[str, np.ndarray], u: np.ndarray, v: np.ndarray) -> np.ndarray:
        if u.shape[1] + v.shape[1] != arrays["w0"].shape[0]:
            raise MarginmineError(f"mlp head {self.head or '(given)'}: fitted on {arrays['w0'].shape[0] // 2}-dim "
                                  f"embeddings, given {u.shape[1]}-dim ones (another encoder's?)")
        return mlp_logit(arrays, u, v).astype(np.float32)

    def fit(self, u: np.ndarray, v: np.ndarray, seed: int,
            negatives: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """Train on positives ``(u, v)`` and ``negatives`` (the corpus pairs chosen by the band) with
        the configured trainer."""
        if negatives is None or not len(negatives[0]):
            raise MarginmineError("mlp: fitted with corpus negatives; none were given")
        if self.trainer == "sklearn":
            return self._fit_sklearn(u, v, seed, negatives)
        return self._fit_steps(u, v, seed, negatives)

    def _fit_sklearn(self, u: np.ndarray, v: np.ndarray, seed: int,
                     negatives: tuple[np.ndarray, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """scikit-learn's MLPClassifier as the paper used it (the module says which settings)."""
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPClassifier

        pos = np.concatenate([u, v], axis=1).astype(np.float32)
        neg = np.concatenate([np.asarray(negatives[0]), np.asarray(negatives[1])], axis=1).astype(np.float32)
        x = np.concatenate([pos, neg])
        y = np.r_[np.ones(len(pos), np.int64), np.zeros(len(neg), np.int64)]
        clf = MLPClassifier(hidden_layer_sizes=(self.hidden,) * self.layers, activation="relu",
                            max_iter=self.max_iter, learning_rate_init=self.lr, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # reaching max_iter is reported in the stats
            clf.fit(x, y)
        arrays: dict[str, np.ndarray] = {}
        for i, (w, b) in enumerate(zip(clf.coefs_, clf.intercepts_)):
            arrays[f"w{i}"], arrays[f"b{i}"] = np.asarray(w, np.float32), np.asarray(b, np.float32)
        curve = list(clf.loss_curve_)
        batch = min(200, len(x))  # batch_size="auto"
        return arrays, {"trainer": "sklearn", "epochs": int(clf.n_iter_),
                        "updates": int(clf.n_iter_) * math.ceil(len(x) / batch),
                        "stopped": "max_iter" if clf.n_iter_ >= self.max_iter else "no gain of tol in 10 epochs",
                        "loss_first_epoch": float(curve[0]), "loss_last_epoch": float(curve[-1])}

    def _fit_steps(self, u: np.ndarray, v: np.ndarray, seed: int,
                   negatives: tuple[np.ndarray, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """Our torch loop: ``steps`` updates of ``batch_size`` pairs, half positives, half negatives."""
        import torch
        from torch import nn

        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        dim = u.shape[1] + v.shape[1]
        mods: list[nn.Module] = []
        width = dim
        for _ in range(self.layers):
            mods += [nn.Linear(width, self.hidden), nn.ReLU()]
            width = self.hidden
        mods.append(nn.Linear(width, 1))
        net = nn.Sequential(*mods)
        pos = torch.from_numpy(np.concatenate([u, v], axis=1).astype(np.float32))
        neg = torch.from_numpy(np.concatenate([np.asarray(negatives[0]), np.asarray(negatives[1])],
                                              axis=1).astype(np.float32))
        opt = torch.optim.Adam(net.parameters(), lr=self.lr)
        half = self.batch_size // 2
        losses = []
        for _ in range(self.steps):
            p = pos[torch.randint(len(pos), (half,), generator=gen)]
            q = neg[torch.randint(len(neg), (self.batch_size - half,), generator=gen)]
            logit = net(torch.cat([p, q]))[:, 0]
            loss = eq15_loss(logit[:half], logit[half:])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        arrays: dict[str, np.ndarray] = {}
        linears = [m for m in net if isinstance(m, nn.Linear)]
        for i, m in enumerate(linears):
            arrays[f"w{i}"] = m.weight.detach().numpy().T.copy()
            arrays[f"b{i}"] = m.bias.detach().numpy().copy()
        return arrays, {"loss_first_50": float(np.mean(losses[:50])), "loss_last_50": float(np.mean(losses[-50:]))}
