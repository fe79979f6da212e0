"""The scale corpus' pair generators; :mod:`marginmine.data.scalecorpus` holds the contract and the build.

The clean pool indexed for joins and recombinations, the joiner of 2-3 same-origin pool pairs, one
endless seeded generator of candidate rows per component (:func:`component_generators`) and the
window of recent rows the copy components draw from. The build takes from each generator what it
needs and checks every row.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from marginmine.data.demo_noise import truncate_words, whitespace_variant
from marginmine.data.demo_sources import (
    ORIGIN_GNAD,
    ORIGIN_M30K,
    ORIGIN_WIKI,
    TRUNCATE_MIN_WORDS,
    DemoPair,
    component_rng,
)
from marginmine.data.democorpus import DemoInputs
from marginmine.errors import MarginmineError
from marginmine.preprocess.normalize import match_form

# --------------------------------------------------------------------------------------------------
# constants

#: a pool pair is joined only if neither side has more words; a joined side has at most JOIN_MAX_WORDS
JOIN_PART_MAX_WORDS = 30
JOIN_MAX_WORDS = 60
#: share of joins with three parts (when the third fits in JOIN_MAX_WORDS)
JOIN_THREE_SHARE = 0.25
#: share of truncated / untranslated-copy / French pairs made from a joined unit, not a single pair
UNIT_JOINED_SHARE = 0.5
#: a truncated side keeps this share of its words (in percent; the workflow's length ratio is 2)
SCALE_TRUNCATE_KEEP_PERCENT = (55, 85)
#: misaligned, misaligned-joined and partial-joined pairs pair sides whose word counts differ by at most
#: this factor, as a length-based sentence aligner's mistakes do (the workflow's token ratio limit is 2)
MISALIGN_MAX_RATIO = 1.5
#: share of untranslated copies that copy the English (the rest copy the German)
COPY_EN_SHARE = 0.7
#: draws per line before the build gives up (a component whose pairs are all used or all guarded)
MAX_DRAWS = 1000

T = TypeVar("T")

#: en, de, id, origin, kind, match_form(en), match_form(de): a match form is None where the build
#: computes it; a join's is the join of its parts' (NFKC never composes across the joining space)
Row = tuple[str, str, str, str, str, "str | None", "str | None"]


# --------------------------------------------------------------------------------------------------
# the pool, indexed for joins and recombinations


class _Pool:
    """The clean pool as parallel lists, with integer classes of equal sentences (match_form) and
    the set of true (English class, German class) pairs, so recombinations can be checked fast."""

    def __init__(self, pool: Sequence[DemoPair]):
        self.ids = [p.id for p in pool]
        self.en = [p.en for p in pool]
        self.de = [p.de for p in pool]
        self.origin = [p.origin for p in pool]
        self.en_mf = [match_form(t) for t in self.en]
        self.de_mf = [match_form(t) for t in self.de]
        self.en_words = [len(p.en.split()) for p in pool]
        self.de_words = [len(p.de.split()) for p in pool]
        self.en_cls = _classes(self.en_mf)
        self.de_cls = _classes(self.de_mf)
        self.n_de = max(self.de_cls, default=0) + 1
        self.true = frozenset(e * self.n_de + g for e, g in zip(self.en_cls, self.de_cls))
        self.by_origin: dict[str, list[int]] = {}
        for i, o in enumerate(self.origin):
            self.by_origin.setdefault(o, []).append(i)

    def translates(self, i: int, j: int) -> bool:
        """Whether pair j's German is a pool translation of pair i's English."""
        return self.en_cls[i] * self.n_de + self.de_cls[j] in self.true

    def joiner(self, indices: Sequence[int]) -> _Joiner:
        return _Joiner(self, [i for i in indices if self.en_words[i] <= JOIN_PART_MAX_WORDS
                              and self.de_words[i] <= JOIN_PART_MAX_WORDS])


def _classes(forms: Sequence[str]) -> list[int]:
    """Class number of each match form: equal forms, equal class (numbered by first occurrence)."""
    seen: dict[str, int] = {}
    return [seen.setdefault(f, len(seen)) for f in forms]


class _Joiner:
    """Draws sets of 2-3 pool pairs of one origin that can be joined (distinct sentences, sides
    within JOIN_MAX_WORDS)."""

    def __init__(self, pool: _Pool, indices: list[int]):
        self.pool = pool
        self.indices = indices
        self.by_origin: dict[str, list[int]] = {}
        for i in indices:
            self.by_origin.setdefault(pool.origin[i], []).append(i)
        if not indices or max(len(v) for v in self.by_origin.values()) < 2:
            raise MarginmineError("scale corpus: the pool has too few short pairs to join")

    def draw(self, rng: random.Random, origin: str | None = None) -> list[int]:
        """2 parts, or 3 (JOIN_THREE_SHARE of the time, if a third fits); one origin (``origin``
        if given). Two joinable parts always fit (2 * JOIN_PART_MAX_WORDS <= JOIN_MAX_WORDS)."""
        r = rng.random
        three = r() < JOIN_THREE_SHARE
        pool = self.pool
        en_cls, de_cls = pool.en_cls, pool.de_cls
        first_from = self.indices if origin is None else self.by_origin[origin]
        for _ in range(MAX_DRAWS):
            a = first_from[int(r() * len(first_from))]
            group = self.by_origin[pool.origin[a]]
            b = group[int(r() * len(group))]
            if en_cls[b] == en_cls[a] or de_cls[b] == de_cls[a]:
                continue
            if not three:
                return [a, b]
            en_w = pool.en_words[a] + pool.en_words[b]
            de_w = pool.de_words[a] + pool.de_words[b]
            for _ in range(20):
                c = group[int(r() * len(group))]
                if (en_w + pool.en_words[c] <= JOIN_MAX_WORDS and de_w + pool.de_words[c] <= JOIN_MAX_WORDS
                        and en_cls[c] != en_cls[a] and en_cls[c] != en_cls[b]
                        and de_cls[c] != de_cls[a] and de_cls[c] != de_cls[b]):
                    return [a, b, c]
            return [a, b]
        raise MarginmineError("scale corpus: could not find two pool pairs to join")


def _pick(seq: Sequence[T], rng: random.Random) -> T:
    """A uniform item of ``seq`` from one ``rng.random()`` (faster than ``rng.choice``)."""
    return seq[int(rng.random() * len(seq))]


def _join(texts: Sequence[str], parts: Sequence[int]) -> str:
    return " ".join([texts[i] for i in parts])


def _unit_id(pool: _Pool, parts: Sequence[int]) -> str:
    return "+".join([pool.ids[i] for i in parts])


# --------------------------------------------------------------------------------------------------
# components: one endless generator of candidate rows each (the build takes what it needs)


def _real(pairs: Sequence[DemoPair], count: int, rng: random.Random) -> Iterator[Row]:
    """``count`` of the real pairs (their own kind), a seeded sample in a seeded order."""
    for i in rng.sample(range(len(pairs)), count):
        p = pairs[i]
        yield p.en, p.de, p.id, p.origin, p.kind, None, None


def _clean_joined(pool: _Pool, joiner: _Joiner, rng: random.Random) -> Iterator[Row]:
    while True:
        parts = joiner.draw(rng)
        yield (_join(pool.en, parts), _join(pool.de, parts), "joined:" + _unit_id(pool, parts),
               pool.origin[parts[0]], "clean_joined", _join(pool.en_mf, parts), _join(pool.de_mf, parts))


def _similar(en_words: int, de_words: int) -> bool:
    """Word counts within MISALIGN_MAX_RATIO of each other (a length-based aligner's mistake)."""
    return max(en_words, de_words) <= MISALIGN_MAX_RATIO * min(en_words, de_words)


def _words(counts: Sequence[int], parts: Sequence[int]) -> int:
    return sum([counts[i] for i in parts])


def _misaligned(pool: _Pool, rng: random.Random, notes: Counter[str]) -> Iterator[Row]:
    n = len(pool.ids)
    while True:
        a = rng.randrange(n)
        b = _pick(pool.by_origin[pool.origin[a]], rng)
        if not _similar(pool.en_words[a], pool.de_words[b]):
            notes["redrawn_length_ratio"] += 1
            continue
        if b == a or pool.translates(a, b):
            notes["redrawn_true_translation"] += b != a
            continue
        yield (pool.en[a], pool.de[b], f"misaligned:{pool.ids[a]}~{pool.ids[b]}", pool.origin[a],
               "misaligned", pool.en_mf[a], pool.de_mf[b])


def _misaligned_joined(pool: _Pool, joiner: _Joiner, rng: random.Random,
                       notes: Counter[str]) -> Iterator[Row]:
    while True:
        src = joiner.draw(rng)
        en_words = _words(pool.en_words, src)
        for _ in range(20):
            tgt = joiner.draw(rng, pool.origin[src[0]])
            if _similar(en_words, _words(pool.de_words, tgt)):
                break
            notes["redrawn_length_ratio"] += 1
        else:
            continue
        if set(src) & set(tgt) or any(pool.translates(i, j) for i in src for j in tgt):
            notes["redrawn_true_translation"] += 1
            continue
        yield (_join(pool.en, src), _join(pool.de, tgt),
               f"misaligned_joined:{_unit_id(pool, src)}~{_unit_id(pool, tgt)}", pool.origin[src[0]],
               "misaligned_joined", _join(pool.en_mf, src), _join(pool.de_mf, tgt))


def _partial_joined(pool: _Pool, joiner: _Joiner, rng: random.Random, notes: Counter[str]) -> Iterator[Row]:
    while True:
        joined = joiner.draw(rng)
        a, b = joined[0], joined[1]
        en_words, group = pool.en_words[a] + pool.en_words[b], joiner.by_origin[pool.origin[a]]
        for _ in range(20):
            c = _pick(group, rng)
            if _similar(en_words, pool.de_words[a] + pool.de_words[c]):
                break
            notes["redrawn_length_ratio"] += 1
        else:
            continue
        if (c in (a, b) or pool.de_cls[c] in (pool.de_cls[a], pool.de_cls[b])
                or pool.translates(a, c) or pool.translates(b, c)):
            notes["redrawn_true_translation"] += 1
            continue
        src, tgt = ([a, b], [a, c]) if rng.random() < 0.5 else ([b, a], [c, a])
        yield (_join(pool.en, src), _join(pool.de, tgt),
               f"partial_joined:{_unit_id(pool, src)}~{_unit_id(pool, tgt)}", pool.origin[a],
               "partial_joined", _join(pool.en_mf, src), _join(pool.de_mf, tgt))


def _unit(pool: _Pool, joiner: _Joiner, rng: random.Random, singles: Sequence[int]) -> list[int]:
    """One pool pair (from ``singles``) or a join (UNIT_JOINED_SHARE of the time)."""
    if rng.random() < UNIT_JOINED_SHARE:
        return joiner.draw(rng)
    return [_pick(singles, rng)]


def _truncated(pool: _Pool, joiner: _Joiner, rng: random.Random) -> Iterator[Row]:
    lo, hi = SCALE_TRUNCATE_KEEP_PERCENT
    singles = range(len(pool.ids))
    while True:
        parts = _unit(pool, joiner, rng, singles)
        en, de = _join(pool.en, parts), _join(pool.de, parts)
        side = "de" if rng.random() < 0.5 else "en"
        words = len((de if side == "de" else en).split())
        if words < TRUNCATE_MIN_WORDS:
            continue
        keep = rng.randint((lo * words + 99) // 100, hi * words // 100)
        pid, origin = f"truncated:{side}@{keep}:{_unit_id(pool, parts)}", pool.origin[parts[0]]
        if side == "de":
            yield en, truncate_words(de, keep), pid, origin, "truncated", _join(pool.en_mf, parts), None
        else:
            yield truncate_words(en, keep), de, pid, origin, "truncated", None, _join(pool.de_mf, parts)


def _wrong_language(pool: _Pool, captions: _Joiner, french: Mapping[str, str],
                    wiki: Sequence[tuple[str, str]], rng: random.Random) -> Iterator[Row]:
    fr = [french[i] if i in french else "" for i in pool.ids]
    singles = captions.indices
    while True:
        if rng.random() < 0.5:
            parts = _unit(pool, captions, rng, singles)
            yield (_join(pool.en, parts), _join(fr, parts), f"wrong_language:fr:{_unit_id(pool, parts)}",
                   ORIGIN_M30K, "wrong_language", _join(pool.en_mf, parts), None)
        else:
            (ia, a), (ib, b) = _pick(wiki, rng), _pick(wiki, rng)
            ma, mb = match_form(a), match_form(b)
            if ma != mb:
                yield a, b, f"wrong_language:en:{ia}~{ib}", ORIGIN_WIKI, "wrong_language", ma, mb


def _untranslated_copy(pool: _Pool, joiner: _Joiner, rng: random.Random) -> Iterator[Row]:
    singles = range(len(pool.ids))
    while True:
        parts = _unit(pool, joiner, rng, singles)
        uid = _unit_id(pool, parts)
        if rng.random() < COPY_EN_SHARE:
            en, mf = _join(pool.en, parts), _join(pool.en_mf, parts)
            yield en, en, f"untranslated_copy:en:{uid}", pool.origin[parts[0]], "untranslated_copy", mf, mf
        else:
            de, mf = _join(pool.de, parts), _join(pool.de_mf, parts)
            yield de, de, f"untranslated_copy:de:{uid}", pool.origin[parts[0]], "untranslated_copy", mf, mf


def _boilerplate(hplt: Sequence[tuple[str, str]], gnad: Sequence[tuple[str, str]],
                 rng: random.Random) -> Iterator[Row]:
    origin = f"{ORIGIN_WIKI}+{ORIGIN_GNAD}"
    while True:
        (ie, e), (ig, g) = _pick(hplt, rng), _pick(gnad, rng)
        yield e, g, f"boilerplate:{ie}~{ig}", origin, "boilerplate", None, None


class Window:
    """The last ``size`` non-copy rows written (a ring), for the copy components."""

    def __init__(self, size: int):
        self.rows: list[Row] = []
        self.size = size
        self.next = 0

    def add(self, row: Row) -> None:
        if len(self.rows) < self.size:
            self.rows.append(row)
        else:
            self.rows[self.next] = row
            self.next = (self.next + 1) % self.size


def _duplicate(window: Window, rng: random.Random) -> Iterator[Row]:
    while True:
        en, de, pid, origin, _, men, mde = _pick(window.rows, rng)
        yield en, de, f"duplicate:{pid}", origin, "duplicate", men, mde


def _near_duplicate(window: Window, rng: random.Random) -> Iterator[Row]:
    while True:
        en, de, pid, origin, _, men, mde = _pick(window.rows, rng)
        side = rng.randrange(3)  # 0: English, 1: German, 2: both
        if side != 1:
            en, men = whitespace_variant(en, rng), None
        if side != 0:
            de, mde = whitespace_variant(de, rng), None
        yield en, de, f"near_duplicate:{pid}", origin, "near_duplicate", men, mde


# --------------------------------------------------------------------------------------------------
# all of them


def component_generators(inputs: DemoInputs, paracrawl: Sequence[DemoPair], mlqe_mt: Sequence[DemoPair],
                         counts: Mapping[str, int], notes: Counter[str],
                         window: Window) -> dict[str, Iterator[Row]]:
    """The generator of each component (every name of :data:`~marginmine.data.scalecorpus.COMPONENTS`),
    each with its own ``component_rng(seed, "scale:<component>")``; the real components yield
    ``counts[name]`` pairs, the others are endless. ``notes`` counts redraws, ``window`` is the copies'."""
    seed = inputs.seed
    pool = _Pool(inputs.clean_pool)
    joiner = pool.joiner(range(len(pool.ids)))
    captions = pool.joiner([i for i, pid in enumerate(pool.ids) if pid in inputs.captions_fr])

    def rng(name: str) -> random.Random:
        return component_rng(seed, f"scale:{name}")

    return {
        "clean": _real(inputs.clean_pool, counts["clean"], rng("clean")),
        "paracrawl": _real(paracrawl, counts["paracrawl"], rng("paracrawl")),
        "machine_translated": _real(mlqe_mt, counts["machine_translated"], rng("machine_translated")),
        "clean_joined": _clean_joined(pool, joiner, rng("clean_joined")),
        "misaligned": _misaligned(pool, rng("misaligned"), notes),
        "partial_joined": _partial_joined(pool, joiner, rng("partial_joined"), notes),
        "truncated": _truncated(pool, joiner, rng("truncated")),
        "wrong_language": _wrong_language(pool, captions, inputs.captions_fr, inputs.wiki,
                                          rng("wrong_language")),
        "untranslated_copy": _untranslated_copy(pool, joiner, rng("untranslated_copy")),
        "boilerplate": _boilerplate(inputs.hplt, inputs.gnad, rng("boilerplate")),
        "duplicate": _duplicate(window, rng("duplicate")),
        "near_duplicate": _near_duplicate(window, rng("near_duplicate")),
        "misaligned_joined": _misaligned_joined(pool, joiner, rng("misaligned_joined"), notes),
    }
