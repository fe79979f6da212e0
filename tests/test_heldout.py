"""Held-out dev/test slices of one larger test set (marginmine.data.heldout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from marginmine.data.heldout import distinct_pairs, slice_indices, write_slice
from marginmine.errors import InputError
from marginmine.preprocess.normalize import match_form


def test_distinct_pairs_skip_repeated_sides_and_empty_lines() -> None:
    src = ["a", "b", "a", "c", "", "d", "e"]
    tgt = ["A", "B", "A2", "B", "E", "D", ""]
    # 2: source "a" seen; 3: target "B" seen; 4 and 6: an empty side
    assert distinct_pairs(src, tgt) == [0, 1, 5]


def test_distinct_pairs_compare_match_forms() -> None:
    assert distinct_pairs(["x  y", "x y"], ["1", "2"]) == [0]


def test_slices_of_one_seed_are_disjoint_sorted_and_deterministic() -> None:
    distinct = list(range(0, 300, 3))
    dev = slice_indices(distinct, 0, 40, seed=7)
    test = slice_indices(distinct, 40, 60, seed=7)
    assert len(dev) == 40 and len(test) == 60
    assert dev == sorted(dev) and test == sorted(test)
    assert not set(dev) & set(test)
    assert set(dev) | set(test) == set(distinct)
    assert slice_indices(distinct, 0, 40, seed=7) == dev
    assert slice_indices(distinct, 0, 40, seed=8) != dev


def test_slice_larger_than_the_set_is_refused() -> None:
    with pytest.raises(ValueError, match="needs 11 distinct pairs, the set has 10"):
        slice_indices(list(range(10)), 5, 6, seed=1)
    with pytest.raises(ValueError):
        slice_indices(list(range(10)), 0, 0, seed=1)


def test_write_slice_names_the_file_on_misaligned_sides(tmp_path: Path) -> None:
    (tmp_path / "s").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "t").write_text("A\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"/t: has 1 lines but .*/s has 2"):
        write_slice(tmp_path / "s", tmp_path / "t", 0, 1, 1, tmp_path / "o.s", tmp_path / "o.t")


def test_write_slice_too_large_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "s").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "t").write_text("A\nB\n", encoding="utf-8")
    with pytest.raises(InputError, match="lower start/size"):
        write_slice(tmp_path / "s", tmp_path / "t", 1, 2, 1, tmp_path / "o.s", tmp_path / "o.t")


def test_demo_dev_and_test_slices_of_real_tatoeba_share_no_sentence(real_data: Path, tmp_path: Path) -> None:
    stem = real_data / "tatoeba-opus-deu-eng" / "tatoeba-test-v2021-08-07"
    src, tgt = stem.with_suffix(".eng"), stem.with_suffix(".deu")
    counts = write_slice(src, tgt, 0, 1000, 1, tmp_path / "dev.en", tmp_path / "dev.de")
    assert counts["lines"] == 17565 and counts["written"] == 1000
    assert counts["distinct"] < counts["lines"]  # Tatoeba repeats sentences with other translations
    write_slice(src, tgt, 1000, 2000, 1, tmp_path / "test.en", tmp_path / "test.de")

    def sides(name: str) -> tuple[list[str], list[str]]:
        return ([match_form(x) for x in (tmp_path / f"{name}.en").read_text(encoding="utf-8").splitlines()],
                [match_form(x) for x in (tmp_path / f"{name}.de").read_text(encoding="utf-8").splitlines()])

    dev_en, dev_de = sides("dev")
    test_en, test_de = sides("test")
    assert len(test_en) == len(test_de) == 2000
    assert not set(dev_en) & set(test_en) and not set(dev_de) & set(test_de)
    assert len(set(test_en)) == 2000 and len(set(test_de)) == 2000
    # every written pair is a real line pair of the file
    lines = set(zip(src.read_text(encoding="utf-8").splitlines(), tgt.read_text(encoding="utf-8").splitlines()))
    assert all(p in lines for p in zip((tmp_path / "test.en").read_text(encoding="utf-8").splitlines(),
                                       (tmp_path / "test.de").read_text(encoding="utf-8").splitlines()))
