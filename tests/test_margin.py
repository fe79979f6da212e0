"""Margin maths and kNN: hand-computed cases and brute-force NumPy on random data."""

from __future__ import annotations

import numpy as np
import pytest

from marginmine.encoders.base import l2_normalize
from marginmine.search.knn import knn
from marginmine.search.margin import apply_margin, best_candidates, candidate_scores, knn_mean


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


# --- retrieval modes, filtering mode, unique groups ----------------------------------------

from marginmine.search.knn import IndexSpec, check_device, recall_at_k  # noqa: E402
from marginmine.search.margin import (  # noqa: E402
    RETRIEVALS,
    filter_scores,
    neighbourhoods,
    retrieve,
    unique_groups,
)


def brute_retrieve(x: np.ndarray, y: np.ndarray, k: int, margin: str, retrieval: str) -> set[tuple[int, int, float]]:
    """LASER's mine mode written out with loops over a full similarity matrix."""
    sim = x.astype(np.float64) @ y.T.astype(np.float64)
    kx = np.array([np.sort(r)[::-1][:k].mean() for r in sim])
    ky = np.array([np.sort(c)[::-1][:k].mean() for c in sim.T])

    def m(a: float, b: float) -> float:
        return {"absolute": a, "distance": a - b, "ratio": a / b}[margin]

    fwd = []
    for i in range(len(x)):
        cand = np.argsort(-sim[i], kind="stable")[:k]
        sc = [m(sim[i, j], (kx[i] + ky[j]) / 2) for j in cand]
        fwd.append((i, int(cand[int(np.argmax(sc))]), max(sc)))
    bwd = []
    for j in range(len(y)):
        cand = np.argsort(-sim[:, j], kind="stable")[:k]
        sc = [m(sim[i, j], (ky[j] + kx[i]) / 2) for i in cand]
        bwd.append((int(cand[int(np.argmax(sc))]), j, max(sc)))
    if retrieval == "fwd":
        out = fwd
    elif retrieval == "bwd":
        out = bwd
    elif retrieval == "intersect":
        back = {j: i for i, j, _ in bwd}
        out = [(i, j, s) for i, j, s in fwd if back[j] == i]
    else:
        out, used_x, used_y = [], set(), set()
        for i, j, s in sorted(fwd + bwd, key=lambda t: -t[2]):
            if i not in used_x and j not in used_y:
                used_x.add(i)
                used_y.add(j)
                out.append((i, j, s))
    return {(i, j, round(s, 4)) for i, j, s in out}


@pytest.mark.parametrize("retrieval", RETRIEVALS)
@pytest.mark.parametrize("margin", ["absolute", "distance", "ratio"])
def test_retrieval_modes_equal_brute_force(margin: str, retrieval: str) -> None:
    rng = np.random.default_rng(7)
    x = l2_normalize(rng.normal(size=(120, 12)))
    y = l2_normalize(rng.normal(size=(90, 12)))
    got = retrieve(neighbourhoods(x, y, 4), margin, retrieval)
    assert np.all(np.diff(got.score) <= 0), "sorted by descending score"
    pairs = {(int(i), int(j), round(float(s), 4)) for i, j, s in zip(got.src, got.tgt, got.score)}
    assert pairs == brute_retrieve(x, y, 4, margin, retrieval)


def test_retrieval_modes_hand_computed() -> None:
    # x0 ~ y0 and x1 ~ y1 are mutual best matches; x2 is closest to y1 but y1 prefers x1
    x = l2_normalize(np.array([[1, 0, 0.0], [0, 1, 0.0], [0.1, 1, 0.3]]))
    y = l2_normalize(np.array([[1, 0.05, 0.0], [0, 1, 0.05]]))
    nb = neighbourhoods(x, y, 1)
    fwd = retrieve(nb, "absolute", "fwd")
    assert sorted(zip(fwd.src.tolist(), fwd.tgt.tolist())) == [(0, 0), (1, 1), (2, 1)]
    bwd = retrieve(nb, "absolute", "bwd")
    assert sorted(zip(bwd.src.tolist(), bwd.tgt.tolist())) == [(0, 0), (1, 1)]
    inter = retrieve(nb, "absolute", "intersect")
    assert sorted(zip(inter.src.tolist(), inter.tgt.tolist())) == [(0, 0), (1, 1)]
    mx = retrieve(nb, "absolute", "max")
    assert sorted(zip(mx.src.tolist(), mx.tgt.tolist())) == [(0, 0), (1, 1)]  # x2 loses y1 to x1
    # k = 1: mutual best matches score ratio 1; x2 -> y1 scores c / ((c + cos(x1, y1)) / 2) < 1
    c, c11 = float(x[2] @ y[1]), float(x[1] @ y[1])
    assert np.allclose(sorted(retrieve(nb, "ratio", "fwd").score), [c / ((c + c11) / 2), 1.0, 1.0])


def test_unique_groups_first_occurrence_order() -> None:
    first, group = unique_groups(["b", "a", "b", "c", "a"])
    assert first.tolist() == [0, 1, 3] and group.tolist() == [0, 1, 0, 2, 1]
    first, group = unique_groups([])
    assert first.size == 0 and group.size == 0


