"""The filter catalogue of the paper's preprocessing (Artetxe & Schwenk 2019, Section 5.1).

Each filter has a ``name`` (its ledger step), ``score(batch)`` returning one score per candidate,
``accept(score)`` and ``reason(score)`` naming why a rejected pair was removed. Filters that
need Moses tokens read them from the candidate, which tokenises each side once, lazily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from marginmine.preprocess.tokens import length_ratio, token_overlap, tokenize


@dataclass(slots=True)
class Candidate:
    """A pair being filtered; tokens are computed on first use and then shared by all filters."""

    src: str
    tgt: str
    src_lang: str
    tgt_lang: str
    _src_tokens: list[str] | None = field(default=None, repr=False)
    _tgt_tokens: list[str] | None = field(default=None, repr=False)

    @property
    def src_tokens(self) -> list[str]:
        if self._src_tokens is None:
            self._src_tokens = tokenize(self.src, self.src_lang)
        return self._src_tokens

    @property
    def tgt_tokens(self) -> list[str]:
        if self._tgt_tokens is None:
            self._tgt_tokens = tokenize(self.tgt, self.tgt_lang)
        return self._tgt_tokens


class PairFilter(Protocol):
    name: str

    def score(self, batch: Sequence[Candidate]) -> list[Any]: ...

    def accept(self, score: Any) -> bool: ...

    def reason(self, score: Any) -> str: ...


@dataclass
class LengthFilter:
    """Both sides between ``min_tokens`` and ``max_tokens`` Moses tokens (paper: 3-80)."""

    min_tokens: int
    max_tokens: int
    name: str = "length"

    def score(self, batch: Sequence[Candidate]) -> list[tuple[int, int]]:
        return [(len(c.src_tokens), len(c.tgt_tokens)) for c in batch]

    def accept(self, score: tuple[int, int]) -> bool:
        return all(self.min_tokens <= n <= self.max_tokens for n in score)

    def reason(self, score: tuple[int, int]) -> str:
        return "too_short" if min(score) < self.min_tokens else "too_many_tokens"


@dataclass
class TokenOverlapFilter:
    """Drop pairs whose content tokens overlap by ``max_overlap`` or more (paper: 50%)."""

    max_overlap: float
    name: str = "overlap"

    def score(self, batch: Sequence[Candidate]) -> list[float]:
        return [token_overlap(c.src_tokens, c.tgt_tokens) for c in batch]

    def accept(self, score: float) -> bool:
        return score < self.max_overlap

    def reason(self, score: float) -> str:
        return "copy" if score >= 1.0 else "token_overlap"


@dataclass
class LengthRatioFilter:
    """Drop pairs whose longer side has more than ``max_ratio`` times the tokens (paper: 2)."""

    max_ratio: float
    name: str = "ratio"

    def score(self, batch: Sequence[Candidate]) -> list[float]:
        return [length_ratio(len(c.src_tokens), len(c.tgt_tokens)) for c in batch]

    def accept(self, score: float) -> bool:
        return score <= self.max_ratio

    def reason(self, score: float) -> str:
        return "length_ratio"


@dataclass
class ProtectedSetFilter:
    """Drop pairs with a side that occurs in a protected (dev/test) set, after normalisation."""

    keys: frozenset[bytes]
    name: str = "test_overlap"

    def score(self, batch: Sequence[Candidate]) -> list[bool]:
        from marginmine.preprocess.normalize import sentence_key

        return [sentence_key(c.src) in self.keys or sentence_key(c.tgt) in self.keys for c in batch]

    def accept(self, score: bool) -> bool:
        return not score

    def reason(self, score: bool) -> str:
        return "test_set_overlap"


def apply_filters(filters: Sequence[PairFilter], batch: Sequence[Candidate]) -> list[tuple[str, str] | None]:
    """Run the filters in order; each pair gets ``None`` (kept) or ``(step, reason)`` of the first
    filter that rejects it. Later filters only see pairs the earlier ones kept."""
    verdicts: list[tuple[str, str] | None] = [None] * len(batch)
    alive = list(range(len(batch)))
    for flt in filters:
        if not alive:
            break
        scores = flt.score([batch[i] for i in alive])
        still = []
        for i, s in zip(alive, scores):
            if flt.accept(s):
                still.append(i)
            else:
                verdicts[i] = (flt.name, flt.reason(s))
        alive = still
    return verdicts
