"""Translate-then-vote (majority voting with bidirectional pre-translation, ``../shared/seeds/003``,
Sec. 4.1 Eq. 1, Algorithms 1 and 2): three candidate sets of the same two sentence collections,
voted on.

* ``orig``: the sources against the targets (ratio margin, ``k`` neighbours, intersection
  retrieval: a pair is found when each side is the other's best candidate, no threshold);
* ``forward``: the sources translated into the target language against the targets;
* ``backward``: the sources against the targets translated into the source language.

``strict`` keeps the pairs found in all three sets, ``pairwise`` those found in at least two
(the union of the three pairwise intersections). Everything here is a pure function of
embeddings; the translations are made and embedded by the workflow (``marginmine translate``,
``marginmine embed``).

In filtering mode (the ``vote`` score kind) the two collections are one scoring batch's distinct
sources and targets: a corpus pair is found by a set when its two sides are each other's best
candidate within its batch. Its score puts the voted pairs first and orders each part by the
ratio margin (:func:`voted_score`), so top-N takes the voted pairs by margin, then the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

from marginmine.defaults import K
from marginmine.scoring.kinds import Batch, register
from marginmine.search.knn import IndexSpec
from marginmine.search.margin import apply_margin, neighbourhoods, retrieve

#: the three candidate sets, in the order of :func:`found_sets`' columns
SETS = ("orig", "forward", "backward")
#: the rules of the ``vote`` kind: how many of the three sets must hold a pair, or one set alone
RULES = {"strict": 3, "pairwise": 2, "orig": "orig", "forward": "forward", "backward": "backward"}


def mutual_best(x: np.ndarray, y: np.ndarray, k: int, spec: IndexSpec = IndexSpec(kind="flat")) -> np.ndarray:
    """For each row of ``x``: the row of ``y`` that it chooses and that chooses it back as the best
    ratio-margin candidate among ``k`` neighbours (intersection retrieval), or -1."""
    partner = np.full(len(x), -1, np.int64)
    if len(x) == 0 or len(y) == 0:
        return partner
    mined = retrieve(neighbourhoods(x, y, min(k, len(x), len(y)), spec), "ratio", "intersect")
    partner[mined.src] = mined.tgt
    return partner


def vote_partners(x: np.ndarray, y: np.ndarray, x_translated: np.ndarray, y_translated: np.ndarray, k: int,
                  spec: IndexSpec = IndexSpec(kind="flat")) -> np.ndarray:
    """int ``(3, len(x))``: for each of :data:`SETS`, each source row's mutual-best target row (or
    -1). It depends on the distinct sentences only, not on how they are paired (a re-paired batch
    reuses it). ``x_translated[r]`` embeds the translation of source r into the target language,
    ``y_translated[r]`` that of target r into the source language."""
    if x_translated.shape != x.shape or y_translated.shape != y.shape:
        raise ValueError(f"translations' embeddings {x_translated.shape}, {y_translated.shape} do not match the "
                         f"sentences' {x.shape}, {y.shape}: one row per distinct sentence, same dimension")
    return np.stack([mutual_best(a, b, k, spec) for a, b in ((x, y), (x_translated, y), (x, y_translated))])


def found_in(partners: np.ndarray, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """bool ``(pairs, 3)``: whether pair i (source row ``gx[i]``, target row ``gy[i]``) is each set's
    mutual best (:func:`vote_partners`)."""
    gx, gy = np.asarray(gx, np.int64), np.asarray(gy, np.int64)
    if not len(gx):
        return np.zeros((0, len(SETS)), bool)
    return (partners[:, gx] == gy).T


def found_sets(x: np.ndarray, y: np.ndarray, x_translated: np.ndarray, y_translated: np.ndarray,
               gx: np.ndarray, gy: np.ndarray, k: int, spec: IndexSpec = IndexSpec(kind="flat")) -> np.ndarray:
    """bool ``(pairs, 3)``: whether pair i (source row ``gx[i]`` of ``x``, target row ``gy[i]`` of
    ``y``) is found by each of :data:`SETS` (:func:`vote_partners`, :func:`found_in`)."""
    return found_in(vote_partners(x, y, x_translated, y_translated, k, spec), gx, gy)


def vote(found: np.ndarray, rule: str) -> np.ndarray:
    """bool per pair: kept by ``rule`` (``strict``: in all three sets; ``pairwise``: in at least two;
    ``orig``/``forward``/``backward``: in that set) from :func:`found_sets`' columns."""
    if rule not in RULES:
        raise ValueError(f"unknown vote rule {rule!r} (choose from {', '.join(RULES)})")
    need = RULES[rule]
    if isinstance(need, str):
        return found[:, SETS.index(need)].copy()
    return found.sum(axis=1) >= need


