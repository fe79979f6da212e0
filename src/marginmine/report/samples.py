"""Pairs to read beside the numbers: for each scorer, pairs at fixed score quantiles and at the top-N
boundary (the last pairs a selection keeps, the first it drops); for two scorers, pairs one keeps and
the other drops. The pages and TSVs are written by :mod:`marginmine.report.sample_pages`.

Ranks follow :func:`marginmine.scoring.selection.select` exactly: scores in descending order, ties
in corpus order (the order of the shards, then their lines), so the top N of the ranking is the
selection of N (tested against it) and "just kept" / "just dropped" are the pairs either side of
its boundary. Memory: a scorer's scores and their ranking (24 bytes a pair) while it is sampled;
for the disagreement, both compared scorers' scores, orders and ranks (about 48 bytes a pair for
the two); never the texts of more than the sampled pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from marginmine.defaults import PER_BOUNDARY, PER_DISAGREE, PER_QUANTILE
from marginmine.errors import InputError
from marginmine.io.text import iter_sentences

#: the score quantiles sampled (shares of pairs scoring at most the sampled score)
QUANTILES = (0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99)


@dataclass(frozen=True)
class Drawn:
    """One sampled pair of a scorer: ``index`` is 0-based over all shards, ``rank`` 1-based in the
    scorer's ranking; for a disagreement, ``other`` is the scorer that drops it (its rank and score)."""

    scorer: str
    section: str  # quantile | boundary | disagree
    label: str
    index: int
    rank: int
    score: float
    kept: bool
    other: str = ""
    other_rank: int = 0
    other_score: float = math.nan


def ranking(scores: np.ndarray) -> np.ndarray:
    """Pair indices best first; ties keep corpus order, as the selection breaks them."""
    return np.argsort(-np.asarray(scores, np.float64), kind="stable")


def _ranks(order: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(order), np.int64)
    ranks[order] = np.arange(len(order))
    return ranks


def quantile_label(q: float) -> str:
    return f"{100 * q:g}%"


def draw_scorer(name: str, scores: np.ndarray, sizes: Sequence[tuple[str, int]],
                quantiles: Sequence[float] = QUANTILES, per_quantile: int = PER_QUANTILE,
                per_boundary: int = PER_BOUNDARY, order: np.ndarray | None = None) -> list[Drawn]:
    """The pairs of one scorer: ``per_quantile`` consecutive pairs of its ranking around each score
    quantile (q = 1%: 1% of the pairs score lower), and for each ``(label, N)`` of ``sizes`` the last
    ``per_boundary`` pairs the top N keeps and the first ``per_boundary`` it drops. ``kept`` says
    whether the top N keeps the pair: boundary rows their N, quantile rows the first of ``sizes``."""
    n = len(scores)
    if order is None:
        order = ranking(scores)
    out: list[Drawn] = []

    def add(section: str, label: str, positions: range, n_keep: int) -> None:
        for pos in positions:
            i = int(order[pos])
            out.append(Drawn(name, section, label, i, pos + 1, float(scores[i]), pos < n_keep))

    if n == 0:
        return out
    first_n = sizes[0][1] if sizes else 0
    for q in quantiles:
        centre = round((1 - q) * (n - 1))  # position in the ranking, best first
        start = min(max(0, centre - per_quantile // 2), max(0, n - per_quantile))
        add("quantile", quantile_label(q), range(start, min(n, start + per_quantile)), first_n)
    for label, n_keep in sizes:
        add("boundary", f"N={label}", range(max(0, n_keep - per_boundary), min(n, n_keep + per_boundary)), n_keep)
    return out


def draw_disagreement(a: str, scores_a: np.ndarray, b: str, scores_b: np.ndarray,
                      sizes: Sequence[tuple[str, int]], seed: int, per: int = PER_DISAGREE,
                      orders: tuple[np.ndarray, np.ndarray] | None = None) -> list[Drawn]:
    """For each ``(label, N)``: a seeded sample of ``per`` pairs the top N of ``a`` keeps and that of
    ``b`` drops, and as many the other way round (scorer = the one that keeps it), best kept first."""
    if len(scores_a) != len(scores_b):
        raise ValueError(f"{a} has {len(scores_a)} scores, {b} {len(scores_b)}")
    order_a, order_b = orders or (ranking(scores_a), ranking(scores_b))
    ranks = (_ranks(order_a), _ranks(order_b))
    out: list[Drawn] = []
    for k, (label, n_keep) in enumerate(sizes):
        kept = (ranks[0] < n_keep, ranks[1] < n_keep)
        for side, (keeps, drops) in enumerate(((a, b), (b, a))):
            only = np.flatnonzero(kept[side] & ~kept[1 - side])
            rng = np.random.default_rng([seed, k, side])
            pick = np.sort(rng.choice(only, size=min(per, len(only)), replace=False)) if len(only) else only
            pick = sorted(pick.tolist(), key=lambda i: ranks[side][i])
            s_keep, s_drop = (scores_a, scores_b) if side == 0 else (scores_b, scores_a)
            out += [Drawn(keeps, "disagree", f"N={label}", i, int(ranks[side][i]) + 1, float(s_keep[i]), True,
                          drops, int(ranks[1 - side][i]) + 1, float(s_drop[i])) for i in pick]
    return out


@dataclass(frozen=True)
class PairText:
    shard: int
    line: int
    src: str
    tgt: str
    extra: str


def fetch_pairs(pair_files: Sequence[str | Path], counts: Sequence[int], indices: set[int]) -> dict[int, PairText]:
    """The texts of the pairs at ``indices`` (0-based over the shards in order). Every shard file is
    read to its end: its line count must equal its scores' ``counts`` (the files are line-aligned)."""
    out: dict[int, PairText] = {}
    offset = 0
    for shard, (path, count) in enumerate(zip(pair_files, counts, strict=True)):
        n = 0
        for n, text in enumerate(iter_sentences(path), 1):
            i = offset + n - 1
            if i in indices and n <= count:
                cols = text.split("\t")
                if len(cols) < 2:
                    raise InputError(str(path), "has no source and target column", line=n)
                out[i] = PairText(shard, n, cols[0], cols[1], " ".join(cols[2:]))
        if n != count:
            raise InputError(str(path), f"has {n} pairs but its score file {count} scores",
                             hint="the pairs and scores of a shard must be line-aligned: re-run the scoring step")
        offset += count
    return out
