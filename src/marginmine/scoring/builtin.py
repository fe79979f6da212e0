"""The built-in score kinds: the paper's (Artetxe & Schwenk 2019, Sec. 2) ratio and distance margins
over the k-NN neighbourhoods of a batch and the plain cosine (the paper's ``absolute``), and the
rescoring of Yang et al. (2019, BiDE+AM, Sec. 6.1): ``eq9`` = cos / margin + cos with the same
two-sided margin, ``eq10`` with the source's neighbourhood alone (one kNN search per batch).
Output is float32, computed exactly as the margins of :mod:`marginmine.search.margin`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from marginmine.defaults import K
from marginmine.scoring.kinds import Batch, register
from marginmine.search.margin import apply_margin


@dataclass(frozen=True)
class _Neighbourhood:
    k: int = K

    mines: ClassVar[str | None] = None
    texts: ClassVar[bool] = False  # scores from the vectors alone

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise ValueError(f"k must be a positive integer, got {self.k!r}")

    def score(self, batch: Batch) -> np.ndarray:
        return apply_margin(batch.cosine().astype(np.float64), batch.neighbourhood_mean(self.k), self.mines or "")


@register("ratio")
@dataclass(frozen=True)
class Ratio(_Neighbourhood):
    """cos(x, y) / mean k-NN similarity of x and y (the paper's best)."""

    mines: ClassVar[str | None] = "ratio"


@register("distance")
@dataclass(frozen=True)
class Distance(_Neighbourhood):
    """cos(x, y) - mean k-NN similarity of x and y (CSLS is twice this)."""

    mines: ClassVar[str | None] = "distance"


@register("eq9")
@dataclass(frozen=True)
class Eq9(_Neighbourhood):
    """cos(x, y) / mean k-NN similarity of x and y + cos(x, y) (Yang et al. 2019, Eq. 9)."""

    mines: ClassVar[str | None] = "eq9"


@register("eq10")
@dataclass(frozen=True)
class Eq10(_Neighbourhood):
    """cos(x, y) / mean k-NN similarity of x alone + cos(x, y) (Yang et al. 2019, Eq. 10): the
    margin searches the source side only."""

    mines: ClassVar[str | None] = "eq10"

    def score(self, batch: Batch) -> np.ndarray:
        return apply_margin(batch.cosine().astype(np.float64), batch.source_mean(self.k), "eq10")


@register("cosine")
@dataclass(frozen=True)
class Cosine:
    """cos(x, y), no neighbourhood."""

    mines: ClassVar[str | None] = "absolute"
    texts: ClassVar[bool] = False

    def score(self, batch: Batch) -> np.ndarray:
        return batch.cosine().copy()


@register("absolute")
@dataclass(frozen=True)
class Absolute(Cosine):
    """The paper's name for the cosine."""