def brute_filter(x: np.ndarray, y: np.ndarray, sk: list, tk: list, k: int, margin: str) -> np.ndarray:
    """Scores of aligned pairs with neighbourhoods over the distinct sentences of the batch."""
    ux = {key: x[i] for i, key in reversed(list(enumerate(sk)))}
    uy = {key: y[i] for i, key in reversed(list(enumerate(tk)))}
    X, Y = np.array(list(ux.values()), np.float64), np.array(list(uy.values()), np.float64)
    out = []
    for i in range(len(x)):
        a = float(x[i].astype(np.float64) @ y[i].astype(np.float64))
        mx = np.sort(X[list(ux).index(sk[i])] @ Y.T)[::-1][:k].mean()
        my = np.sort(Y[list(uy).index(tk[i])] @ X.T)[::-1][:k].mean()
        b = (mx + my) / 2
        out.append({"absolute": a, "distance": a - b, "ratio": a / b}[margin])
    return np.array(out)


def test_filter_scores_equal_brute_force_with_duplicate_sentences() -> None:
    rng = np.random.default_rng(3)
    base_x = l2_normalize(rng.normal(size=(60, 10)))
    base_y = l2_normalize(base_x + 0.4 * rng.normal(size=(60, 10)))
    idx_x = rng.integers(0, 60, 200)  # repeated sentences: neighbour lists must not repeat them
    idx_y = rng.integers(0, 60, 200)
    x, y = base_x[idx_x], base_y[idx_y]
    got = filter_scores(x, y, idx_x.tolist(), idx_y.tolist(), 4, ["absolute", "distance", "ratio"])
    for margin in ("absolute", "distance", "ratio"):
        assert np.allclose(got[margin], brute_filter(x, y, idx_x.tolist(), idx_y.tolist(), 4, margin), atol=1e-5)
    assert np.allclose(got["cosine"], np.einsum("ij,ij->i", x, y), atol=1e-6)


def test_duplicates_change_the_neighbourhood_unless_grouped() -> None:
    rng = np.random.default_rng(4)
    x = l2_normalize(rng.normal(size=(30, 8)))
    y = l2_normalize(x + 0.3 * rng.normal(size=(30, 8)))
    xs, ys = np.concatenate([x, x[:1].repeat(5, 0)]), np.concatenate([y, y[:1].repeat(5, 0)])
    keys = list(range(30)) + [0] * 5
    grouped = filter_scores(xs, ys, keys, keys, 4, ["ratio"])["ratio"]
    plain = filter_scores(x, y, list(range(30)), list(range(30)), 4, ["ratio"])["ratio"]
    assert np.allclose(grouped[:30], plain, atol=1e-6)  # the copies add nothing to any neighbourhood
    assert np.allclose(grouped[30:], plain[0], atol=1e-6)


def test_ivf_index_recall_on_clustered_data_and_gpu_refusal() -> None:
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(50, 32))
    db = l2_normalize(centres[rng.integers(0, 50, 20_000)] + 0.3 * rng.normal(size=(20_000, 32)))
    q = l2_normalize(db[:500] + 0.05 * rng.normal(size=(500, 32)))
    _, exact = knn(q, db, 4)
    _, approx = knn(q, db, 4, spec=IndexSpec(kind="ivf", nlist=64, nprobe=8))
    _, approx2 = knn(q, db, 4, spec=IndexSpec(kind="ivf", nlist=64, nprobe=8))
    assert np.array_equal(approx, approx2), "seeded IVF training: same results every run"
    assert 0.8 <= recall_at_k(exact, approx) <= 1.0
    from marginmine.errors import MarginmineError

    with pytest.raises(MarginmineError, match="FAISS sees none"):
        check_device("cuda")


def test_digests_group_lines_as_the_texts_do() -> None:
    import random

    from marginmine.search.margin import text_digests

    rng = random.Random(7)
    texts = [f"Satz {rng.randrange(40)} ü" for _ in range(500)] + ["", " ", "a\u00a0b", "a b"]
    for got, want in zip(unique_groups(text_digests(texts)), unique_groups(texts)):
        np.testing.assert_array_equal(got, want)
    assert text_digests(["x", "x", "y"]).dtype == np.dtype("S16")
    assert [len(a) for a in unique_groups(text_digests([]))] == [0, 0]


def test_digest_batches_cut_where_the_text_batches_do() -> None:
    from marginmine.scoring.files import _batches, _digest_batches
    from marginmine.search.margin import text_digests

    pairs = [(f"s{i % 13}", f"t{i % 7}") for i in range(23)]
    for size, chunk in [(5, 3), (5, 5), (4, 8), (100, 3), (1, 2)]:
        got = list(_digest_batches(iter(pairs), size, chunk=chunk))
        want = list(_batches(iter(pairs), size))
        assert len(got) == len(want), (size, chunk)
        for (gs, gt), (ws, wt) in zip(got, want):
            np.testing.assert_array_equal(gs, text_digests(ws))
            np.testing.assert_array_equal(gt, text_digests(wt))
