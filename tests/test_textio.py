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


def test_the_fast_path_reads_what_the_checks_read(tmp_path: Path, real_data: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """read_tsv takes lines without a byte that needs a repair or check past a shortcut; every
    pair and every note is the same as when all lines go through the checks (made-up lines full of
    defects, and real ParaCrawl lines)."""
    import random
    import re

    import marginmine.io.text as text

    pieces = [b"a", b"Z", b" ", b"  ", b"\t", b"\r", b"\x00", b"\x01", b"\x0b", b"\x1c", b"\x1f", b"\x7f",
              b"\xc3\xbc", b"\xe2\x82\xac", b"\xc2\x85", b"\xc2\x9f", b"\xc2\xa0", b"\xe2\x80\xa8", b"\xe2\x80\xa9",
              b"\xe3\x80\x80", b"\xff", b"\xc3", b"\xf0\x9f\x98\x80", b"x" * 30, b"y" * 45, b"z" * 130]
    rng = random.Random(5)
    lines = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(5000)]
    made_up = write(tmp_path / "made_up.tsv", b"\n".join(lines) + b"\n")
    paracrawl = real_data / "paracrawl-human-eval-en-de" / "paracrawl-v3-validation-data.sorted.en-de.tsv"

    def read(path: Path, columns: tuple[int, int]) -> tuple[list, ReadStats]:
        stats = ReadStats()
        pairs = [(p.line, p.src, p.tgt, p.extra, p.defect) for p in read_tsv(path, columns, 40, stats)]
        return pairs, stats

    fast = [read(made_up, (0, 1)), read(made_up, (1, 0)), read(made_up, (0, 2)), read(paracrawl, (2, 3))]
    monkeypatch.setattr(text, "_SUSPECT_BYTES", re.compile(b""))  # every line through the checks
    slow = [read(made_up, (0, 1)), read(made_up, (1, 0)), read(made_up, (0, 2)), read(paracrawl, (2, 3))]
    for (f_pairs, f_stats), (s_pairs, s_stats) in zip(fast, slow):
        assert f_pairs == s_pairs and f_stats.notes == s_stats.notes
    assert {p[4] for p in fast[0][0]} >= {None, "invalid_utf8", "control_chars", "empty", "too_long", "missing_column"}
