"""The filter catalogue of the paper's preprocessing (Artetxe & Schwenk 2019, Section 5.1).

Each filter has a ``name`` (its ledger step), ``score(batch)`` returning one score per candidate,
``accept(score)`` and ``reason(score)`` naming why a rejected pair was removed. What a filter needs
to know about one sentence (is it in a protected set, its language-id probability, its Moses token
count and content tokens) is a :class:`Facts` of that sentence: computed on first use and then
shared by all filters, and by every pair that holds the sentence when the caller passes the same
:class:`Facts` (the preprocessing's sentence cache does, :mod:`marginmine.preprocess.facts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from marginmine.preprocess.tokens import content_tokens, length_ratio, tokenize


class Facts:
    """What the filters know about one sentence in its side's language; ``None`` = not computed.

    ``protected``: the sentence is in the protected (dev/test) set; ``lang_prob``: fastText's
    probability of the side's expected language (0 if not among its 5 most likely);
    ``n_tokens``: its Moses token count; ``content``: its distinct content tokens
    (:func:`~marginmine.preprocess.tokens.content_tokens`) joined by single spaces, one string
    that a cache keeps in a third of the memory of a set or a tuple of strings (a token holds no
    whitespace, and lower-casing adds none)."""

    __slots__ = ("protected", "lang_prob", "n_tokens", "content")

    def __init__(self, protected: bool | None = None, lang_prob: float | None = None,
                 n_tokens: int | None = None, content: str | None = None):
        self.protected, self.lang_prob, self.n_tokens, self.content = protected, lang_prob, n_tokens, content

    def as_tuple(self) -> tuple[bool | None, float | None, int | None, str | None]:
        return self.protected, self.lang_prob, self.n_tokens, self.content

    def __reduce__(self) -> tuple[type, tuple]:
        return Facts, self.as_tuple()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Facts) and self.as_tuple() == other.as_tuple()

    def __repr__(self) -> str:
        return "Facts(protected={!r}, lang_prob={!r}, n_tokens={!r}, content={!r})".format(*self.as_tuple())

    def fill_tokens(self, text: str, lang: str) -> None:
        """Set ``n_tokens`` and ``content`` from the Moses tokens of ``text``."""
        tokens = tokenize(text, lang)
        self.n_tokens = len(tokens)
        self.content = " ".join(content_tokens(tokens))


def content_overlap(a: str, b: str) -> float:
    """:func:`~marginmine.preprocess.tokens.jaccard` of two sets of content tokens given as
    :attr:`Facts.content` strings: the same number, ``|A & B| / (|A| + |B| - |A & B|)``."""
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    sa, sb = a.split(" "), b.split(" ")
    both = len(set(sa).intersection(sb))
    return both / (len(sa) + len(sb) - both)


@dataclass(slots=True)
class Candidate:
    """A pair being filtered, with the :class:`Facts` of each side (new, empty ones unless given)."""

    src: str
    tgt: str
    src_lang: str
    tgt_lang: str
    src_facts: Facts = field(default_factory=Facts, repr=False)
    tgt_facts: Facts = field(default_factory=Facts, repr=False)

    def _tokens_known(self) -> tuple[Facts, Facts]:
        s, t = self.src_facts, self.tgt_facts
        if s.n_tokens is None:
            s.fill_tokens(self.src, self.src_lang)
        if t.n_tokens is None:
            t.fill_tokens(self.tgt, self.tgt_lang)
        return s, t

    @property
    def token_counts(self) -> tuple[int, int]:
        """The Moses token counts of the two sides."""
        s, t = self.src_facts.n_tokens, self.tgt_facts.n_tokens
        if s is None or t is None:
            f, g = self._tokens_known()
            s, t = f.n_tokens, g.n_tokens
        return s, t  # type: ignore[return-value]

    @property
    def content_overlap(self) -> float:
        """Jaccard overlap of the two sides' content tokens (:func:`~marginmine.preprocess.tokens.token_overlap`)."""
        s, t = self._tokens_known()
        return content_overlap(s.content, t.content)  # type: ignore[arg-type]


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
        return [c.token_counts for c in batch]

    def accept(self, score: tuple[int, int]) -> bool:
        lo, hi = self.min_tokens, self.max_tokens
        n_src, n_tgt = score
        return lo <= n_src <= hi and lo <= n_tgt <= hi

    def reason(self, score: tuple[int, int]) -> str:
        return "too_short" if min(score) < self.min_tokens else "too_many_tokens"


@dataclass
class TokenOverlapFilter:
    """Drop pairs whose content tokens overlap by ``max_overlap`` or more (paper: 50%)."""

    max_overlap: float
    name: str = "overlap"

    def score(self, batch: Sequence[Candidate]) -> list[float]:
        out = []
        for c in batch:
            a, b = c.src_facts.content, c.tgt_facts.content
            if a is None or b is None:
                s, t = c._tokens_known()
                a, b = s.content, t.content
            out.append(content_overlap(a, b))  # type: ignore[arg-type]
        return out

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
        return [length_ratio(*c.token_counts) for c in batch]

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

        for c in batch:
            for facts, text in ((c.src_facts, c.src), (c.tgt_facts, c.tgt)):
                if facts.protected is None:
                    facts.protected = sentence_key(text) in self.keys
        return [c.src_facts.protected or c.tgt_facts.protected for c in batch]

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
