"""Statistics shared by the stages that test differences: the NMT systems' seed-aware bootstrap
(:mod:`marginmine.nmt.significance`) and the claims' paired tests (:mod:`marginmine.evaluate.paired`).
A floor module: numpy only (imported when called), no stage imported."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def shifted_null_p(diffs: np.ndarray, observed: float, tolerance: float = 1e-12) -> float:
    """The two-sided p-value of the shifted-null bootstrap (Efron & Tibshirani 1993, 16.4):
    ``(1 + #{|d_r - mean(d)| >= |d_obs|}) / (R + 1)`` over the ``R`` rounds' differences ``diffs``;
    never 0, 1 for identical systems. ``tolerance`` counts a round equal to ``d_obs`` up to rounding
    (its scale: the statistic's, e.g. 1e-9 for BLEU's 0-100)."""
    import numpy as np

    d = np.asarray(diffs, np.float64)
    extreme = int(np.count_nonzero(np.abs(d - d.mean()) >= abs(observed) - tolerance))
    return float(min(1.0, (1 + extreme) / (len(d) + 1)))
