"""How many true pairs the top N of a scorer holds, estimated from a noise baseline.

The baseline is the same batch re-paired at random (:meth:`marginmine.scoring.kinds.Batch.repaired`)
and scored by the same scorer against the same neighbourhoods: the scores of pairs that are almost
surely not translations. The corpus' scores are a mixture, a share ``pi0`` of noise and the rest
true pairs; the estimator (Storey's ``pi0``, Storey 2002, J. R. Statist. Soc. B 64, as in
false-discovery-rate estimation) takes two assumptions:

1. *noise scores like the baseline*: the corpus' noise pairs have the baseline's score
   distribution ``G``;
2. *no true pair scores below* ``lam`` (by default the baseline's median).

Then the corpus' pairs below ``lam`` are all noise, ``pi0 = #{scores < lam} / (n * G(lam))``
(clipped to [0, 1]), and of the pairs scoring ``t`` or more (the top N, whose lowest score is
``t``, with any pairs tied with it), about ``pi0 * n * P_G(score >= t)`` are noise: the clean share
at N is one minus that over their count (clipped at 0).

Where the assumptions fail, the direction is known: true pairs below ``lam`` raise ``pi0`` (the
clean share comes out too low); noise that scores above random re-pairings - near-duplicates of a
translation, partial translations, misalignments between related sentences - is not counted in the
top N (too high). The estimate is checked against labels where a corpus has them.

Scores are held as :class:`ScoreCounts` (their distinct values and counts), so a corpus of any size
is summarised in memory bounded by its distinct scores: score files hold six decimals, so a margin
score between 0 and 2 has at most two million distinct values, whatever the corpus' size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class CleanShare:
    """``pi0``: the estimated noise share of the corpus; ``lam``: the score below which every pair
    was taken to be noise; ``shares[i]``: the estimated clean share of the top ``ns[i]``."""

    pi0: float
    lam: float
    ns: tuple[int, ...]
    shares: tuple[float, ...]


@dataclass(frozen=True)
class ScoreCounts:
    """A score distribution: its sorted distinct ``values`` (float64) and their ``counts``."""

    values: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, scores: "np.ndarray | ScoreCounts", what: str = "scores") -> "ScoreCounts":
        """The distribution of ``scores`` (finite, 1-d; an empty one is refused)."""
        if isinstance(scores, ScoreCounts):
            return scores
        v = np.asarray(scores, dtype=np.float64)
        if v.ndim != 1 or not len(v):
            raise ValueError(f"{what}: a non-empty 1-d array of scores is needed")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{what}: scores must be finite")
        values, counts = np.unique(v, return_counts=True)
        return cls(values, counts.astype(np.int64))

    def merged(self, other: "ScoreCounts") -> "ScoreCounts":
        """One distribution of both."""
        values, inverse = np.unique(np.concatenate([self.values, other.values]), return_inverse=True)
        counts = np.zeros(len(values), dtype=np.int64)
        np.add.at(counts, inverse, np.concatenate([self.counts, other.counts]))
        return ScoreCounts(values, counts)

    @cached_property
    def cum(self) -> np.ndarray:
        """How many scores are at or below each of ``values``."""
        return np.cumsum(self.counts)

    @property
    def n(self) -> int:
        return int(self.cum[-1])

    def below(self, t: "float | np.ndarray") -> "int | np.ndarray":
        """How many scores are below ``t`` (each of ``t``)."""
        i = np.searchsorted(self.values, t, side="left")  # the scores below t: values[:i]
        return np.where(i > 0, self.cum[np.maximum(i - 1, 0)], 0)

    def at_least(self, t: "float | np.ndarray") -> "int | np.ndarray":
        """How many scores are ``t`` or more."""
        return self.n - self.below(t)

    def lowest_of_top(self, n: int) -> float:
        """The lowest score of the top ``n`` (1 <= n <= the count)."""
        if not 1 <= n <= self.n:
            raise ValueError(f"N = {n}: outside 1..{self.n} (the scored pairs)")
        # the highest value with at least n scores at or above it, i.e. at most (count - n) below it
        return float(self.values[np.searchsorted(self.cum, self.n - n, side="right")])


def noise_share(scores: "np.ndarray | ScoreCounts", baseline: "np.ndarray | ScoreCounts",
                lam: float | None = None) -> tuple[float, float]:
    """``(pi0, lam)``: the estimated share of noise among ``scores`` (module docstring), with
    ``lam`` the baseline's median unless given."""
    s, b = ScoreCounts.of(scores, "scores"), ScoreCounts.of(baseline, "baseline")
    if lam is None:
        # the median: the middle value, or the mean of the two middle ones
        lo = b.values[np.searchsorted(b.cum, (b.n - 1) // 2 + 1, side="left")]
        hi = b.values[np.searchsorted(b.cum, b.n // 2 + 1, side="left")]
        lam = (float(lo) + float(hi)) / 2
    below_baseline = b.below(float(lam)) / b.n
    if below_baseline == 0:
        return 1.0, float(lam)
    return float(min(1.0, s.below(float(lam)) / (s.n * below_baseline))), float(lam)


def share_at(s: ScoreCounts, b: ScoreCounts, pi0: float, t: "float | np.ndarray") -> "float | np.ndarray":
    """The estimated clean share of the pairs scoring ``t`` or more (of each ``t``; 0 where none)."""
    kept = s.at_least(t)
    noise = pi0 * s.n * b.at_least(t) / b.n
    share = np.maximum(0.0, 1.0 - noise / np.maximum(kept, 1))
    return np.where(kept > 0, share, 0.0) if np.ndim(t) else (float(share) if kept > 0 else 0.0)


def clean_share(scores: "np.ndarray | ScoreCounts", baseline: "np.ndarray | ScoreCounts", ns: Sequence[int],
                lam: float | None = None) -> CleanShare:
    """The estimated clean share of the top N of ``scores`` for each N of ``ns`` (1 <= N <=
    len(scores)), from the noise ``baseline`` (module docstring); the pairs tied with the top N's
    lowest score count as the top N."""
    s, b = ScoreCounts.of(scores, "scores"), ScoreCounts.of(baseline, "baseline")
    pi0, lam = noise_share(s, b, lam)
    shares = tuple(float(share_at(s, b, pi0, s.lowest_of_top(int(n)))) for n in ns)
    return CleanShare(pi0, lam, tuple(int(n) for n in ns), shares)


def largest_n_at(scores: "np.ndarray | ScoreCounts", baseline: "np.ndarray | ScoreCounts", target: float,
                 lam: float | None = None) -> int:
    """The largest N whose top N has an estimated clean share (:func:`clean_share`) of at least
    ``target`` (0 < target <= 1; 0 if no N has it)."""
    if not 0 < target <= 1:
        raise ValueError(f"target {target}: a share in (0, 1]")
    s, b = ScoreCounts.of(scores, "scores"), ScoreCounts.of(baseline, "baseline")
    pi0, _ = noise_share(s, b, lam)
    # every N whose lowest score is t has the share of t; the largest of them counts every tie of t
    ok = share_at(s, b, pi0, s.values) >= target
    return int(s.at_least(s.values)[ok].max()) if ok.any() else 0
