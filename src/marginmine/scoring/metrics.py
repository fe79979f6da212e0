"""Rank metrics of a score against binary labels: ROC-AUC (ties counted half) and precision at the
top n. The floor under a fitted head's report (:mod:`marginmine.scoring.heads`) and every evaluation
in :mod:`marginmine.evaluate`."""

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
