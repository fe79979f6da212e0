"""The scale corpus: a large noisy English-German corpus (5M pairs by default) built offline and
deterministically from the real data in ``data_dir``, to run the workflow at 100k, 1M and 5M pairs.

Every side of every pair is a real sentence, a few real sentences joined with a space (as a crawl's
sentence splitter leaves them), a word-boundary cut of one, or a whitespace-changed copy of one.
Nothing is invented. The sources are the demo corpus' (:mod:`marginmine.data.democorpus`): its clean
pool, ParaCrawl and MLQE-PE pairs and monolingual lines, read by
:func:`~marginmine.data.democorpus.load_demo_inputs` with the demo's seed rule, scale 1.0 and the
demo's clean-mix held-out sizes (:data:`HELDOUT`), so the pool and the held-out dev/test sets are
exactly the demo's for the same seed (``make demo``'s with the default seed): no corpus side is a
sentence of them.

Components (``pairs`` times the share; shares in :data:`COMPONENT_PPM`, parts per million, the same
at every size, so a 100k corpus is a small version of the 5M one):

================== ======= =================================================================================
component          ppm     pairs (kind; ``clean`` = 1 only where said)
================== ======= =================================================================================
clean                12000 real clean pairs of the pool (kind ``clean``, clean = 1)
paracrawl              390 real ParaCrawl v3 pairs (kind ``paracrawl_<label>``, clean = 1 for ``V``)
machine_translated     880 real NMT output of MLQE-PE (the demo's 4,500 segments)
clean_joined         50000 2 (a quarter of the time 3) clean pairs of one origin joined on both sides: true
                           translations (clean = 1)
misaligned          100000 English of clean pair a with German of clean pair b of a's origin (*)
partial_joined      250000 ``x_a x_b`` with ``y_a y_c`` (half aligned; the aligned half first or last) (*)
truncated            80000 a clean or joined pair with one side cut to 55-85% of its words (>= 5 words)
wrong_language       20000 a caption (or two joined) with its French; or two English Wikipedia sentences
untranslated_copy    15000 a clean or joined pair's English (7 in 10) or German copied to both sides
boilerplate          15000 a short HPLT web line (menus, link lists) with a random short German news line
duplicate            20000 an exact copy of one of the last :data:`COPY_WINDOW` non-copy pairs, any kind
near_duplicate       20000 such a copy with its whitespace changed on one or both sides
misaligned_joined     rest 2-3 joined English sentences with 2-3 joined unrelated German ones, one origin (*)
================== ======= =================================================================================

(*) the two sides' word counts are within :data:`MISALIGN_MAX_RATIO` of each other, as a length-based
sentence aligner's mistakes are (and as the workflow's length-ratio filter lets through).

At 5M: 60,000 clean + 250,000 joined + ~1,000 ParaCrawl ``V`` = ~311,000 planted true translations.
Joined parts are clean pairs of the same origin (a crawled page is one site) with at most
:data:`JOIN_PART_MAX_WORDS` words a side, a joined side at most :data:`JOIN_MAX_WORDS` words, so
joined pairs stay within the workflow's 80 tokens. A derived noise pair is never a true translation:
a recombination that puts an English sentence beside one of its pool translations (Tatoeba has
several per sentence) is drawn again. The real components are capped by what the pool holds after
the guard; a shortfall of ``clean`` goes to ``clean_joined`` (the planted share stays), any other to
the rest. The workflow's preprocessing is meant to remove under a tenth (the copies, the other
language, copied sides, some boilerplate and cuts): the rest are the hard cases. ``distinct.
pairs_normalised`` in the summary is what its dedup step keeps.

Streaming build: the component of each corpus line comes from one seeded shuffle of component labels
(a ``bytearray``); each component draws its pairs from its own generator and its own
``component_rng(seed, "scale:<component>")``; copies draw from a window of recent pairs. No list of
5M pair objects is ever held: memory is the pool plus a 64-bit digest per id (uniqueness) and 16
bytes per side (distinct counts). A line whose id was used before is drawn again (counted as
``redrawn_id_taken``; also when two ids share a 64-bit digest, odds ~1e-6 at 5M). Pool sentences'
match forms are computed once; a joined side's is the join of its parts' (NFKC never composes across
the joining space; tested), so most lines need no normalisation of their own.

Test-set hygiene, as in the demo: the pool is guarded (protected sets, the encoder's Tatoeba share,
the clean-mix held-out sentences); ParaCrawl and MLQE MT pairs are guarded before the build (drops
in ``dropped.input``); and every corpus line is checked again (:meth:`Guard.reason_keys`), a hit
drawn again and counted per reason in ``dropped.stream``.

Outputs of :func:`build_scale_corpus` (the demo's formats):

* ``out_tsv``: ``en<TAB>de<TAB>id`` lines, no header (gzip if the name ends ``.gz``);
* ``labels_tsv``: header ``id<TAB>origin<TAB>kind<TAB>clean``, one row per corpus line, same order;
* ``labels_tsv.with_suffix(".summary.json")``: the returned summary: seed, pairs, total, clean,
  noise share, counts per kind, origin and component (with its ppm; the real pairs available),
  distinct sentences per side
  (exact text and :func:`~marginmine.preprocess.normalize.sentence_key`) and distinct normalised
  pairs, dropped pairs per reason, redraw notes, the held-out sets;
* with ``heldout_prefix``: the held-out sets as ``<prefix>.<split>.{en,de,labels.tsv}``.

Ids are stable and name what a pair is made of: ``m30k-train:12`` (clean), ``paracrawl:1999``,
``mlqe-mt:test21:4``, ``joined:m30k-train:12+m30k-train:77``, ``misaligned:a~b``,
``misaligned_joined:a+b~c+d``, ``partial_joined:a+b~a+c``, ``truncated:de@7:<unit>`` (side cut to 7
words; a unit is a pool id or ``a+b``), ``wrong_language:fr:<unit>``,
``wrong_language:en:wiki:3~wiki:9``, ``untranslated_copy:en:<unit>``,
``boilerplate:hplt:5~gnad:7``, ``duplicate:<id>``, ``near_duplicate:<id>``. They are unique
(checked).

Determinism: the same data, seed and pairs give byte-identical files; iteration never depends on set
order or ``hash()``.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from marginmine.data.demo_noise import truncate_words, whitespace_variant
from marginmine.data.demo_sources import (KIND_CLEAN, ORIGIN_GNAD, ORIGIN_M30K, ORIGIN_WIKI,
                                          PARACRAWL_CLEAN_LABEL, PARACRAWL_PREFIX, TRUNCATE_MIN_WORDS,
                                          DemoPair, apply_guard, component_rng, guard_reasons)
from marginmine.data.democorpus import DemoInputs, load_demo_inputs, write_heldout
from marginmine.defaults import SCALE_PAIRS, SEED
from marginmine.errors import MarginmineError
from marginmine.io.text import LABEL_COLUMNS, open_text_out
from marginmine.preprocess.normalize import match_form

# --------------------------------------------------------------------------------------------------
# constants

#: the sizes the project runs (the default is :data:`marginmine.defaults.SCALE_PAIRS`)
SIZES = (100_000, 1_000_000, 5_000_000)
#: below this some components would be empty
MIN_PAIRS = 10_000

#: the clean-mix held-out sets the demo carves out (config/demo.yaml corpus.source.heldout)
HELDOUT: dict[str, int] = {"dev": 1000, "test": 2000}

#: share of each component in parts per million of ``pairs``; REST_COMPONENT gets what is left
COMPONENT_PPM: dict[str, int] = {
    "clean": 12_000,
    "paracrawl": 390,
    "machine_translated": 880,
    "clean_joined": 50_000,
    "misaligned": 100_000,
    "partial_joined": 250_000,
    "truncated": 80_000,
    "wrong_language": 20_000,
    "untranslated_copy": 15_000,
    "boilerplate": 15_000,
    "duplicate": 20_000,
    "near_duplicate": 20_000,
}
REST_COMPONENT = "misaligned_joined"
COMPONENTS: tuple[str, ...] = (*COMPONENT_PPM, REST_COMPONENT)
#: components that copy an earlier pair (never the first line; never copied themselves)
COPY_COMPONENTS = ("duplicate", "near_duplicate")
#: kinds whose pairs are true translations (clean = 1)
CLEAN_KINDS = frozenset({KIND_CLEAN, "clean_joined", PARACRAWL_PREFIX + PARACRAWL_CLEAN_LABEL})

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
#: copies draw from the last COPY_WINDOW non-copy pairs
COPY_WINDOW = 100_000
#: draws per line before the build gives up (a component whose pairs are all used or all guarded)
MAX_DRAWS = 1000

_MILLION = 1_000_000
#: corpus lines written (and counted for the progress log) at a time
_FLUSH = 10_000

T = TypeVar("T")

#: en, de, id, origin, kind, match_form(en), match_form(de): a match form is None where the build
#: computes it; a join's is the join of its parts' (NFKC never composes across the joining space)
Row = tuple[str, str, str, str, str, "str | None", "str | None"]


# --------------------------------------------------------------------------------------------------
# sizes


def component_counts(pairs: int, available: Mapping[str, int]) -> dict[str, int]:
    """Pairs per component (every name of :data:`COMPONENTS`), summing to ``pairs``.

    ``round(pairs * ppm / 1e6)`` for each share (half up); a component named in ``available`` is
    capped there, the shortfall of ``clean`` going to ``clean_joined`` and any other to the rest.
    """
    if pairs < MIN_PAIRS:
        raise MarginmineError(f"scale corpus: {pairs} pairs is below the minimum {MIN_PAIRS}")
    counts = {name: (ppm * pairs + _MILLION // 2) // _MILLION for name, ppm in COMPONENT_PPM.items()}
    for name, have in available.items():
        short = counts[name] - have
        if short > 0:
            counts[name] = have
            if name == "clean":
                counts["clean_joined"] += short
    counts[REST_COMPONENT] = pairs - sum(counts.values())
    if counts[REST_COMPONENT] < 0:
        raise MarginmineError(f"scale corpus: the component shares leave no room for {REST_COMPONENT}")
    return counts


def line_components(counts: Mapping[str, int], seed: int) -> bytearray:
    """The component (index into :data:`COMPONENTS`) of each corpus line: one seeded shuffle.

    A copy component never comes first (it needs an earlier pair): the first line is swapped with
    the first line of another component.
    """
    order = bytearray()
    for i, name in enumerate(COMPONENTS):
        order += bytes([i]) * counts[name]
    random.Random(f"{seed}:scale:order").shuffle(order)
    copies = {COMPONENTS.index(c) for c in COPY_COMPONENTS}
    if order and order[0] in copies:
        j = next((j for j, c in enumerate(order) if c not in copies), None)
        if j is None:
            raise MarginmineError("scale corpus: every line would copy an earlier one")
        order[0], order[j] = order[j], order[0]
    return order


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


class _Window:
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


def _duplicate(window: _Window, rng: random.Random) -> Iterator[Row]:
    while True:
        en, de, pid, origin, _, men, mde = _pick(window.rows, rng)
        yield en, de, f"duplicate:{pid}", origin, "duplicate", men, mde


def _near_duplicate(window: _Window, rng: random.Random) -> Iterator[Row]:
    while True:
        en, de, pid, origin, _, men, mde = _pick(window.rows, rng)
        side = rng.randrange(3)  # 0: English, 1: German, 2: both
        if side != 1:
            en, men = whitespace_variant(en, rng), None
        if side != 0:
            de, mde = whitespace_variant(de, rng), None
        yield en, de, f"near_duplicate:{pid}", origin, "near_duplicate", men, mde


# --------------------------------------------------------------------------------------------------
# the build


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _distinct(buf: bytearray) -> int:
    import numpy as np

    return int(np.unique(np.frombuffer(buf, dtype="V16")).size) if buf else 0


def build_scale_corpus(data_dir: Path, out_tsv: Path, labels_tsv: Path, *, pairs: int = SCALE_PAIRS,
                       seed: int = SEED, heldout: Mapping[str, int] | None = None,
                       heldout_prefix: Path | None = None) -> dict:
    """Build the scale corpus of ``pairs`` pairs and its labels; return (and write) the summary.

    ``heldout`` (split -> pairs; default :data:`HELDOUT`, the demo's) sizes the clean-mix sets carved
    out of the pool; they are written only with ``heldout_prefix``. Raises ``InputError`` for missing
    data and ``MarginmineError`` for a size below :data:`MIN_PAIRS` or a component that runs dry.
    """
    inputs = load_demo_inputs(data_dir, seed=seed, scale=1.0, heldout=HELDOUT if heldout is None else heldout)
    return write_scale_corpus(inputs, out_tsv, labels_tsv, pairs=pairs, heldout_prefix=heldout_prefix)


def write_scale_corpus(inputs: DemoInputs, out_tsv: Path, labels_tsv: Path, *, pairs: int = SCALE_PAIRS,
                       heldout_prefix: Path | None = None) -> dict:
    """The build from read inputs (:func:`load_demo_inputs` at scale 1.0 with held-out sets; its seed
    is the corpus' seed); ``inputs`` is not changed. :func:`build_scale_corpus` reads and calls this."""
    from marginmine.io.progress import Progress

    if inputs.scale != 1.0 or not inputs.held:
        raise MarginmineError("scale corpus: read the inputs at scale 1.0 with clean-mix held-out sets")
    seed = inputs.seed
    dropped_input = Counter(inputs.dropped_input)
    notes = Counter(inputs.notes)
    guard = inputs.guard
    paracrawl = apply_guard(inputs.paracrawl, guard.reason, dropped_input)
    mlqe_mt = apply_guard(inputs.mlqe_mt, guard.reason, dropped_input)
    available = {"clean": len(inputs.clean_pool), "paracrawl": len(paracrawl),
                 "machine_translated": len(mlqe_mt)}
    counts = component_counts(pairs, available)
    order = line_components(counts, seed)

    pool = _Pool(inputs.clean_pool)
    joiner = pool.joiner(range(len(pool.ids)))
    captions = pool.joiner([i for i, pid in enumerate(pool.ids) if pid in inputs.captions_fr])
    window = _Window(COPY_WINDOW)

    def rng(name: str) -> random.Random:
        return component_rng(seed, f"scale:{name}")

    gens: dict[str, Iterator[Row]] = {
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
        REST_COMPONENT: _misaligned_joined(pool, joiner, rng(REST_COMPONENT), notes),
    }
    by_index = [gens[name] for name in COMPONENTS]
    copy_index = {COMPONENTS.index(c) for c in COPY_COMPONENTS}

    n = len(order)
    keys = {name: bytearray(16 * n) for name in ("en_text", "en_key", "de_text", "de_key", "pair")}
    en_text, en_key, de_text, de_key, pair_keys = keys.values()
    seen_ids: set[int] = set()
    dropped_stream: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    origins: Counter[str] = Counter()
    clean_origins: Counter[str] = Counter()
    progress = Progress("scale corpus", total=n, every=30.0)
    blake2b = hashlib.blake2b

    out_lines: list[str] = []
    lab_lines: list[str] = []
    with open_text_out(out_tsv) as out, open_text_out(labels_tsv) as lab:
        lab.write("\t".join(LABEL_COLUMNS) + "\n")
        for line, c in enumerate(order):
            gen = by_index[c]
            for _ in range(MAX_DRAWS):
                try:
                    en, de, pid, origin, kind, men, mde = row = next(gen)
                except StopIteration:
                    raise MarginmineError(f"scale corpus: component {COMPONENTS[c]} ran out of pairs"
                                          ) from None
                if men is None:
                    men = match_form(en)
                if mde is None:
                    mde = match_form(de)
                ks = blake2b(men.encode("utf-8"), digest_size=16).digest()
                kt = blake2b(mde.encode("utf-8"), digest_size=16).digest()
                why = guard.reason_keys(ks, kt)
                if why is not None:
                    dropped_stream[why] += 1
                    continue
                h = int.from_bytes(blake2b(pid.encode("utf-8"), digest_size=8).digest(), "big")
                if h in seen_ids:
                    notes["redrawn_id_taken"] += 1
                    continue
                seen_ids.add(h)
                break
            else:
                raise MarginmineError(f"scale corpus: no new pair for component {COMPONENTS[c]} in "
                                      f"{MAX_DRAWS} draws (its pairs are used up or guarded)")
            at = 16 * line
            en_key[at:at + 16] = ks
            de_key[at:at + 16] = kt
            en_text[at:at + 16] = ks if men == en else _digest(en)
            de_text[at:at + 16] = kt if mde == de else _digest(de)
            pair_keys[at:at + 16] = blake2b(ks + kt, digest_size=16).digest()
            clean = kind in CLEAN_KINDS
            kinds[kind] += 1
            origins[origin] += 1
            if clean:
                clean_origins[origin] += 1
            if c not in copy_index:
                window.add(row if row[5] is not None and row[6] is not None
                           else (en, de, pid, origin, kind, men, mde))
            out_lines.append(f"{en}\t{de}\t{pid}\n")
            lab_lines.append(f"{pid}\t{origin}\t{kind}\t{int(clean)}\n")
            if len(out_lines) == _FLUSH:
                out.write("".join(out_lines))
                lab.write("".join(lab_lines))
                out_lines.clear()
                lab_lines.clear()
                progress.tick(_FLUSH)
        out.write("".join(out_lines))
        lab.write("".join(lab_lines))
        progress.tick(len(out_lines))
        progress.done()

    total = n
    clean = sum(clean_origins.values())
    summary = {
        "seed": seed,
        "pairs": pairs,
        "total": total,
        "clean": clean,
        "noise": total - clean,
        "noise_share": round((total - clean) / total, 6),
        "available": available,
        "components": {name: {"ppm": COMPONENT_PPM.get(name), "pairs": counts[name],
                              "share": round(counts[name] / total, 6)} for name in COMPONENTS},
        "kinds": dict(sorted(kinds.items())),
        "origins": dict(sorted(origins.items())),
        "clean_by_origin": dict(sorted(clean_origins.items())),
        "distinct": {
            "en": {"text": _distinct(en_text), "normalised": _distinct(en_key)},
            "de": {"text": _distinct(de_text), "normalised": _distinct(de_key)},
            "pairs_normalised": _distinct(pair_keys),
        },
        "dropped": {
            "input": {r: dropped_input.get(r, 0) for r in guard_reasons() + ["duplicate_input_pair"]},
            "stream": {r: dropped_stream.get(r, 0) for r in guard_reasons()},
        },
        "notes": dict(sorted(notes.items())),
        "heldout": {split: {"pairs": len(ps),
                            "by_origin": dict(sorted(Counter(p.origin for p in ps).items()))}
                    for split, ps in inputs.held.items()},
    }
    if heldout_prefix is not None:
        for split, ps in inputs.held.items():
            write_heldout(ps, Path(f"{heldout_prefix}.{split}"))
    with open_text_out(Path(labels_tsv).with_suffix(".summary.json")) as fh:
        fh.write(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return summary
