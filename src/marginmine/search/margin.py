"""Margin-based scoring (Artetxe & Schwenk 2019, Section 2).

For a candidate pair (x, y)::

    score(x, y) = margin(cos(x, y), (mean_k NN_x->Y cos + mean_k NN_y->X cos) / 2)

with the margin functions ``absolute`` (a), ``distance`` (a - b) and ``ratio`` (a / b), where
``mean_k`` is the mean cosine of the k nearest neighbours of x among the target sentences
(forward) and of y among the source sentences (backward). Yang et al. (2019, BiDE+AM) rescore with
``a / b + a`` (``eq9``, their Eq. 9, the same b) and with the one-sided ``eq10`` (Eq. 10: b is the
query sentence's own neighbourhood alone, so filtering needs one kNN search). Pure array functions.

Two uses, as in LASER's ``mine_bitexts.py``:

* *mining* two monolingual sets: every source sentence's best-scoring candidate among its k
  nearest neighbours (forward), every target's (backward), the pairs both agree on
  (intersection), or the union greedily de-duplicated by descending score (max);
* *filtering* given pairs: the neighbourhoods come from a batch of pairs (both sides searched
  against each other), and each pair is scored as it stands (:func:`filter_scores`).

Neighbour lists hold no duplicates: callers pass unique sentences (:func:`unique_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Literal, Sequence

import numpy as np

from marginmine.io.text import DIGEST_BYTES, text_digests  # noqa: F401 (re-exported: the search floor's API)
from marginmine.search.knn import IndexSpec, knn

Margin = Literal["absolute", "distance", "ratio"]
MARGINS: tuple[str, ...] = ("absolute", "distance", "ratio", "eq9", "eq10")
#: margins whose neighbourhood is the query side's alone (Yang et al. 2019, Eq. 10: one kNN search)
ONE_SIDED: frozenset[str] = frozenset({"eq10"})
RETRIEVALS: tuple[str, ...] = ("fwd", "bwd", "intersect", "max")
EXACT = IndexSpec(kind="flat")


def apply_margin(cos: np.ndarray, avg: np.ndarray, margin: str) -> np.ndarray:
    """``margin(a, b)`` elementwise for cosines ``cos`` and neighbourhood averages ``avg``."""
    if margin == "absolute":
        return np.asarray(cos, dtype=np.float32)
    if margin == "distance":
        return np.asarray(cos - avg, dtype=np.float32)
    if margin == "ratio":
        return np.asarray(cos / avg, dtype=np.float32)
    if margin in ("eq9", "eq10"):  # Yang et al. (2019), Eq. 9 / 10: cos / margin + cos
        return np.asarray(cos / avg + cos, dtype=np.float32)
    raise ValueError(f"unknown margin {margin!r} (choose from {', '.join(MARGINS)})")


def knn_mean(similarities: np.ndarray) -> np.ndarray:
    """Mean of each row's k nearest-neighbour similarities (the per-sentence neighbourhood)."""
    return similarities.mean(axis=1, dtype=np.float64).astype(np.float32)


def candidate_scores(x2y_sim: np.ndarray, x2y_ids: np.ndarray, x_mean: np.ndarray, y_mean: np.ndarray,
                     margin: str) -> np.ndarray:
    """Margin scores of each source sentence's kNN candidates: shape like ``x2y_sim``. One-sided
    margins (``eq10``) use the query sentence's neighbourhood alone."""
    if margin in ONE_SIDED:
        return apply_margin(x2y_sim, np.broadcast_to(x_mean[:, None], x2y_sim.shape), margin)
    avg = (x_mean[:, None] + y_mean[x2y_ids]) / 2
    return apply_margin(x2y_sim, avg, margin)


