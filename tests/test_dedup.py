"""Exact dedup: first occurrence kept, normalisation-aware, same answer in RAM and spilled to disk."""

from __future__ import annotations

import random

import numpy as np

from marginmine.preprocess.dedup import DuplicateFinder, _to_records, first_occurrence_dups
from marginmine.preprocess.normalize import pair_key


def brute_force(keys: list[bytes]) -> np.ndarray:
    seen: set[bytes] = set()
    out = np.zeros(len(keys), dtype=np.uint8)
    for i, k in enumerate(keys):
        if k in seen:
            out[i] = 1
        seen.add(k)
    return out


def test_normalised_duplicates() -> None:
    keys = [pair_key("Hello  world.", "Hallo Welt."), pair_key("Hello world. ", "Hallo\u00a0Welt."),
            pair_key("hello world.", "Hallo Welt."), pair_key("Hello world.", "Hallo Welt.")]
    finder = DuplicateFinder()
    finder.add_many(keys)
    assert finder.mask().tolist() == [0, 1, 0, 1]


def test_spilled_equals_in_memory_equals_brute_force(tmp_path) -> None:
    rng = random.Random(7)
    keys = [pair_key(str(rng.randrange(60_000)), "x") for _ in range(300_000)]
    expected = brute_force(keys)
    small = DuplicateFinder(mem_budget_bytes=1 << 20, workdir=tmp_path)  # forces spilling
    small.add_many(keys)
    spilled = small.mask(tmp_path / "mask.npy")
    big = DuplicateFinder(mem_budget_bytes=1 << 30)
    big.add_many(keys)
    assert small._parts and not big._parts
    assert np.array_equal(spilled, expected)
    assert np.array_equal(big.mask(), expected)
    assert not list(tmp_path.glob("mm-dedup-*"))  # spill files cleaned up


def test_first_occurrence_is_kept_whatever_the_order() -> None:
    keys = [b"b" * 16, b"a" * 16, b"b" * 16, b"a" * 16, b"c" * 16]
    rec = _to_records(keys, 0)
    assert sorted(first_occurrence_dups(rec[::-1]).tolist()) == [2, 3]


def test_fast_path_normalisation_equals_full_normalisation() -> None:
    import re
    import unicodedata

    from marginmine.preprocess.normalize import clean_text, match_form

    ws = re.compile(r"\s+")
    for t in ["a  b", " a", "a\tb", "\ufb01 x", "a\u00a0b", "plain text.", "a\nb", "a\x1cb", "a\x0bb", "x ", "",
              "Caf\u0065\u0301", "ok"]:
        assert clean_text(t) == ws.sub(" ", unicodedata.normalize("NFC", t)).strip(), repr(t)
        assert match_form(t) == ws.sub(" ", unicodedata.normalize("NFKC", t)).strip(), repr(t)


def test_the_normal_forms_shortcut_changes_nothing() -> None:
    """clean_text and match_form return a text that needs no change as it is; on made-up strings of
    whitespace, decomposed, compatibility and full-width characters they give exactly the full
    normalise-collapse-strip."""
    import random
    import re
    import unicodedata

    from marginmine.preprocess.normalize import clean_text, match_form

    ws = re.compile(r"\s+")
    pieces = ["a", "x", " ", "  ", "\t", "\xa0", "\u3000", "\u2028", "\u2009", "ü", "u\u0308", "e", "\u0301", "Å",
              "\u212b", "ﬁ", "Ａ", "€", "Ω", "²"]
    rng = random.Random(11)
    for _ in range(50_000):
        t = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        assert clean_text(t) == ws.sub(" ", unicodedata.normalize("NFC", t)).strip(), repr(t)
        assert match_form(t) == ws.sub(" ", unicodedata.normalize("NFKC", t)).strip(), repr(t)
