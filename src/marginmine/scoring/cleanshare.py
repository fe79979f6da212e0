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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CleanShare:
    """``pi0``: the estimated noise share of the corpus; ``lam``: the score below which every pair
    was taken to be noise; ``shares[i]``: the estimated clean share of the top ``ns[i]``."""

    pi0: float
    lam: float
    ns: tuple[int, ...]
    shares: tuple[float, ...]


def _sorted_finite(values: np.ndarray, what: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or not len(v):
        raise ValueError(f"{what}: a non-empty 1-d array of scores is needed")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what}: scores must be finite")
    return np.sort(v)


def noise_share(scores: np.ndarray, baseline: np.ndarray, lam: float | None = None) -> tuple[float, float]:
    """``(pi0, lam)``: the estimated share of noise among ``scores`` (module docstring), with
    ``lam`` the baseline's median unless given."""
    return _noise_share(_sorted_finite(scores, "scores"), _sorted_finite(baseline, "baseline"), lam)


def _noise_share(s: np.ndarray, b: np.ndarray, lam: float | None) -> tuple[float, float]:
    """:func:`noise_share` of sorted finite scores ``s`` and baseline ``b``."""
    lam = float(np.median(b)) if lam is None else float(lam)
    below_baseline = np.searchsorted(b, lam, side="left") / len(b)
    if below_baseline == 0:
        return 1.0, lam
    pi0 = np.searchsorted(s, lam, side="left") / (len(s) * below_baseline)
    return float(min(1.0, pi0)), lam


def clean_share(scores: np.ndarray, baseline: np.ndarray, ns: Sequence[int], lam: float | None = None) -> CleanShare:
    """The estimated clean share of the top N of ``scores`` for each N of ``ns`` (1 <= N <=
    len(scores)), from the noise ``baseline`` (module docstring)."""
    s = _sorted_finite(scores, "scores")
    b = _sorted_finite(baseline, "baseline")
    pi0, lam = _noise_share(s, b, lam)
    shares = []
    for n in ns:
        if not 1 <= n <= len(s):
            raise ValueError(f"N = {n}: outside 1..{len(s)} (the scored pairs)")
        t = s[len(s) - n]  # the top N's lowest score; pairs tied with it count as the top
        at_or_above = len(s) - np.searchsorted(s, t, side="left")
        above = (len(b) - np.searchsorted(b, t, side="left")) / len(b)
        shares.append(float(max(0.0, 1.0 - pi0 * len(s) * above / at_or_above)))
    return CleanShare(pi0, lam, tuple(int(n) for n in ns), tuple(shares))


def largest_n_at(scores: np.ndarray, baseline: np.ndarray, target: float, lam: float | None = None) -> int:
    """The largest N whose top N has an estimated clean share (:func:`clean_share`) of at least
    ``target`` (0 < target <= 1; 0 if no N has it)."""
    if not 0 < target <= 1:
        raise ValueError(f"target {target}: a share in (0, 1]")
    s = _sorted_finite(scores, "scores")
    b = _sorted_finite(baseline, "baseline")
    pi0, _ = _noise_share(s, b, lam)
    n = np.arange(1, len(s) + 1)
    t = s[::-1]  # t[n - 1]: the top n's lowest score
    at_or_above = len(s) - np.searchsorted(s, t, side="left")
    above = (len(b) - np.searchsorted(b, t, side="left")) / len(b)
    share = np.maximum(0.0, 1.0 - pi0 * len(s) * above / at_or_above)
    ok = np.flatnonzero(share >= target)
    return int(n[ok[-1]]) if len(ok) else 0