def best_candidates(x: np.ndarray, y: np.ndarray, k: int, margin: str) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``x``: the index in ``y`` with the best margin score among its k nearest
    neighbours, and that score (forward retrieval, as used for Tatoeba-style evaluation).

    ``absolute`` is plain nearest-neighbour retrieval by cosine.
    """
    x2y_sim, x2y_ids = knn(x, y, k)
    if margin == "absolute":
        return x2y_ids[:, 0], x2y_sim[:, 0]
    y2x_sim = x2y_sim if margin in ONE_SIDED else knn(y, x, k)[0]  # one-sided: no backward search
    scores = candidate_scores(x2y_sim, x2y_ids, knn_mean(x2y_sim), knn_mean(y2x_sim), margin)
    best = np.argmax(scores, axis=1)
    rows = np.arange(len(x))
    return x2y_ids[rows, best], scores[rows, best]


@dataclass(frozen=True)
class Neighbourhoods:
    """kNN in both directions between unique source rows ``x`` and unique target rows ``y``."""

    x2y_sim: np.ndarray
    x2y_ids: np.ndarray
    y2x_sim: np.ndarray
    y2x_ids: np.ndarray

    @property
    def x_mean(self) -> np.ndarray:
        return knn_mean(self.x2y_sim)

    @property
    def y_mean(self) -> np.ndarray:
        return knn_mean(self.y2x_sim)


def neighbourhoods(x: np.ndarray, y: np.ndarray, k: int, spec: IndexSpec = EXACT) -> Neighbourhoods:
    """Forward (x -> y) and backward (y -> x) k nearest neighbours."""
    x2y_sim, x2y_ids = knn(x, y, k, spec=spec)
    y2x_sim, y2x_ids = knn(y, x, k, spec=spec)
    return Neighbourhoods(x2y_sim, x2y_ids, y2x_sim, y2x_ids)


@dataclass(frozen=True)
class Mined:
    """Mined pairs: source row, target row and margin score, best score first."""

    src: np.ndarray
    tgt: np.ndarray
    score: np.ndarray

    def __len__(self) -> int:
        return len(self.score)


def _best_of(sim: np.ndarray, ids: np.ndarray, own_mean: np.ndarray, other_mean: np.ndarray,
             margin: str) -> tuple[np.ndarray, np.ndarray]:
    """Each query row's best candidate (first on ties) and its score; rows without candidates get -1."""
    if sim.shape[1] == 0:
        return np.full(len(sim), -1, np.int64), np.full(len(sim), -np.inf, np.float32)
    scores = candidate_scores(sim, ids, own_mean, other_mean, margin)
    best = np.argmax(scores, axis=1)
    rows = np.arange(len(sim))
    return ids[rows, best], scores[rows, best]


