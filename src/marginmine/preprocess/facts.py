"""Each distinct sentence's filter facts computed once: what the workers compute, and the bounded
cache the preprocessing keeps them in.

A crawl repeats sentences (boilerplate, navigation, recombined segments), and language id and Moses
tokenisation depend on the sentence alone, not on the pair. So
:func:`marginmine.preprocess.pipeline.preprocess` looks each side of each pair up in a
:class:`FactCache`; only sentences it has not seen (and that are not already being computed) go to
the workers, which return their :class:`~marginmine.preprocess.filters.Facts` (:func:`sentence_facts`);
the filters then decide every pair from the facts of its two sides. The verdicts are those of the
filters run pair by pair, because every fact is a function of the sentence and its side's language.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Sequence

from marginmine.preprocess.filters import Facts

if TYPE_CHECKING:
    from marginmine.preprocess.pipeline import PreprocessSettings

#: bytes an entry is counted beyond its strings and content tuple (its Facts object, float and dict
#: slots): about 125 measured on CPython 3.11, rounded up (tests/test_preprocess_cache.py)
ENTRY_OVERHEAD = 256


def sentence_facts(texts: Sequence[str], lang: str, settings: "PreprocessSettings") -> list[Facts]:
    """The facts of each of ``texts`` (one side, language ``lang``) that the filters of ``settings``
    can need: whether it is protected; if not, its language-id probability; if that passes
    ``langid_min_prob`` (or language id is off), its token count and content tokens. A pair with a
    side left short of facts is removed before any filter asks for the missing ones (and a filter
    that asks computes them itself)."""
    from marginmine.preprocess.langid import fill_lang_probs
    from marginmine.preprocess.normalize import sentence_key

    facts = [Facts() for _ in texts]
    live = list(zip(facts, texts))
    if settings.protected:
        for f, text in live:
            f.protected = sentence_key(text) in settings.protected
        live = [(f, text) for f, text in live if not f.protected]
    if settings.langid:
        fill_lang_probs([f for f, _ in live], [text for _, text in live], lang, settings.langid_model)
        live = [(f, text) for f, text in live if f.lang_prob >= settings.langid_min_prob]  # type: ignore[operator]
    for f, text in live:
        f.fill_tokens(text, lang)
    return facts


def entry_bytes(text: str, facts: Facts) -> int:
    """The bytes a cache entry is counted as: its sentence, its content tuple and each token in it
    (tokens are shared between entries, so this errs high) and :data:`ENTRY_OVERHEAD`."""
    content = facts.content
    return (sys.getsizeof(text) + ENTRY_OVERHEAD
            + (sys.getsizeof(content) + sum(map(sys.getsizeof, content)) if content else 0))


class FactCache:
    """Sentence -> :class:`Facts`, holding at most ``max_bytes`` (estimated), least recently used
    sentences dropped first (approximately).

    Two generations: new entries and hits go to the young dict; when it holds half the budget, it
    becomes the old one and the previous old one is dropped. A sentence used within the last half
    budget's worth of entries is always found. ``max_bytes = 0`` caches nothing. An entry costs
    ``sys.getsizeof`` of its sentence and content strings plus :data:`ENTRY_OVERHEAD`; a sentence
    found in the old generation is counted again in the young one, so the estimate only errs high.
    """

    def __init__(self, max_bytes: int):
        self.half = max(0, max_bytes) // 2
        self._young: dict[str, Facts] = {}
        self._old: dict[str, Facts] = {}
        self._young_bytes = 0
        self.hits = self.misses = self.dropped = 0

    def get(self, text: str) -> Facts | None:
        facts = self._young.get(text)
        if facts is None:
            facts = self._old.get(text)
            if facts is None:
                self.misses += 1
                return None
            self._add(text, facts)
        self.hits += 1
        return facts

    def put(self, text: str, facts: Facts) -> None:
        self._add(text, facts)

    def _add(self, text: str, facts: Facts) -> None:
        cost = entry_bytes(text, facts)
        if cost > self.half:
            return
        if self._young_bytes + cost > self.half:
            self.dropped += len(self._old)
            self._old, self._young, self._young_bytes = self._young, {}, 0
        self._young[text] = facts
        self._young_bytes += cost

    @property
    def bytes(self) -> int:
        """The estimated bytes of both generations (at most ``max_bytes``)."""
        return self._young_bytes + sum(entry_bytes(t, f) for t, f in self._old.items())

    def __len__(self) -> int:
        return len(self._young.keys() | self._old.keys())
