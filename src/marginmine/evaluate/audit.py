"""A labelled audit of a scorer's ranking: the precision of its top N for every N, with an interval,
from a few hundred pairs a person labels.

**The sample.** The corpus' pairs are ranked by the scorer's score (highest first; ties in corpus
order, as top-N selection breaks them), and the ranks are cut into strata whose sizes double from
the top: ``[0, n/2^(S-1)), ..., [n/4, n/2), [n/2, n)`` (``S`` = ``strata``), so a stratum is as wide
as its distance from the top and the sample is as dense in log-rank everywhere: a cut at N = 5k is
measured about as closely as one at 40k. Every N and threshold of the config is a stratum edge too
(a geometric edge within 25% of one gives way to it), so the precision at a configured N is a sum
over whole strata. The labels are spread equally over the strata (a stratum smaller than its share
is labelled whole, the rest goes to the others) and drawn uniformly without replacement in each,
seeded per (seed, stratum).

**The estimate.** In stratum ``h`` of ``N_h`` pairs, ``s_h`` pairs are labelled good or bad and
``g_h`` of them good (pairs marked unsure, and pairs left unlabelled, are counted and left out: they
are estimated like the unlabelled pairs). The good share ``p_h`` of the stratum's unlabelled pairs
gets a Jeffreys posterior, Beta(g_h + 1/2, s_h - g_h + 1/2); each posterior draw gives the
stratum's unlabelled pairs a binomial count of good ones (they are a finite set). The good pairs of
the top N are the labelled good ones among them plus, per stratum, its share of those counts for
the stratum's unlabelled ranks below N (all of it for a stratum wholly inside the top N; a
proportional share for the stratum N ends in): the precision at N is their count over N, its 95%
interval the 2.5th-97.5th percentiles over the draws (``DRAWS``), widened to hold the point estimate
where every label agrees (Brown, Cai & DasGupta set the Jeffreys interval's upper end to 1 when every
trial succeeds). The point estimate uses the observed rates ``g_h / s_h`` (a stratum without labels
takes the nearest labelled stratum's rate below it).

**The monotone fit in the rank** (``monotone=True``, ``marginmine audit-estimate --monotone``)
projects the rates, and each draw, onto the sequences that do not rise with the rank (weighted
isotonic regression, weights ``s_h + 1``): narrower intervals where the scorer's precision does fall
with its rank. It is not the default, by measurement (bench/bench_audit.py): where a scorer ranks
noise on top - USE's ratio margin puts the demo corpus' machine translations and copies in its
first few thousand pairs, so its labelled precision rises from 0.57 at 5k to 0.71 at 40k - the
fit pools the strata, and its 95% intervals covered the truth in 7-60% of the draws at 5k and 40k,
against 93-97% for each stratum's own rate.

Why a posterior and not the bootstrap: at the top of a good ranking every sampled label is often
``good``; a bootstrap of such a stratum never draws a bad pair and its interval has width zero,
which covers the truth far less often than 95%. The Jeffreys posterior keeps a width there, and its
interval is the one Brown, Cai & DasGupta (2001, Statist. Sci. 16) recommend for a binomial share,
with the boundary change above; the simulation (:mod:`marginmine.evaluate.audit_sim`) measures the
coverage of the whole estimate on real labels. An N inside a stratum (not an edge) takes a
proportional share of the stratum's drawn count: exact in expectation where the stratum's precision
is flat, its within-stratum spread not modelled; the largest N at a target scans such N.

Memory: the sample's ranks and the draws (``strata x DRAWS``), never the corpus.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from marginmine.defaults import AUDIT_DRAWS

#: a label's code: good, bad, unsure (left out, counted), none given (left out, counted)
GOOD, BAD, UNSURE, UNLABELLED = 1, 0, -1, -2
#: the label words of the sample file and the page
LABEL_WORDS = {"good": GOOD, "bad": BAD, "unsure": UNSURE, "": UNLABELLED}
#: posterior draws of the interval
DRAWS = AUDIT_DRAWS
#: two-sided level of every interval
LEVEL = 0.95
#: a geometric stratum edge within this share of a configured cut gives way to the cut
CUT_MARGIN = 0.25


def plan_strata(n: int, strata: int, cuts: Sequence[int] = ()) -> tuple[int, ...]:
    """Rank edges ``0 = e_0 < ... < e_S = n`` of the strata (module docstring): doubling from the
    top, with every cut in ``(0, n)`` an edge."""
    if n < 1:
        raise ValueError(f"{n} pairs: an audit needs a ranking of at least one pair")
    if strata < 1:
        raise ValueError(f"strata {strata}: at least 1")
    geometric = {int(round(n / 2 ** j)) for j in range(strata)}
    cut_set = {int(c) for c in cuts if 0 < int(c) < n}
    kept = {e for e in geometric if 0 < e < n and not any(abs(e - c) <= CUT_MARGIN * c for c in cut_set)}
    return tuple(sorted({0, n} | kept | cut_set))


def allocate(edges: Sequence[int], labels: int) -> np.ndarray:
    """Labels per stratum: equal shares (the top strata take the remainder's extra ones), none above
    a stratum's size, what a full stratum cannot take spread over the others."""
    if labels < 1:
        raise ValueError(f"{labels} labels: at least 1")
    sizes = np.diff(np.asarray(edges, np.int64))
    alloc = np.zeros(len(sizes), np.int64)
    left = int(min(labels, sizes.sum()))
    while left > 0:
        idx = np.flatnonzero(alloc < sizes)
        share, extra = divmod(left, len(idx))
        add = np.full(len(idx), share, np.int64)
        add[:extra] += 1
        add = np.minimum(add, sizes[idx] - alloc[idx])
        alloc[idx] += add
        left -= int(add.sum())
    return alloc


def draw_ranks(edges: Sequence[int], alloc: np.ndarray, seed: int) -> np.ndarray:
    """The sampled ranks (0-based, sorted): ``alloc[h]`` drawn uniformly without replacement from
    stratum ``h``, seeded per (seed, stratum)."""
    out = []
    for h, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        if alloc[h]:
            out.append(lo + np.random.default_rng([seed, h]).choice(hi - lo, int(alloc[h]), replace=False))
    return np.sort(np.concatenate(out)) if out else np.zeros(0, np.int64)


def ranks_of(scores: np.ndarray) -> np.ndarray:
    """Each pair's rank (0 = best): score descending, ties in corpus order (as top-N selects)."""
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    ranks = np.empty(len(order), np.int64)
    ranks[order] = np.arange(len(order))
    return ranks


def monotone(p: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted isotonic regression of each column of ``p`` (strata x draws) onto the sequences that
    do not rise with the stratum (the min-max formula over block averages; strata are few)."""
    p = np.asarray(p, np.float64)
    column = p.ndim == 1
    if column:
        p = p[:, None]
    s = len(p)
    w = np.asarray(w, np.float64)[:, None]
    cw = np.concatenate([np.zeros((1, 1)), np.cumsum(w, axis=0)])
    cp = np.concatenate([np.zeros((1, p.shape[1])), np.cumsum(w * p, axis=0)])
    # avg[i, j] = the weighted mean of strata i..j (i <= j)
    i, j = np.triu_indices(s)
    avg = np.full((s, s, p.shape[1]), np.nan)
    avg[i, j] = (cp[j + 1] - cp[i]) / (cw[j + 1] - cw[i])
    # non-increasing fit: f_h = min over i <= h of max over j >= h of avg[i, j]
    upper = np.where(np.isnan(avg), -np.inf, avg)
    suffix_max = np.maximum.accumulate(upper[:, ::-1], axis=1)[:, ::-1]  # max over j >= h, per (i, h)
    lower_tri = np.arange(s)[:, None] > np.arange(s)[None, :]  # i > h
    suffix_max[lower_tri] = np.inf
    fit = suffix_max.min(axis=0)
    return fit[:, 0] if column else fit


@dataclass(frozen=True)
class Audit:
    """A labelled sample of a ranking of ``n`` pairs: the strata ``edges``, the sampled ``ranks``
    (sorted) and each one's label code (:data:`GOOD`, :data:`BAD`, :data:`UNSURE`,
    :data:`UNLABELLED`)."""

    n: int
    edges: tuple[int, ...]
    ranks: np.ndarray
    labels: np.ndarray
    #: fit the strata's rates to not rise with the rank (default: each stratum's own rate)
    monotone: bool = False

    def __post_init__(self) -> None:
        if len(self.ranks) != len(self.labels):
            raise ValueError(f"{len(self.ranks)} ranks for {len(self.labels)} labels")
        if self.edges[0] != 0 or self.edges[-1] != self.n or np.any(np.diff(self.edges) <= 0):
            raise ValueError(f"strata edges {self.edges}: 0 < ... < {self.n}")
        if len(self.ranks) and (self.ranks.min() < 0 or self.ranks.max() >= self.n
                                or np.any(np.diff(self.ranks) <= 0)):
            raise ValueError(f"sampled ranks: distinct, sorted, in 0..{self.n - 1}")

    @property
    def stratum(self) -> np.ndarray:
        """Each sampled rank's stratum."""
        return np.searchsorted(np.asarray(self.edges), self.ranks, side="right") - 1

    def counts(self) -> dict[str, int]:
        """How many sampled pairs carry each label."""
        return {w or "unlabelled": int((self.labels == c).sum()) for w, c in LABEL_WORDS.items()}

    def per_stratum(self) -> tuple[np.ndarray, np.ndarray]:
        """``(sure, good)`` per stratum: pairs labelled good or bad, and good."""
        s = len(self.edges) - 1
        sure = np.bincount(self.stratum[self.labels >= 0], minlength=s)
        good = np.bincount(self.stratum[self.labels == GOOD], minlength=s)
        return sure, good

    def rates(self, draws: int = 0, seed: int = 0) -> np.ndarray:
        """The strata's good shares: the observed rates (``draws = 0``; shape ``strata``) or
        ``draws`` posterior draws (``strata x draws``), both fitted monotone if :attr:`monotone`."""
        sure, good = self.per_stratum()
        if draws:
            rng = np.random.default_rng([seed, len(self.ranks)])
            p = rng.beta(good[:, None] + 0.5, (sure - good)[:, None] + 0.5, size=(len(sure), draws))
            return monotone(p, sure + 1.0) if self.monotone else p
        if not sure.any():
            raise ValueError("no pair of the sample is labelled good or bad")
        rate = np.where(sure > 0, good / np.maximum(sure, 1), np.nan)
        labelled = np.flatnonzero(sure > 0)
        for h in np.flatnonzero(sure == 0):  # the nearest labelled stratum below, else above
            below = labelled[labelled > h]
            rate[h] = rate[below[0] if len(below) else labelled[-1]]
        return monotone(rate, np.maximum(sure, 1e-9)) if self.monotone else rate

    def unlabelled_below(self, ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each N of ``ns``: the labelled-good pairs among the top N, and per stratum the top
        N's ranks that are not labelled good or bad (``len(ns) x strata``)."""
        ns = np.asarray(ns, np.int64)
        e = np.asarray(self.edges, np.int64)
        sure_ranks = self.ranks[self.labels >= 0]
        good_ranks = self.ranks[self.labels == GOOD]
        known_good = np.searchsorted(good_ranks, ns, side="left")
        top = np.clip(ns[:, None] - e[None, :-1], 0, np.diff(e)[None, :])
        cs = lambda x: np.searchsorted(sure_ranks, x, side="left")  # noqa: E731
        sure_in = cs(np.minimum(ns[:, None], e[None, 1:])) - cs(e[None, :-1])
        return known_good, top - np.where(top > 0, sure_in, 0)

    def precision(self, ns: Sequence[int], draws: int = DRAWS, seed: int = 0) -> "Precision":
        """The estimated precision of the top N for each N of ``ns`` (1 <= N <= n), with its
        interval, and the expected good pairs (module docstring)."""
        ns = np.asarray(ns, np.int64)
        if len(ns) and (ns.min() < 1 or ns.max() > self.n):
            raise ValueError(f"N outside 1..{self.n} (the ranked pairs)")
        known, unl = self.unlabelled_below(ns)
        point = known + unl @ self.rates()
        tail = (1 - LEVEL) / 2 * 100
        lo, hi = np.empty(len(ns)), np.empty(len(ns))
        p = self.rates(draws, seed)
        # each stratum's unlabelled pairs are a finite set: their good count is drawn (binomial, from
        # each draw's rate) and a top N ending inside a stratum takes its share of it
        _, whole = self.unlabelled_below(np.asarray([self.n]))
        rng = np.random.default_rng([seed, len(self.ranks), 1])
        goods = rng.binomial(whole[0][:, None], p) / np.maximum(whole[0][:, None], 1)
        for a in range(0, len(ns), 256):  # bounded memory: 256 N x draws at a time
            g = known[a:a + 256, None] + unl[a:a + 256] @ goods
            lo[a:a + 256], hi[a:a + 256] = np.percentile(g, [tail, 100 - tail], axis=1)
        # where every label agrees the percentiles can exclude the point (all good: the upper end
        # below 1): the interval is widened to hold it, as Brown, Cai & DasGupta close the Jeffreys
        # interval at 0 and 1 (the upper end is 1 when every trial succeeds)
        lo, hi = np.minimum(lo, point), np.maximum(hi, point)
        return Precision(tuple(int(x) for x in ns), point / ns, lo / ns, hi / ns, point)

    def largest_n(self, target: float, draws: int = DRAWS, seed: int = 0, step: float = 0.002) -> int:
        """The largest N whose interval's lower end is at least ``target``, over every N of a grid
        ``step`` apart in log N (and every stratum edge); 0 if none."""
        if not 0 < target <= 1:
            raise ValueError(f"target {target}: a share in (0, 1]")
        grid = np.unique(np.r_[np.round(np.geomspace(1, self.n, int(np.log(max(self.n, 2)) / step) + 2)),
                               self.edges[1:]]).astype(np.int64)
        ok = self.precision(grid, draws, seed).low >= target
        return int(grid[ok].max()) if ok.any() else 0


@dataclass(frozen=True)
class Precision:
    """The estimate at each N of ``ns``: ``point``, the interval ``[low, high]`` and the expected
    good pairs (``good``)."""

    ns: tuple[int, ...]
    point: np.ndarray
    low: np.ndarray
    high: np.ndarray
    good: np.ndarray


def labels_by_rank(ranks: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Each pair's label (bool) in rank order (``ranks`` from :func:`ranks_of`)."""
    out = np.empty(len(ranks), bool)
    out[ranks] = np.asarray(positive, bool)
    return out


def truth_at(ranks: np.ndarray, positive: np.ndarray, ns: Sequence[int]) -> np.ndarray:
    """The labelled precision of the top N for each N (all pairs labelled; ``ranks`` from
    :func:`ranks_of`)."""
    cum = np.cumsum(labels_by_rank(ranks, positive))
    ns = np.asarray(ns, np.int64)
    return cum[ns - 1] / ns
