"""Rank metrics of a score against binary labels: ROC-AUC (ties counted half) and precision at the
top n; the AUC of a pair score separating each source's own target from the others
(:func:`pair_auc`). The floor under a fitted head's report (:mod:`marginmine.scoring.heads`) and
every evaluation in :mod:`marginmine.evaluate`."""

from __future__ import annotations

import numpy as np


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    s = values[order]
    starts = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1]
    ends = np.r_[starts[1:], len(s)]
    for a, b in zip(starts, ends):
        ranks[order[a:b]] = (a + b + 1) / 2
    return ranks


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); NaN without both classes."""
    positive = np.asarray(positive, bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = average_ranks(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def precision_at(scores: np.ndarray, positive: np.ndarray, n: int) -> float:
    """Share of positives among the n best-scoring items (ties broken by position)."""
    n = min(n, len(scores))
    if n == 0:
        return float("nan")
    top = np.argsort(-np.asarray(scores, np.float64), kind="stable")[:n]
    return float(np.asarray(positive, bool)[top].mean())


#: pairs :func:`pair_auc` scores at once (a fitted head's checks: an MLP's float64 input is 16 KB per
#: pair at dim 1,024)
CHECK_PAIRS = 50_000


def pair_auc(u: np.ndarray, v: np.ndarray, score, pairs: int = CHECK_PAIRS) -> float:  # noqa: ANN001
    """AUC of ``score(u_rows, v_rows)`` separating each source's own target from every other target,
    scored a block of sources at a time (about ``pairs`` pairs: all 1,044 x 1,044 at once took an
    MLP 22 GB)."""
    u, v = np.asarray(u), np.asarray(v)
    step = max(1, pairs // max(1, len(v)))
    cols = np.arange(len(v))
    values = np.empty(len(u) * len(v), np.float64)
    for start in range(0, len(u), step):
        rows = np.arange(start, min(start + step, len(u)))
        r, c = np.repeat(rows, len(v)), np.tile(cols, len(rows))
        values[start * len(v):(start + len(rows)) * len(v)] = np.asarray(score(u[r], v[c]), np.float64)
    return roc_auc(values, np.eye(len(u), len(v), dtype=bool).ravel())  # row i's own target: column i
