"""Held-out dev and test sets drawn from one larger parallel test set.

A config can take its dev and test sets as disjoint slices of the same file, e.g. the demo's
1,000-pair dev and 2,000-pair test from the 17,565-pair Tatoeba test v2021-08-07 (too large to decode
with beam 5 for every system on a CPU). The slice is ``[start, start + size)`` of one seeded shuffle
of the file's *distinct* pairs, so two slices with the same seed and non-overlapping ranges never
share a line, and - because a pair only counts when neither of its sides was seen before - never
share a source or a target sentence either (Tatoeba repeats sentences with alternative
translations). The chosen pairs keep their order in the file.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from marginmine.errors import InputError
from marginmine.io.text import open_text_out, read_aligned
from marginmine.preprocess.normalize import match_form


def distinct_pairs(src: Sequence[str], tgt: Sequence[str]) -> list[int]:
    """Indices of pairs with two non-empty sides, neither of which occurred in an earlier pair."""
    seen_src: set[str] = set()
    seen_tgt: set[str] = set()
    out = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        ks, kt = match_form(s), match_form(t)
        if ks and kt and ks not in seen_src and kt not in seen_tgt:
            out.append(i)
        if ks:
            seen_src.add(ks)
        if kt:
            seen_tgt.add(kt)
    return out


def slice_indices(distinct: Sequence[int], start: int, size: int, seed: int) -> list[int]:
    """Sorted indices of the slice ``[start, start + size)`` of a seeded shuffle of ``distinct``."""
    if start < 0 or size < 1:
        raise ValueError(f"need start >= 0 and size >= 1, got start={start} size={size}")
    order = list(distinct)
    if start + size > len(order):
        raise ValueError(f"the slice [{start}, {start + size}) needs {start + size} distinct pairs, "
                         f"the set has {len(order)}")
    random.Random(seed).shuffle(order)
    return sorted(order[start:start + size])


def write_slice(src_path: str | Path, tgt_path: str | Path, start: int, size: int, seed: int,
                out_src: str | Path, out_tgt: str | Path) -> dict[str, int]:
    """Write one slice as two line-aligned files; returns counts for the log."""
    src, tgt = read_aligned(src_path, tgt_path, hint="the two sides of a parallel test set must be line-aligned")
    distinct = distinct_pairs(src, tgt)
    try:
        idx = slice_indices(distinct, start, size, seed)
    except ValueError as exc:
        raise InputError(str(src_path), str(exc), hint="lower start/size in the config's sample") from exc
    with open_text_out(out_src) as fs, open_text_out(out_tgt) as ft:
        for i in idx:
            fs.write(src[i] + "\n")
            ft.write(tgt[i] + "\n")
    return {"lines": len(src), "distinct": len(distinct), "written": len(idx)}
