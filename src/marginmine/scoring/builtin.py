"""The paper's scores (Artetxe & Schwenk 2019, Sec. 2) as score kinds: the ratio and distance
margins over the k-NN neighbourhoods of a batch, and the plain cosine (the paper's ``absolute``).
Output is float32, computed exactly as the margins of :mod:`marginmine.scoring.margin`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from marginmine.defaults import K
from marginmine.scoring.margin import apply_margin
from marginmine.scoring.kinds import Batch, register


@dataclass(frozen=True)
class _Neighbourhood:
    k: int = K

    mines: ClassVar[str | None] = None

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


@register("cosine")
@dataclass(frozen=True)
class Cosine:
    """cos(x, y), no neighbourhood."""

    mines: ClassVar[str | None] = "absolute"

    def score(self, batch: Batch) -> np.ndarray:
        return batch.cosine().copy()


@register("absolute")
@dataclass(frozen=True)
class Absolute(Cosine):
    """The paper's name for the cosine."""
