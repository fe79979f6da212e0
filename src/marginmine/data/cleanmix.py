"""The clean-mix dev and test sets: held-out pairs of every clean origin of a labelled corpus, in the
proportions the corpus holds them.

Why. A test set drawn from one clean origin rewards the selection method that prefers that origin
(the demo measured it: the ratio margin keeps Tatoeba-like pairs, cosine keeps Multi30k captions,
and the two orders reverse between the two in-domain test sets). A test set that mixes the origins
in the corpus' own proportions favours no method's domain; it is the demo's headline test.

Contract
--------
* :func:`hold_out` takes the clean pool *before* the corpus is built from it and returns, per split
  (e.g. ``dev``, ``test``), ``size`` pairs whose origin counts are the largest-remainder
  apportionment (:func:`quotas`) of ``size`` over the pool's origin counts.
* Within and across splits no sentence repeats: a pair is held out only when neither of its sides
  (:func:`marginmine.preprocess.normalize.sentence_key`) is a side of a pair held out before.
* The rest of the pool loses every pair that shares a side with a held-out pair (returned count), so
  the corpus built from it never holds a held-out sentence; the caller also adds the held-out keys
  to its final guard (noise built from other sources could coincide with one), and the workflow's
  overlap check re-checks the preprocessed corpus against the written files.
* Deterministic: one ``random.Random`` passed in; origins are visited in sorted order, pairs in a
  seeded shuffle of each origin; the held-out pairs keep their pool order.
* Refused with :class:`~marginmine.errors.MarginmineError`: a size below 1, a total larger than the
  pool (the message names both numbers), an origin that runs out of pairs with unused sentences.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from marginmine.errors import MarginmineError
from marginmine.preprocess.normalize import sentence_key


class _Pair(Protocol):
    @property
    def en(self) -> str: ...

    @property
    def de(self) -> str: ...

    @property
    def origin(self) -> str: ...


P = TypeVar("P", bound=_Pair)


def quotas(counts: Mapping[str, int], size: int) -> dict[str, int]:
    """``size`` apportioned over ``counts`` by largest remainder (ties: larger count, then name)."""
    total = sum(counts.values())
    if size < 0 or total <= 0:
        raise MarginmineError(f"cannot apportion {size} pairs over {total} pairs")
    exact = {k: size * c / total for k, c in counts.items()}
    out = {k: int(v) for k, v in exact.items()}
    left = size - sum(out.values())
    order = sorted(counts, key=lambda k: (-(exact[k] - out[k]), -counts[k], k))
    for k in order[:left]:
        out[k] += 1
    return out


def _keys(p: _Pair) -> tuple[bytes, bytes]:
    return sentence_key(p.en), sentence_key(p.de)


def hold_out(pool: Sequence[P], sizes: Mapping[str, int], rng: random.Random
             ) -> tuple[dict[str, list[P]], list[P], int, frozenset[bytes]]:
    """Hold out ``sizes[split]`` pairs per split; return (splits, rest of the pool, pairs dropped from
    the rest for sharing a side with a held-out pair, the held-out sentence keys)."""
    for split, size in sizes.items():
        if int(size) < 1:
            raise MarginmineError(f"clean-mix {split} size must be at least 1 (got {size})")
    total = sum(int(s) for s in sizes.values())
    if total > len(pool):
        raise MarginmineError(f"clean-mix size {total} ({', '.join(f'{k} {v}' for k, v in sizes.items())}) is "
                              f"larger than the held-out pool ({len(pool)} clean pairs); lower "
                              "corpus.source.heldout or raise the corpus scale")
    by_origin: dict[str, list[int]] = {}
    for i, p in enumerate(pool):
        by_origin.setdefault(p.origin, []).append(i)
    counts = Counter({o: len(ix) for o, ix in by_origin.items()})
    order = {o: rng.sample(ix, len(ix)) for o, ix in sorted(by_origin.items())}
    cursor = dict.fromkeys(order, 0)
    used: set[bytes] = set()
    taken: dict[str, list[int]] = {}
    for split, size in sizes.items():
        picked: list[int] = []
        for origin, want in sorted(quotas(counts, int(size)).items()):
            got = 0
            ix = order[origin]
            while got < want:
                if cursor[origin] >= len(ix):
                    raise MarginmineError(f"clean-mix {split}: origin {origin} has no more pairs with unused "
                                          f"sentences ({got} of {want} found); lower corpus.source.heldout")
                i = ix[cursor[origin]]
                cursor[origin] += 1
                ks, kt = _keys(pool[i])
                if ks in used or kt in used or ks == kt:
                    continue
                used.update((ks, kt))
                picked.append(i)
                got += 1
        taken[split] = sorted(picked)
    held = {i for ix in taken.values() for i in ix}
    rest = [p for i, p in enumerate(pool) if i not in held and not (set(_keys(p)) & used)]
    dropped = len(pool) - len(held) - len(rest)
    return {s: [pool[i] for i in ix] for s, ix in taken.items()}, rest, dropped, frozenset(used)


def origin_lines(origins: Sequence[str]) -> dict[str, list[int]]:
    """0-based line numbers of each origin in a held-out set (its labels file, in line order)."""
    out: dict[str, list[int]] = {}
    for i, o in enumerate(origins):
        out.setdefault(o, []).append(i)
    return dict(sorted(out.items()))
