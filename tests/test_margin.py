"""Margin maths and kNN: hand-computed cases and brute-force NumPy on random data."""

from __future__ import annotations

import numpy as np
import pytest

from marginmine.encoder import l2_normalize
from marginmine.knn import knn
from marginmine.margin import apply_margin, best_candidates, candidate_scores, knn_mean


def test_margin_functions_hand_computed() -> None:
    cos, avg = np.array([0.8, 0.5]), np.array([0.4, 0.5])
    assert np.allclose(apply_margin(cos, avg, "absolute"), [0.8, 0.5])
    assert np.allclose(apply_margin(cos, avg, "distance"), [0.4, 0.0])
    assert np.allclose(apply_margin(cos, avg, "ratio"), [2.0, 1.0])
    with pytest.raises(ValueError, match="unknown margin"):
        apply_margin(cos, avg, "median")


def test_ratio_margin_prefers_the_less_hubby_candidate() -> None:
    # x0's nearest neighbour y0 is a hub (close to everything); y1 is a little further but specific
    x2y_sim = np.array([[0.90, 0.85]], dtype=np.float32)
    x2y_ids = np.array([[0, 1]])
    x_mean = np.array([0.875], dtype=np.float32)
    y_mean = np.array([0.95, 0.60], dtype=np.float32)
    scores = candidate_scores(x2y_sim, x2y_ids, x_mean, y_mean, "ratio")
    assert np.allclose(scores, [[0.90 / 0.9125, 0.85 / 0.7375]])
    assert scores[0].argmax() == 1


def brute(x: np.ndarray, y: np.ndarray, k: int, margin: str) -> np.ndarray:
    sim = x @ y.T
    kx = np.sort(sim, axis=1)[:, ::-1][:, :k].mean(1)
    ky = np.sort(sim.T, axis=1)[:, ::-1][:, :k].mean(1)
    best = []
    for i in range(len(x)):
        cand = np.argsort(-sim[i], kind="stable")[:k]
        avg = (kx[i] + ky[cand]) / 2
        s = {"absolute": sim[i, cand], "distance": sim[i, cand] - avg, "ratio": sim[i, cand] / avg}[margin]
        best.append(cand[np.argmax(s)])
    return np.array(best)


@pytest.mark.parametrize("margin", ["absolute", "distance", "ratio"])
def test_best_candidates_equal_brute_force(margin: str) -> None:
    rng = np.random.default_rng(0)
    x = l2_normalize(rng.normal(size=(300, 16)))
    y = l2_normalize(rng.normal(size=(250, 16)))
    got, _ = best_candidates(x, y, 4, margin)
    assert np.array_equal(got, brute(x, y, 4, margin))


def test_knn_blocks_and_small_database() -> None:
    rng = np.random.default_rng(1)
    x = l2_normalize(rng.normal(size=(100, 8)))
    y = l2_normalize(rng.normal(size=(3, 8)))
    s1, i1 = knn(x, y, 4, block=7)
    s2, i2 = knn(x, y, 4)
    assert s1.shape == (100, 3) and np.array_equal(i1, i2) and np.allclose(s1, s2)
    assert np.allclose(s1[:, 0], (x @ y.T).max(1), atol=1e-6)
    assert np.allclose(knn_mean(s1), s1.mean(1))
