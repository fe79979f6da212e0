"""The demo corpus' noise kinds: one small pure function per kind (lists in, lists out, the rng passed
in), each deriving noisy pairs from real sentences. Used by :mod:`.democorpus`."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import TypeVar

from marginmine.data.demo_sources import (
    NBSP,
    ORIGIN_GNAD,
    ORIGIN_WIKI,
    TRUNCATE_KEEP_PERCENT,
    TRUNCATE_MIN_WORDS,
    DemoPair,
    sample_items,
)
from marginmine.preprocess.normalize import match_form

T = TypeVar("T")


# --------------------------------------------------------------------------------------------------
# noise kinds: pure functions (lists in, lists out, rng passed in)


def make_misaligned(pool: Sequence[DemoPair], n: int, rng: random.Random) -> tuple[list[DemoPair], int]:
    """English of clean pair i with German of clean pair j != i, j from the same origin.

    ``n`` pairs are drawn, grouped by origin, and the German sides are rotated by a random cyclic
    permutation (Sattolo), a derangement. Pairs where either side of i equals that of j (match_form,
    e.g. two translations of one Tatoeba sentence) would be correct translations and are skipped;
    the second value is how many.
    """
    chosen = sample_items(pool, n, rng)
    groups: dict[str, list[DemoPair]] = {}
    for p in chosen:
        groups.setdefault(p.origin, []).append(p)
    out: list[DemoPair] = []
    skipped = 0
    for origin in sorted(groups):
        group = groups[origin]
        if len(group) < 2:
            skipped += len(group)
            continue
        perm = list(range(len(group)))
        for i in range(len(perm) - 1, 0, -1):  # Sattolo: one cycle, so perm[i] != i
            j = rng.randrange(i)
            perm[i], perm[j] = perm[j], perm[i]
        for i, j in enumerate(perm):
            a, b = group[i], group[j]
            if match_form(a.en) == match_form(b.en) or match_form(a.de) == match_form(b.de):
                skipped += 1
                continue
            out.append(DemoPair(f"misaligned:{a.id}~{b.id}", a.en, b.de, origin, "misaligned"))
    return out, skipped


def make_wrong_language_fr(captions: Sequence[tuple[DemoPair, str]], n: int,
                           rng: random.Random) -> list[DemoPair]:
    """English caption with its real French translation in place of the German (Multi30k fr)."""
    return [DemoPair(f"wrong_language:fr:{p.id}", p.en, fr, p.origin, "wrong_language")
            for p, fr in sample_items(captions, n, rng)]


def make_wrong_language_en(sentences: Sequence[tuple[str, str]], n: int,
                           rng: random.Random) -> list[DemoPair]:
    """Two different real English sentences ``(id, text)`` as a pair (English on the German side)."""
    chosen = sample_items(sentences, 2 * n, rng)
    out = []
    for (ia, a), (ib, b) in zip(chosen[0::2], chosen[1::2]):
        if match_form(a) != match_form(b):
            out.append(DemoPair(f"wrong_language:en:{ia}~{ib}", a, b, ORIGIN_WIKI, "wrong_language"))
    return out


def make_untranslated_copies(pool: Sequence[DemoPair], n_en: int, n_de: int,
                             rng: random.Random) -> list[DemoPair]:
    """English copied to the German side (``n_en``) and German copied to the English side (``n_de``)."""
    chosen = sample_items(pool, n_en + n_de, rng)
    out = [DemoPair(f"untranslated_copy:en:{p.id}", p.en, p.en, p.origin, "untranslated_copy")
           for p in chosen[:n_en]]
    out += [DemoPair(f"untranslated_copy:de:{p.id}", p.de, p.de, p.origin, "untranslated_copy")
            for p in chosen[n_en:]]
    return out


def truncate_words(text: str, keep: int) -> str:
    """The first ``keep`` words (at least 1, always fewer than all), joined by single spaces."""
    words = text.split()
    return " ".join(words[:min(len(words) - 1, max(1, keep))])


def make_truncated(pool: Sequence[DemoPair], n: int, rng: random.Random,
                   min_words: int = TRUNCATE_MIN_WORDS) -> list[DemoPair]:
    """A clean pair whose German keeps only its first 30-60% of words (German of >= min_words words).

    The number of kept words is drawn uniformly from the integers k with 30% <= k/words <= 60%.
    """
    lo_pct, hi_pct = TRUNCATE_KEEP_PERCENT
    candidates = [p for p in pool if len(p.de.split()) >= min_words]
    out = []
    for p in sample_items(candidates, n, rng):
        words = len(p.de.split())
        keep = rng.randint((lo_pct * words + 99) // 100, hi_pct * words // 100)
        out.append(DemoPair(f"truncated:{p.id}", p.en, truncate_words(p.de, keep), p.origin, "truncated"))
    return out


def make_boilerplate(en_lines: Sequence[tuple[str, str]], de_lines: Sequence[tuple[str, str]], n: int,
                     rng: random.Random) -> list[DemoPair]:
    """Short English web lines (in order of preference) paired with random short German news lines.

    ``en_lines``/``de_lines`` are ``(id, text)``; the first ``n`` English lines are used (the caller
    puts the lowest HPLT quality scores first), each with a distinct random German line.
    """
    en = list(en_lines[:n])
    de = sample_items(de_lines, len(en), rng)
    return [DemoPair(f"boilerplate:{ie}~{ig}", e, g, f"{ORIGIN_WIKI}+{ORIGIN_GNAD}", "boilerplate")
            for (ie, e), (ig, g) in zip(en, de)]


def make_duplicates(pool: Sequence[DemoPair], n: int, rng: random.Random) -> list[DemoPair]:
    """Exact copies of random clean pairs."""
    return [DemoPair(f"duplicate:{p.id}", p.en, p.de, p.origin, "duplicate")
            for p in sample_items(pool, n, rng)]


def whitespace_variant(text: str, rng: random.Random) -> str:
    """``text`` with its whitespace changed (double space, non-breaking space or trailing space).

    The result differs from ``text`` but has the same ``match_form``.
    """
    spaces = [m.start() for m in re.finditer(" ", text)]
    choice = rng.randrange(3) if spaces else 2
    if choice == 0:
        i = rng.choice(spaces)
        return text[:i] + "  " + text[i + 1:]
    if choice == 1:
        i = rng.choice(spaces)
        return text[:i] + NBSP + text[i + 1:]
    return text + rng.choice((" ", NBSP, "  "))


def make_near_duplicates(pool: Sequence[DemoPair], n: int, rng: random.Random) -> list[DemoPair]:
    """Copies of random clean pairs that differ only in whitespace (one or both sides changed)."""
    out = []
    for p in sample_items(pool, n, rng):
        side = rng.randrange(3)  # 0: English, 1: German, 2: both
        en = whitespace_variant(p.en, rng) if side != 1 else p.en
        de = whitespace_variant(p.de, rng) if side != 0 else p.de
        out.append(DemoPair(f"near_duplicate:{p.id}", en, de, p.origin, "near_duplicate"))
    return out


