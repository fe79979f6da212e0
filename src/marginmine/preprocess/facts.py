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
from collections import OrderedDict
from typing import TYPE_CHECKING, Sequence

from marginmine.preprocess.filters import Facts

if TYPE_CHECKING:
    from marginmine.preprocess.pipeline import PreprocessSettings

#: bytes an entry is counted beyond its two strings (its Facts object, float and OrderedDict slot):
#: about 180 measured on CPython 3.11, rounded up (tests/test_preprocess_cache.py)
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
    """The bytes a cache entry is counted as: its sentence and content strings and
    :data:`ENTRY_OVERHEAD`."""
    return sys.getsizeof(text) + sys.getsizeof(facts.content) + ENTRY_OVERHEAD


class FactCache:
    """Sentence -> :class:`Facts`, least recently used first out, holding entries of at most
    ``max_bytes`` (``max_bytes = 0`` caches nothing).

    An entry is counted as :func:`entry_bytes` when it is put (the preprocessing puts facts the
    workers finished, which nothing changes afterwards); the measured memory of an entry stays
    below that count (tests/test_preprocess_cache.py)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max(0, max_bytes)
        self._entries: OrderedDict[str, Facts] = OrderedDict()
        self.bytes = 0
        self.hits = self.misses = self.dropped = 0

    def get(self, text: str) -> Facts | None:
        facts = self._entries.get(text)
        if facts is None:
            self.misses += 1
            return None
        self._entries.move_to_end(text)
        self.hits += 1
        return facts

    def put(self, text: str, facts: Facts) -> None:
        cost = entry_bytes(text, facts)
        if cost > self.max_bytes:
            return
        old = self._entries.pop(text, None)
        if old is not None:
            self.bytes -= entry_bytes(text, old)
        self._entries[text] = facts
        self.bytes += cost
        while self.bytes > self.max_bytes:
            gone, gone_facts = self._entries.popitem(last=False)
            self.bytes -= entry_bytes(gone, gone_facts)
            self.dropped += 1

    def __len__(self) -> int:
        return len(self._entries)