def vote_pairs(sets: Sequence[set[tuple[int, int]]], need: int) -> set[tuple[int, int]]:
    """The pairs that at least ``need`` of ``sets`` hold (3 of 3: strict, 2 of 3: pairwise)."""
    counts: dict[tuple[int, int], int] = {}
    for s in sets:
        for p in s:
            counts[p] = counts.get(p, 0) + 1
    return {p for p, c in counts.items() if c >= need}


def mined_sets(x: np.ndarray, y: np.ndarray, x_translated: np.ndarray, y_translated: np.ndarray, k: int,
               spec: IndexSpec = IndexSpec(kind="flat")) -> dict[str, set[tuple[int, int]]]:
    """Mining mode: the three candidate sets as ``{set name: {(source row, target row)}}`` over
    all rows of ``x`` and ``y`` (the paper's Algorithm 2 without a threshold)."""
    out = {}
    for name, (a, b) in zip(SETS, ((x, y), (x_translated, y), (x, y_translated))):
        partner = mutual_best(a, b, k, spec)
        out[name] = {(i, int(j)) for i, j in enumerate(partner.tolist()) if j >= 0}
    return out


def rule_pairs(sets: dict[str, set[tuple[int, int]]], rule: str) -> set[tuple[int, int]]:
    """The pairs that ``rule`` keeps of :func:`mined_sets`' sets."""
    if rule not in RULES:
        raise ValueError(f"unknown vote rule {rule!r} (choose from {', '.join(RULES)})")
    need = RULES[rule]
    return set(sets[need]) if isinstance(need, str) else vote_pairs([sets[n] for n in SETS], need)


def set_prf(kept: set[tuple[int, int]], gold: set[tuple[int, int]]) -> tuple[float, float, float]:
    """Precision, recall and F1 of the pairs ``kept`` against ``gold`` (no threshold)."""
    correct = len(kept & gold)
    p = correct / len(kept) if kept else 0.0
    r = correct / len(gold) if gold else 0.0
    return p, r, 2 * p * r / (p + r) if p + r else 0.0


def voted_score(voted: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """float64 per pair: ``2 + r / (1 + |r|)`` for a voted pair, ``r / (1 + |r|)`` for the others
    (``r`` its ratio margin): every voted pair above every other, each part in ratio-margin order;
    a voted pair scores in (1, 3), the others in (-1, 1)."""
    r = np.asarray(ratio, np.float64)
    return np.where(np.asarray(voted, bool), 2.0, 0.0) + r / (1.0 + np.abs(r))


@register("vote")
@dataclass(frozen=True)
class Vote:
    """Translate-then-vote in filtering mode: the pairs that ``rule`` keeps (``strict``,
    ``pairwise``, or one set: ``orig``, ``forward``, ``backward``) first, each part by its ratio
    margin (:func:`voted_score`); ``k`` neighbours for every search and for the margin."""

    rule: str = "pairwise"
    k: int = K

    #: mining with votes is :func:`vote_prf` (three searches), not one margin function
    mines: ClassVar[str | None] = None
    #: needs both sides translated into the other language and embedded (the workflow provides them)
    translated: ClassVar[bool] = True
    texts: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {', '.join(RULES)}, got {self.rule!r}")
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise ValueError(f"k must be a positive integer, got {self.k!r}")

    def score(self, batch: Batch) -> np.ndarray:
        ratio = apply_margin(batch.cosine().astype(np.float64), batch.neighbourhood_mean(self.k), "ratio")
        return voted_score(vote(batch.vote_sets(self.k), self.rule), ratio)
