"""Margin-based scoring (Artetxe & Schwenk 2019, Section 2).

For a candidate pair (x, y)::

    score(x, y) = margin(cos(x, y), (mean_k NN_x->Y cos + mean_k NN_y->X cos) / 2)

with the margin functions ``absolute`` (a), ``distance`` (a - b) and ``ratio`` (a / b), where
``mean_k`` is the mean cosine of the k nearest neighbours of x among the target sentences
(forward) and of y among the source sentences (backward). Pure array functions.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Margin = Literal["absolute", "distance", "ratio"]
MARGINS: tuple[str, ...] = ("absolute", "distance", "ratio")


def apply_margin(cos: np.ndarray, avg: np.ndarray, margin: str) -> np.ndarray:
    """``margin(a, b)`` elementwise for cosines ``cos`` and neighbourhood averages ``avg``."""
    if margin == "absolute":
        return np.asarray(cos, dtype=np.float32)
    if margin == "distance":
        return np.asarray(cos - avg, dtype=np.float32)
    if margin == "ratio":
        return np.asarray(cos / avg, dtype=np.float32)
    raise ValueError(f"unknown margin {margin!r} (choose from {', '.join(MARGINS)})")


def knn_mean(similarities: np.ndarray) -> np.ndarray:
    """Mean of each row's k nearest-neighbour similarities (the per-sentence neighbourhood)."""
    return similarities.mean(axis=1, dtype=np.float64).astype(np.float32)


def candidate_scores(x2y_sim: np.ndarray, x2y_ids: np.ndarray, x_mean: np.ndarray, y_mean: np.ndarray,
                     margin: str) -> np.ndarray:
    """Margin scores of each source sentence's kNN candidates: shape like ``x2y_sim``."""
    avg = (x_mean[:, None] + y_mean[x2y_ids]) / 2
    return apply_margin(x2y_sim, avg, margin)


def best_candidates(x: np.ndarray, y: np.ndarray, k: int, margin: str) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``x``: the index in ``y`` with the best margin score among its k nearest
    neighbours, and that score (forward retrieval, as used for Tatoeba-style evaluation).

    ``absolute`` is plain nearest-neighbour retrieval by cosine.
    """
    from .knn import knn

    x2y_sim, x2y_ids = knn(x, y, k)
    if margin == "absolute":
        return x2y_ids[:, 0], x2y_sim[:, 0]
    y2x_sim, _ = knn(y, x, k)
    scores = candidate_scores(x2y_sim, x2y_ids, knn_mean(x2y_sim), knn_mean(y2x_sim), margin)
    best = np.argmax(scores, axis=1)
    rows = np.arange(len(x))
    return x2y_ids[rows, best], scores[rows, best]
