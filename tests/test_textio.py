"""Bad input: every defect is an error naming file and line, or a counted, documented handling."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from marginmine.errors import InputError
from marginmine.io.text import ReadStats, read_parallel, read_tsv


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_tsv_defects_are_flagged_and_counted(tmp_path: Path) -> None:
    lines = [
        b"Hello world.\tHallo Welt.\tid1",
        b"bad \xff byte\tkaputt\tid2",
        b"nul\x00here\tnull\tid3",
        b"crlf line\tCRLF Zeile\tid4\r",
        b"\tleer\tid5",
        b"only one column",
        b"x" * 120_000 + b"\ty",
        b"sep\xe2\x80\xa8inside\tTrenner\tid8",
        b"last\tletzte\tid9",
    ]
    f = write(tmp_path / "in.tsv", b"\n".join(lines) + b"\n")
    stats = ReadStats()
    pairs = list(read_tsv(f, stats=stats))
    assert [p.line for p in pairs] == list(range(1, 10))
    assert [p.defect for p in pairs] == [None, "invalid_utf8", "control_chars", None, "empty",
                                         "missing_column", "too_long", None, None]
    assert pairs[0].extra == ("id1",)
    assert pairs[3].extra == ("id4",) and pairs[3].src == "crlf line"
    assert pairs[7].src == "sep inside"
    assert stats.notes["crlf"] == 1 and stats.notes["line_separator"] == 1


def test_parallel_files_tabs_and_gzip(tmp_path: Path) -> None:
    src = tmp_path / "a.en.gz"
    with gzip.open(src, "wb") as fh:
        fh.write(b"one\ttab\nsecond line\n")
    tgt = write(tmp_path / "a.de", b"eins\nzweite Zeile\n")
    stats = ReadStats()
    pairs = list(read_parallel(src, tgt, stats=stats))
    assert [(p.src, p.tgt) for p in pairs] == [("one tab", "eins"), ("second line", "zweite Zeile")]
    assert stats.notes["tab_in_field"] == 1


def test_mismatched_line_counts_name_both_files_and_line(tmp_path: Path) -> None:
    src = write(tmp_path / "x.en", b"a\nb\nc\n")
    tgt = write(tmp_path / "x.de", b"a\nb\n")
    with pytest.raises(InputError) as err:
        list(read_parallel(src, tgt))
    msg = str(err.value)
    assert "x.en:3" in msg and "x.de" in msg and "line-aligned" in msg


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.tsv", b"")
    with pytest.raises(InputError, match="empty.tsv: corpus is empty"):
        list(read_tsv(empty))
    with pytest.raises(InputError, match="nope.tsv: file not found"):
        list(read_tsv(tmp_path / "nope.tsv"))


def test_truncated_gzip_is_a_clear_error(tmp_path: Path) -> None:
    good = gzip.compress(b"a\tb\n" * 10_000)
    f = write(tmp_path / "cut.tsv.gz", good[: len(good) // 2])
    with pytest.raises(InputError, match="cut.tsv.gz: cannot read"):
        list(read_tsv(f))


def test_very_long_line_does_not_shift_alignment(tmp_path: Path) -> None:
    src = write(tmp_path / "l.en", b"short\n" + b"w " * 200_000 + b"\nafter\n")
    tgt = write(tmp_path / "l.de", b"kurz\nlang\ndanach\n")
    pairs = list(read_parallel(src, tgt, max_chars=1000))
    assert [p.defect for p in pairs] == [None, "too_long", None]
    assert (pairs[2].src, pairs[2].tgt) == ("after", "danach")