def _by_score(src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> Mined:
    order = np.lexsort((tgt, src, -score.astype(np.float64)))  # score desc, then src, tgt
    return Mined(src[order].astype(np.int64), tgt[order].astype(np.int64), score[order].astype(np.float32))


def retrieve(nb: Neighbourhoods, margin: str, retrieval: str) -> Mined:
    """Candidate pairs by ``retrieval`` (fwd, bwd, intersect, max), as LASER's ``mine`` mode.

    ``max`` takes the union of the forward and backward candidates and keeps, in order of
    descending score, each pair whose source and target are both still unused.
    """
    if retrieval not in RETRIEVALS:
        raise ValueError(f"unknown retrieval {retrieval!r} (choose from {', '.join(RETRIEVALS)})")
    x_mean, y_mean = nb.x_mean, nb.y_mean
    fwd_best, fwd_score = _best_of(nb.x2y_sim, nb.x2y_ids, x_mean, y_mean, margin)
    bwd_best, bwd_score = _best_of(nb.y2x_sim, nb.y2x_ids, y_mean, x_mean, margin)
    xs, ys = np.arange(len(fwd_best)), np.arange(len(bwd_best))
    if retrieval == "fwd":
        ok = fwd_best >= 0
        return _by_score(xs[ok], fwd_best[ok], fwd_score[ok])
    if retrieval == "bwd":
        ok = bwd_best >= 0
        return _by_score(bwd_best[ok], ys[ok], bwd_score[ok])
    if retrieval == "intersect":
        ok = fwd_best >= 0
        ok[ok] = bwd_best[fwd_best[ok]] == xs[ok]
        return _by_score(xs[ok], fwd_best[ok], fwd_score[ok])
    src = np.concatenate([xs, bwd_best])
    tgt = np.concatenate([fwd_best, ys])
    score = np.concatenate([fwd_score, bwd_score])
    ok = (src >= 0) & (tgt >= 0)
    cand = _by_score(src[ok], tgt[ok], score[ok])
    used_x = np.zeros(len(xs), bool)
    used_y = np.zeros(len(ys), bool)
    keep = np.zeros(len(cand), bool)
    for n, (i, j) in enumerate(zip(cand.src.tolist(), cand.tgt.tolist())):
        if not used_x[i] and not used_y[j]:
            used_x[i] = used_y[j] = keep[n] = True
    return Mined(cand.src[keep], cand.tgt[keep], cand.score[keep])



def unique_groups(items: Sequence[Hashable] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, group)``: the position of each distinct item's first occurrence, and for every
    item the number of its distinct item (in order of first occurrence). ``items``: hashable
    values, or a byte-string array (e.g. :func:`text_digests`), grouped by sorting."""
    if isinstance(items, np.ndarray) and items.dtype.kind == "S":
        if len(items) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        _, first_of, inverse = np.unique(items, return_index=True, return_inverse=True)
        order = np.argsort(first_of, kind="stable")  # distinct items by first occurrence
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        return first_of[order].astype(np.int64), rank[inverse.ravel()]
    ids: dict[Hashable, int] = {}
    group = np.fromiter((ids.setdefault(it, len(ids)) for it in items), dtype=np.int64, count=len(items))
    first = np.full(len(ids), -1, np.int64)
    rev = group[::-1]
    first[rev] = np.arange(len(group) - 1, -1, -1)  # last write wins = earliest position
    return first, group


#: partners per distinct sentence that an approximate filtering search always considers
PARTNERS_CAP = 8


def partners(g_query: np.ndarray, g_other: np.ndarray, n_query: int, cap: int = PARTNERS_CAP) -> np.ndarray:
    """``(n_query, p)`` int64: for each distinct sentence of one side, the distinct sentences of the
    other side it is paired with in the batch (its first ``cap`` distinct partners in line order,
    ``-1`` padded). A filtering search passes them as candidates to an approximate index, which may miss
    them although a pair's own partner is often among its sentence's nearest neighbours."""
    g_query, g_other = np.asarray(g_query, np.int64), np.asarray(g_other, np.int64)
    if len(g_query):  # a (sentence, partner) pair once, at its first line: repeated lines fill no slot
        _, once = np.unique(g_query * (int(g_other.max()) + 1) + g_other, return_index=True)
        once.sort()
        g_query, g_other = g_query[once], g_other[once]
    order = np.argsort(g_query, kind="stable")
    q = g_query[order]
    first = np.searchsorted(q, q, side="left")
    rank = np.arange(len(q)) - first
    width = int(min(cap, rank.max() + 1)) if len(q) else 1
    out = np.full((n_query, width), -1, np.int64)
    keep = rank < width
    pairs = np.stack([q[keep], rank[keep], g_other[order][keep]])
    out[pairs[0], pairs[1]] = pairs[2]
    return out


def gathered_cosines(xu: np.ndarray, yu: np.ndarray, gx: np.ndarray, gy: np.ndarray,
                     chunk: int = 65_536) -> np.ndarray:
    """``cos(xu[gx[i]], yu[gy[i]])`` for every i (unit rows), accumulated in float64, in chunks so
    memory stays bounded."""
    out = np.empty(len(gx), dtype=np.float32)
    for a in range(0, len(gx), chunk):
        xa = np.asarray(xu[gx[a:a + chunk]], np.float64)
        ya = np.asarray(yu[gy[a:a + chunk]], np.float64)
        out[a:a + chunk] = np.einsum("ij,ij->i", xa, ya)
    return out


def filter_scores_unique(xu: np.ndarray, yu: np.ndarray, gx: np.ndarray, gy: np.ndarray, k: int,
                         margins: Sequence[str], spec: IndexSpec = EXACT) -> dict[str, np.ndarray]:
    """Margin scores of the pairs ``(xu[gx[i]], yu[gy[i]])`` of one batch (the filtering mode).

    ``xu``/``yu`` hold the batch's distinct source/target sentences; each side's neighbourhood is
    its k nearest neighbours among the distinct sentences of the other side. Returns one float32
    array per margin, plus ``"cosine"``.
    """
    if len(gx) != len(gy):
        raise ValueError("filter_scores: both sides need one group id per pair")
    cos = gathered_cosines(xu, yu, gx, gy)
    out: dict[str, np.ndarray] = {"cosine": cos}
    avg = np.zeros(len(gx))
    if len(gx) and any(m != "absolute" for m in margins):
        nb = neighbourhoods(xu, yu, k, spec)
        avg = (nb.x_mean[gx].astype(np.float64) + nb.y_mean[gy].astype(np.float64)) / 2
    for m in margins:
        out[m] = cos.copy() if m == "absolute" else apply_margin(cos.astype(np.float64), avg, m)
    return out


def filter_scores(x: np.ndarray, y: np.ndarray, src_keys: Sequence[Hashable], tgt_keys: Sequence[Hashable],
                  k: int, margins: Sequence[str], spec: IndexSpec = EXACT) -> dict[str, np.ndarray]:
    """:func:`filter_scores_unique` for line-aligned rows ``x[i], y[i]``; ``*_keys`` say which rows
    are the same sentence (e.g. the texts)."""
    if len(x) != len(src_keys) or len(y) != len(tgt_keys):
        raise ValueError("filter_scores: x, y and the key lists must have the same length")
    fx, gx = unique_groups(src_keys)
    fy, gy = unique_groups(tgt_keys)
    return filter_scores_unique(np.asarray(x)[fx], np.asarray(y)[fy], gx, gy, k, margins, spec)
