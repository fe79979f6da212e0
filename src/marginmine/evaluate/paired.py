"""Significance of one row of an evaluation table against another, from the items behind them.

Every non-BLEU comparison of the claims table (``marginmine claims``) is two rows of one table; the
table's items sidecar (:mod:`marginmine.io.items`) holds what each row was computed from. Which
sidecar holds what, and the test each column gets:

============================  ====================================  ==========================================
table (writer)                item columns                          columns tested, how
============================  ====================================  ==========================================
``intrinsic.tsv``             encoder, set, margin, direction,      ``err_src2tgt`` / ``err_tgt2src``: exact
(encoders.intrinsic)          item (sentence), wrong (0/1)          McNemar on the sentences one row gets right
                                                                    and the other wrong; ``err_avg``: an exact
                                                                    sign test over the gold pairs, each pair's
                                                                    errors in both directions summed (the two
                                                                    directions of a pair are not independent)
``bucc.tsv``                  scorer, encoder, margin, retrieval,   ``f1``, ``precision``, ``recall`` (split
(evaluate.bucc)               split, item (source sentence), tp,    test), ``train_f1`` (split train): paired
                              fp, gold, units                       bootstrap over the pool's source sentences
``quality.tsv``               data, scorer, item (pair), label,     ``auc``, ``p@N``: paired bootstrap over
(evaluate.filtereval)         score                                 the labelled pairs, stratified by label
``shortcut.tsv``              scorer, group, against (own |         ``auc`` (own), ``auc_vs_positives``
(evaluate.shortcut)           positives), item, label, score        (positives): bootstrap, stratified by label
``composition.tsv``           method, N, group, item (a selected    ``share`` of one group in two selections of
(cli.score composition)       pair)                                 the same N: exact McNemar on the group's
                                                                    pairs one selection keeps and the other not
============================  ====================================  ==========================================

Paired or not: two rows are paired when they saw the same items (the same ids); each round then
draws one resample of the items for both. Rows over different items (e.g. two MLPs' own kept-out
positives in the shortcut check) are resampled independently, which is the two-sample bootstrap.

The bootstrap's p is the shifted-null one the NMT comparison uses
(:func:`marginmine.stats.shifted_null_p`): ``(1 + #{|d_r - mean(d)| >= |d_obs|}) / (R + 1)`` over ``R``
rounds of the difference A - B; deterministic given the seed. McNemar's is the exact two-sided
binomial p of the discordant counts ``b`` (A wrong, B right) and ``c``: ``min(1, 2 P(X <= min(b, c)))``
for ``X ~ Bin(b + c, 1/2)``, 1 when no item is discordant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from marginmine.defaults import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from marginmine.errors import MarginmineError
from marginmine.stats import shifted_null_p


@dataclass(frozen=True)
class PairedTest:
    """The outcome of one test: the p-value, its name (``McNemar``, ``bootstrap``) and how the
    items were drawn (``paired`` / ``unpaired``), the items each side had."""

    p: float
    test: str
    paired: bool
    items_a: int
    items_b: int

    def label(self) -> str:
        return self.test if self.test != "bootstrap" else f"{'paired' if self.paired else 'two-sample'} bootstrap"


def _binomial_p(b: int, c: int) -> float:
    """Two-sided exact binomial p of ``b`` against ``c`` at 1/2 (1 when both are 0)."""
    n = b + c
    return 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n)


def _same_items(a: Mapping[str, object], b: Mapping[str, object], test: str) -> None:
    if set(a) != set(b):
        raise MarginmineError(f"{test} needs the same items on both sides ({len(a)} vs {len(b)}, "
                              f"{len(set(a) ^ set(b))} not shared)")


def mcnemar(wrong_a: Mapping[str, bool], wrong_b: Mapping[str, bool]) -> PairedTest:
    """Exact McNemar of two error rates on the same items (``item -> wrong``); the items must agree."""
    _same_items(wrong_a, wrong_b, "McNemar")
    b = sum(1 for k, w in wrong_a.items() if w and not wrong_b[k])
    c = sum(1 for k, w in wrong_a.items() if not w and wrong_b[k])
    return PairedTest(_binomial_p(b, c), "McNemar", True, len(wrong_a), len(wrong_b))


def sign_test(errors_a: Mapping[str, int], errors_b: Mapping[str, int]) -> PairedTest:
    """Exact sign test of per-item error counts on the same items: the items where A errs more
    against those where B does (ties dropped)."""
    _same_items(errors_a, errors_b, "the sign test")
    more = sum(1 for k, e in errors_a.items() if e > errors_b[k])
    less = sum(1 for k, e in errors_a.items() if e < errors_b[k])
    return PairedTest(_binomial_p(more, less), "sign test", True, len(errors_a), len(errors_b))


def f1_of(tp: np.ndarray, fp: np.ndarray, gold: np.ndarray, column: str) -> np.ndarray:
    """Precision, recall or F1 (``column``) of summed counts, one per round: ``tp``, ``fp``, ``gold``
    are the rounds' sums (the mining table's own arithmetic, :func:`~marginmine.scoring.selection.prf_of_counts`)."""
    from marginmine.scoring.selection import prf_of_counts

    precision, recall, f1 = prf_of_counts(tp, tp + fp, gold)
    return {"precision": precision, "recall": recall}.get(column, f1)


def bootstrap_counts(a: Mapping[str, tuple[int, int, int]], b: Mapping[str, tuple[int, int, int]], units: int,
                     column: str, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PairedTest:
    """Paired bootstrap of precision / recall / F1 (``column``) over a pool's ``units`` source
    sentences; ``a``/``b``: ``item -> (tp, fp, gold)`` for the sentences with any (the others count
    zero in all three, and are drawn like the rest)."""
    ids = sorted(set(a) | set(b))
    if len(ids) > units:
        raise MarginmineError(f"bootstrap over {units} units, but {len(ids)} items have counts")
    rng = np.random.default_rng(seed)

    def counts(side: Mapping[str, tuple[int, int, int]]) -> np.ndarray:
        m = np.zeros((units, 3))
        for i, k in enumerate(ids):
            if k in side:
                m[i] = side[k]
        return m

    ca, cb = counts(a), counts(b)
    observed = float(f1_of(*ca.sum(0)[:, None], column)[0] - f1_of(*cb.sum(0)[:, None], column)[0])
    diffs = np.empty(resamples)
    for start in range(0, resamples, 100):
        n = min(100, resamples - start)
        w = np.stack([np.bincount(rng.integers(0, units, units), minlength=units) for _ in range(n)]).astype(float)
        sa, sb = w @ ca, w @ cb
        diffs[start:start + n] = f1_of(*sa.T, column) - f1_of(*sb.T, column)
    return PairedTest(shifted_null_p(diffs, observed), "bootstrap", True, len(a), len(b))


def bootstrap_ranked(a: Mapping[str, tuple[bool, float]], b: Mapping[str, tuple[bool, float]],
                     statistic: Callable[[np.ndarray, np.ndarray], float],
                     resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PairedTest:
    """Bootstrap of a statistic of scored, labelled items (``item -> (label, score)``; e.g. ROC-AUC
    or precision at N: ``statistic(scores, labels)``), stratified by label: each round draws as many
    positives and negatives as there are. Paired when both sides have the same items (and labels),
    else each side is drawn on its own."""
    rng = np.random.default_rng(seed)
    paired = set(a) == set(b) and all(a[k][0] == b[k][0] for k in a)

    def arrays(side: Mapping[str, tuple[bool, float]], ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([side[k][1] for k in ids], np.float64), np.array([side[k][0] for k in ids], bool))

    ids_a = sorted(a)
    ids_b = ids_a if paired else sorted(b)
    (sa, la), (sb, lb) = arrays(a, ids_a), arrays(b, ids_b)
    observed = statistic(sa, la) - statistic(sb, lb)

    def draw(labels: np.ndarray) -> np.ndarray:
        pos, neg = np.flatnonzero(labels), np.flatnonzero(~labels)
        return np.concatenate([rng.choice(pos, len(pos)) if len(pos) else pos,
                               rng.choice(neg, len(neg)) if len(neg) else neg])

    diffs = np.empty(resamples)
    for r in range(resamples):
        ia = draw(la)
        ib = ia if paired else draw(lb)
        diffs[r] = statistic(sa[ia], la[ia]) - statistic(sb[ib], lb[ib])
    return PairedTest(shifted_null_p(diffs, observed), "bootstrap", paired, len(a), len(b))


def _matching(items: Sequence[Mapping[str, str]], select: Mapping[str, str]) -> list[Mapping[str, str]]:
    return [r for r in items if all(r.get(k) == v for k, v in select.items())]


def compare(items: Sequence[Mapping[str, str]], column: str, a: Mapping[str, str], b: Mapping[str, str],
            resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> PairedTest | None:
    """The test of ``column`` between the table rows picked by ``a`` and ``b``, from their items
    (the sidecar's lines, as the table above lays them out); None when the sidecar has no items for
    this column or either row (e.g. a cosine reference column of the shortcut check)."""
    from marginmine.scoring.metrics import precision_at, roc_auc

    if not items:
        return None
    cols = set(items[0])
    if any(k not in cols for k in (*a, *b)):
        return None
    if "wrong" in cols:
        directions = {"err_src2tgt": ("src2tgt",), "err_tgt2src": ("tgt2src",),
                      "err_avg": ("src2tgt", "tgt2src")}.get(column)
        if directions is None:
            return None
        if len(directions) == 1:
            sides = [{r["item"]: r["wrong"] == "1" for r in _matching(items, s) if r["direction"] in directions}
                     for s in (a, b)]
            return mcnemar(*sides) if all(sides) and set(sides[0]) == set(sides[1]) else None
        counts: list[dict[str, int]] = [{}, {}]
        for side, s in zip(counts, (a, b)):
            for r in _matching(items, s):
                side[r["item"]] = side.get(r["item"], 0) + (r["wrong"] == "1")
        return sign_test(*counts) if all(counts) and set(counts[0]) == set(counts[1]) else None
    if "tp" in cols:
        if column not in ("f1", "precision", "recall", "train_f1"):
            return None
        split = "train" if column == "train_f1" else "test"
        rows = [_matching(items, {**s, "split": split}) for s in (a, b)]
        if not all(rows):
            return None
        units = {int(r["units"]) for side in rows for r in side}
        if len(units) != 1:
            return None  # two pools: not one population of sentences
        sides = [{r["item"]: (int(r["tp"]), int(r["fp"]), int(r["gold"])) for r in side} for side in rows]
        return bootstrap_counts(*sides, units.pop(), "f1" if column == "train_f1" else column, resamples, seed)
    if "label" not in cols and column == "share" and {"method", "group"} <= cols:
        sides3 = [{r["item"] for r in _matching(items, s)} for s in (a, b)]
        if not all(sides3):
            return None
        union = sides3[0] | sides3[1]  # pairs neither keeps are concordant: they do not count
        return mcnemar({k: k in sides3[0] for k in union}, {k: k in sides3[1] for k in union})
    if "label" not in cols:
        return None
    if "against" in cols:
        against = {"auc": "own", "auc_vs_positives": "positives"}.get(column)
        if against is None:
            return None
        a, b = {**a, "against": against}, {**b, "against": against}
        column = "auc"  # either column is the ROC-AUC of the items it picks
    if column == "auc":
        statistic: Callable[[np.ndarray, np.ndarray], float] = roc_auc
    elif column.startswith("p@") and column[2:].isdigit():
        n = int(column[2:])

        def statistic(scores: np.ndarray, labels: np.ndarray) -> float:
            return precision_at(scores, labels, n)
    else:
        return None
    sides2 = [{r["item"]: (r["label"] == "1", float(r["score"])) for r in _matching(items, s)} for s in (a, b)]
    return bootstrap_ranked(*sides2, statistic, resamples, seed) if all(sides2) else None
