"""A user's own score kind, as docs/architecture.md shows it: the module a config's ``plugins:``
names. tests/test_smoke.py copies it out of the repository and runs it through the whole DAG;
tests/test_scorers.py scores real pairs with it."""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from marginmine.scoring import Batch, register


@register("length-ratio")
@dataclass(frozen=True)
class LengthRatio:
    """Shorter side's characters over the longer side's: a toy score kind from a user's module."""

    mines: ClassVar[str | None] = None

    def score(self, batch: Batch) -> np.ndarray:
        a = np.array([len(s) for s in batch.src], float)
        b = np.array([len(t) for t in batch.tgt], float)
        return np.minimum(a, b) / np.maximum(np.maximum(a, b), 1)
