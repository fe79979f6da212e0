"""The audit proved on fully labelled sets, by simulation: draw ``labels`` labels as the audit would
(:mod:`marginmine.evaluate.audit`), estimate the precision of the top N, compare with the labelled
precision of the whole top N, over many seeds; beside it, the noise baselines' estimates
(:mod:`marginmine.evaluate.cleanshare`) of the same rows.

A row per data set, scorer and N: the true precision, the audit's median absolute error, the share
of seeds whose 95% interval covers the truth, the mean interval width; the same error and coverage
for *the rest* - the top N's pairs the draw did not label, whose labelled precision is what the
labels did not already show; and each baseline's estimate and absolute error (one number: a
baseline has no labels to draw).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from marginmine.evaluate.audit import (
    BAD,
    DRAWS,
    GOOD,
    Audit,
    allocate,
    draw_ranks,
    labels_by_rank,
    plan_strata,
    ranks_of,
    truth_at,
)


def simulate(scores: np.ndarray, positive: np.ndarray, ns: Sequence[int], labels: int, strata: int,
             seeds: Sequence[int], draws: int = DRAWS, monotone: bool = False) -> dict[str, np.ndarray]:
    """Per N: ``truth``, ``median_abs_error``, ``coverage``, ``mean_width`` and each seed's
    ``estimate`` (``seeds x N``) of the audit with ``labels`` labels over ``scores`` (the labels
    ``positive`` stand in for the person)."""
    scores = np.asarray(scores, np.float64)
    positive = np.asarray(positive, bool)
    if len(scores) != len(positive):
        raise ValueError(f"{len(scores)} scores for {len(positive)} labels")
    ranks = ranks_of(scores)
    by_rank = labels_by_rank(ranks, positive)
    truth = truth_at(ranks, positive, ns)
    edges = plan_strata(len(scores), strata, ns)
    alloc = allocate(edges, labels)
    n_arr = np.asarray(ns, np.int64)
    good_top = truth * n_arr
    est, low, high = (np.empty((len(seeds), len(ns))) for _ in range(3))
    rest_err, rest_cover = (np.empty((len(seeds), len(ns))) for _ in range(2))
    for i, seed in enumerate(seeds):
        drawn = draw_ranks(edges, alloc, seed)
        audit = Audit(len(scores), edges, drawn, np.where(by_rank[drawn], GOOD, BAD), monotone)
        p = audit.precision(ns, draws, seed)
        est[i], low[i], high[i] = p.point, p.low, p.high
        # the pairs of the top N nobody labelled ("the rest"): their labelled precision against the
        # estimate's share for them (the top N's estimate less its known labels, over their count)
        labelled = np.searchsorted(drawn, n_arr)
        known = np.asarray([by_rank[drawn[:m]].sum() for m in labelled])
        rest = np.maximum(n_arr - labelled, 1)
        rest_truth = (good_top - known) / rest
        rest_err[i] = np.abs((p.good - known) / rest - rest_truth)
        rest_cover[i] = (((low[i] * n_arr - known) / rest <= rest_truth + 1e-9)
                         & (rest_truth <= (high[i] * n_arr - known) / rest + 1e-9))
    return {"truth": truth, "estimate": est, "median_abs_error": np.median(np.abs(est - truth), axis=0),
            "coverage": ((low <= truth) & (truth <= high)).mean(axis=0), "mean_width": (high - low).mean(axis=0),
            "rest_median_abs_error": np.median(rest_err, axis=0), "rest_coverage": rest_cover.mean(axis=0)}


def simulation_rows(data: str, scorer: str, scores: np.ndarray, positive: np.ndarray, ns: Sequence[int],
                    labels: int, strata: int, seeds: Sequence[int],
                    baselines: Mapping[str, np.ndarray] = {}, draws: int = DRAWS,
                    monotone: bool = False) -> list[dict[str, object]]:
    """:func:`simulate`'s table rows, with each noise baseline's (``{name: baseline scores}``)
    estimated clean share of the same top N and its absolute error."""
    from marginmine.evaluate.cleanshare import clean_share

    sim = simulate(scores, positive, ns, labels, strata, seeds, draws, monotone)
    shares = {name: clean_share(scores, b, ns).shares for name, b in baselines.items()}
    rows = []
    for j, n in enumerate(ns):
        row: dict[str, object] = {
            "data": data, "scorer": scorer, "pairs": len(scores), "N": int(n), "labels": labels, "seeds": len(seeds),
            "truth": round(float(sim["truth"][j]), 4),
            "audit median |error|": round(float(sim["median_abs_error"][j]), 4),
            "audit 95% coverage": round(float(sim["coverage"][j]), 3),
            "audit mean width": round(float(sim["mean_width"][j]), 4),
            "rest median |error|": round(float(sim["rest_median_abs_error"][j]), 4),
            "rest coverage": round(float(sim["rest_coverage"][j]), 3)}
        for name, s in shares.items():
            row[f"{name} estimate"] = round(float(s[j]), 4)
            row[f"{name} |error|"] = round(abs(float(s[j]) - float(sim["truth"][j])), 4)
        rows.append(row)
    return rows


def largest_n_rows(data: str, scorer: str, scores: np.ndarray, positive: np.ndarray, sizes: Sequence[int],
                   labels: int, strata: int, seeds: Sequence[int], target: float, draws: int = 1000,
                   step: float = 0.01) -> dict[str, object]:
    """The largest N at ``target`` (:meth:`Audit.largest_n`) checked against the labels: the true
    largest N whose labelled precision is at least ``target``, the median of the estimates, and the
    share of seeds whose recommended top N truly has that precision (what the lower bound promises)."""
    scores = np.asarray(scores, np.float64)
    positive = np.asarray(positive, bool)
    ranks = ranks_of(scores)
    by_rank = labels_by_rank(ranks, positive)
    precision = np.cumsum(by_rank) / np.arange(1, len(by_rank) + 1)
    ok = np.flatnonzero(precision >= target)
    true_n = int(ok.max()) + 1 if len(ok) else 0
    edges = plan_strata(len(scores), strata, sizes)
    alloc = allocate(edges, labels)
    found = []
    for seed in seeds:
        drawn = draw_ranks(edges, alloc, seed)
        found.append(Audit(len(scores), edges, drawn, np.where(by_rank[drawn], GOOD, BAD)).largest_n(
            target, draws, seed, step))
    found_arr = np.asarray(found)
    holds = np.where(found_arr > 0, precision[np.maximum(found_arr, 1) - 1] >= target, True)
    return {"data": data, "scorer": scorer, "pairs": len(scores), "labels": labels, "seeds": len(seeds),
            "target": target, "true largest N": true_n, "median estimate": int(np.median(found_arr)),
            "estimate 0": int((found_arr == 0).sum()), "holds": round(float(holds.mean()), 3)}
