"""Reading and writing parallel corpora, with every defect of the input named or counted.

Two input layouts are supported:

* a TSV file (optionally ``.gz``): source and target sentence in two columns (by default the
  first two; ParaCrawl/BiCleaner files use columns 3 and 4), further columns are carried through;
* two line-aligned plain-text files (``.src``/``.tgt``, optionally ``.gz``).

Lines are split on ``\\n`` only (binary reading), so a stray ``\\r`` or a Unicode line separator
inside a sentence never shifts the alignment. What the reader does with each kind of bad input:

========================  ====================================================================
input                     handling
========================  ====================================================================
missing / unreadable file ``InputError`` naming the file
empty corpus (0 lines)    ``InputError`` naming the file
different line counts     ``InputError`` naming both files and the first unmatched line
invalid UTF-8             pair rejected as ``invalid_utf8`` (bytes shown with U+FFFD)
NUL / control characters  pair rejected as ``control_chars``
empty or blank side       pair rejected as ``empty``
side longer than limit    pair rejected as ``too_long`` (default 10,000 characters), the line is
                          read in bounded pieces, never whole
fewer TSV columns         pair rejected as ``missing_column``
CRLF line ending          ``\\r`` removed, counted as note ``crlf``
tab in a side (2 files)   replaced by a space, counted as note ``tab_in_field``
line/paragraph separators replaced by a space, counted as note ``line_separator``
(``\\r``, U+2028, ...)
========================  ====================================================================
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterable, Iterator, Sequence

from marginmine.errors import InputError
from marginmine.io.safe import AtomicWriter

if TYPE_CHECKING:
    import numpy as np

#: characters that some readers treat as line breaks; replaced by a space inside a sentence
_LINE_SEPARATORS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: C0/C1 control characters other than tab and the separators above
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
#: the UTF-8 bytes of every character the two expressions above match (and of U+001F): a line
#: without them has nothing to repair or reject but invalid UTF-8, an empty side, a missing column
#: or a side too long (read_tsv's fast path checks those)
_SUSPECT_BYTES = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")

DEFAULT_MAX_CHARS = 10_000


@dataclass(slots=True)
class Pair:
    """One input pair. ``line`` is 1-based; ``defect`` names why it cannot be used, if so."""

    line: int
    src: str
    tgt: str
    extra: tuple[str, ...] = ()
    defect: str | None = None


@dataclass
class ReadStats:
    """Counts of repairs the reader made without dropping anything."""

    notes: Counter[str] = field(default_factory=Counter)


def open_binary(path: str | Path) -> IO[bytes]:
    """Open a plain or gzip file for binary reading, with a clear error if it is missing."""
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), "file not found", hint="check the path or the data_dir setting")
    if p.is_dir():
        raise InputError(str(p), "is a directory, expected a file")
    try:
        if p.suffix == ".gz":
            return gzip.open(p, "rb")
        return open(p, "rb")
    except OSError as exc:
        raise InputError(str(p), f"cannot open: {exc.strerror or exc}") from exc


def open_text_out(path: str | Path) -> AtomicWriter:
    """A UTF-8 text file for writing (gzip if it ends with ``.gz``, with a reproducible header);
    creates parent dirs. It appears under its name only when closed without an error
    (:class:`marginmine.io.safe.AtomicWriter`)."""
    return AtomicWriter(path)


def iter_raw_lines(fh: IO[bytes], max_bytes: int, path: str = "<input>") -> Iterator[tuple[bytes, bool]]:
    """Yield ``(line_without_newline, too_long)``; lines over ``max_bytes`` are skipped in pieces.

    Memory stays bounded by ``max_bytes`` however long a line is. A gzip stream cut short
    raises ``InputError`` instead of a bare ``EOFError``.
    """
    try:
        while True:
            chunk = fh.readline(max_bytes + 1)
            if not chunk:
                return
            if chunk.endswith(b"\n") or len(chunk) <= max_bytes:
                yield chunk.rstrip(b"\n"), False
                continue
            while chunk and not chunk.endswith(b"\n"):
                chunk = fh.readline(1 << 20)
            yield b"", True
    except (EOFError, gzip.BadGzipFile, OSError) as exc:
        raise InputError(path, f"cannot read (truncated or corrupt file?): {exc}",
                         hint="re-download or re-create the file") from exc


def clean_field(text: str, stats: ReadStats) -> tuple[str, str | None]:
    """Return ``(text, defect)``: separators become spaces (counted), controls are a defect."""
    if "\r" in text or _LINE_SEPARATORS.search(text):
        if text.endswith("\r") and not _LINE_SEPARATORS.search(text[:-1]):
            stats.notes["crlf"] += 1
            text = text[:-1]
        else:
            stats.notes["line_separator"] += 1
            text = _LINE_SEPARATORS.sub(" ", text)
    if _CONTROL.search(text):
        return text, "control_chars"
    if not text.strip():
        return text, "empty"
    return text, None


def _decode(raw: bytes) -> tuple[str, bool]:
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), False


def _make_pair(line: int, src_raw: bytes, tgt_raw: bytes, extra: tuple[str, ...],
               too_long: bool, stats: ReadStats) -> Pair:
    if too_long:
        return Pair(line, "", "", extra, "too_long")
    src, ok_s = _decode(src_raw)
    tgt, ok_t = _decode(tgt_raw)
    if not (ok_s and ok_t):
        return Pair(line, src, tgt, extra, "invalid_utf8")
    src, d_s = clean_field(src, stats)
    tgt, d_t = clean_field(tgt, stats)
    return Pair(line, src, tgt, extra, d_s or d_t)


def read_tsv(path: str | Path, columns: Sequence[int] = (0, 1), max_chars: int = DEFAULT_MAX_CHARS,
             stats: ReadStats | None = None) -> Iterator[Pair]:
    """Pairs from a TSV file; ``columns`` are the 0-based source/target columns.

    The remaining columns, in order, are carried through as ``Pair.extra``.
    """
    stats = stats if stats is not None else ReadStats()
    si, ti = columns
    need = max(si, ti)
    plain_columns = (si, ti) == (0, 1)
    suspect = _SUSPECT_BYTES.search
    n = 0
    with open_binary(path) as fh:
        for n, (raw, too_long) in enumerate(iter_raw_lines(fh, 4 * max_chars + 64, str(path)), 1):
            if not too_long and suspect(raw) is None:  # fast path: the common, clean line
                try:
                    cols = raw.decode("utf-8").split("\t")
                except UnicodeDecodeError:
                    cols = []
                if len(cols) > need:
                    src, tgt = cols[si], cols[ti]
                    if src and tgt and not src.isspace() and not tgt.isspace():
                        extra = (tuple(cols[2:]) if plain_columns
                                 else tuple(c for i, c in enumerate(cols) if i not in (si, ti)))
                        yield Pair(n, src, tgt, extra,
                                   "too_long" if len(src) > max_chars or len(tgt) > max_chars else None)
                        continue
            if raw.endswith(b"\r"):
                raw = raw[:-1]
                stats.notes["crlf"] += 1
            cols = raw.split(b"\t")
            if too_long:
                yield Pair(n, "", "", (), "too_long")
                continue
            if len(cols) <= max(si, ti):
                text, _ = _decode(raw)
                yield Pair(n, text, "", (), "missing_column")
                continue
            extra = tuple(_decode(c)[0] for i, c in enumerate(cols) if i not in (si, ti))
            pair = _make_pair(n, cols[si], cols[ti], extra, False, stats)
            if pair.defect is None and max(len(pair.src), len(pair.tgt)) > max_chars:
                pair.defect = "too_long"
            yield pair
    if n == 0:
        raise InputError(str(path), "corpus is empty (0 lines)", hint="check the file or its source")


def read_parallel(src_path: str | Path, tgt_path: str | Path, max_chars: int = DEFAULT_MAX_CHARS,
                  stats: ReadStats | None = None) -> Iterator[Pair]:
    """Pairs from two line-aligned files; different line counts are an error naming both files."""
    stats = stats if stats is not None else ReadStats()
    limit = 4 * max_chars + 64
    n = 0
    with open_binary(src_path) as fs, open_binary(tgt_path) as ft:
        it_s = iter_raw_lines(fs, limit, str(src_path))
        it_t = iter_raw_lines(ft, limit, str(tgt_path))
        while True:
            s = next(it_s, None)
            t = next(it_t, None)
            if s is None and t is None:
                break
            n += 1
            if s is None or t is None:
                short, long_ = (src_path, tgt_path) if s is None else (tgt_path, src_path)
                raise InputError(str(long_), f"has more lines than {short} ({short} ends after line {n - 1})",
                                 line=n, hint="the two sides must be line-aligned")
            for raw in (s[0], t[0]):
                if b"\t" in raw:
                    stats.notes["tab_in_field"] += 1
            pair = _make_pair(n, s[0].replace(b"\t", b" "), t[0].replace(b"\t", b" "), (),
                              s[1] or t[1], stats)
            if pair.defect is None and max(len(pair.src), len(pair.tgt)) > max_chars:
                pair.defect = "too_long"
            yield pair
    if n == 0:
        raise InputError(str(src_path), "corpus is empty (0 lines)", hint="check the file or its source")


def format_tsv_line(fields: Sequence[str]) -> str:
    """One TSV line; fields must not contain tabs or newlines (the reader guarantees it)."""
    return "\t".join(fields) + "\n"


def read_aligned(a: str | Path, b: str | Path,
                 hint: str = "the two sides must be line-aligned") -> tuple[list[str], list[str]]:
    """All lines of two small line-aligned files; different line counts are an error naming both."""
    xs, ys = read_lines(a), read_lines(b)
    if len(xs) != len(ys):
        raise InputError(str(b), f"has {len(ys)} lines but {a} has {len(xs)}", hint=hint)
    return xs, ys


def read_lines(path: str | Path) -> list[str]:
    """All lines of a small UTF-8 text file (gz allowed), without newlines; strict decoding."""
    with open_binary(path) as fh:
        out = []
        for n, raw in enumerate(fh, 1):
            try:
                out.append(raw.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError as exc:
                raise InputError(str(path), f"invalid UTF-8 ({exc.reason})", line=n) from exc
    return out


#: longest line a corpus reader accepts (preprocessing rejects longer ones)
MAX_LINE_BYTES = 1 << 20


def iter_sentences(path: str | Path, column: int | None = None, start: int = 0) -> Iterator[str]:
    """The one strict line reader of corpus-sized files: lines of ``path`` (plain or gzip), or their
    ``column``-th TSV field, from 0-based line ``start`` on. An over-long line, invalid UTF-8 or a
    missing column is an error naming the file and line; nothing is skipped."""
    with open_binary(path) as fh:
        for n, (raw, too_long) in enumerate(iter_raw_lines(fh, MAX_LINE_BYTES, str(path)), 1):
            if n <= start:
                continue
            if too_long:
                raise InputError(str(path), f"line longer than {MAX_LINE_BYTES} bytes", line=n,
                                 hint="preprocess the corpus first (it rejects over-long lines)")
            try:
                text = raw.decode("utf-8").rstrip("\r")
            except UnicodeDecodeError as exc:
                raise InputError(str(path), f"invalid UTF-8 ({exc.reason})", line=n,
                                 hint="preprocess the corpus first (it rejects such lines)") from exc
            if column is not None:
                cols = text.split("\t")
                if column >= len(cols):
                    raise InputError(str(path), f"has no column {column} (0-based)", line=n)
                text = cols[column]
            yield text


def count_lines(path: str | Path) -> int:
    with open_binary(path) as fh:
        return sum(1 for _ in iter_raw_lines(fh, MAX_LINE_BYTES, str(path)))


#: bytes of a sentence's digest (:func:`text_digests`): a collision among 10^9 distinct sentences
#: has a probability below 10^-20
DIGEST_BYTES = 16


def text_digests(texts: Iterable[str]) -> "np.ndarray":
    """Each text's BLAKE2b digest (``DIGEST_BYTES`` bytes, dtype ``S16``): the key that says which
    lines hold the same sentence (or which pair id is which), at 16 bytes a line instead of the text."""
    from hashlib import blake2b

    import numpy as np

    return np.array([blake2b(t.encode("utf-8"), digest_size=DIGEST_BYTES).digest() for t in texts],
                    dtype=f"S{DIGEST_BYTES}")


#: the pair-label sidecar's columns (the demo corpus and its held-out sets write it)
LABEL_COLUMNS = ("id", "origin", "kind", "clean")


def check_label_header(labels_tsv: str | Path, columns: Sequence[str]) -> None:
    """Refuse a label sidecar whose header ``columns`` lacks one of :data:`LABEL_COLUMNS`."""
    missing = set(LABEL_COLUMNS) - set(columns)
    if missing:
        raise InputError(str(labels_tsv), f"lacks the columns {sorted(missing)}",
                         hint="expected the demo corpus sidecar: id, origin, kind, clean")


def read_label_rows(labels_tsv: str | Path) -> list[dict[str, str]]:
    """A pair-label sidecar (``id, origin, kind, clean``, what the demo corpus build writes beside
    the corpus and each held-out set): one dict per pair (a corpus-sized sidecar:
    :class:`marginmine.io.labels.PairLabels`)."""
    import csv

    with open(labels_tsv, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        check_label_header(labels_tsv, reader.fieldnames or ())
        return list(reader)
