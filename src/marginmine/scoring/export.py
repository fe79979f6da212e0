"""A selection in the formats filtered corpora travel in.

``select`` writes ``src, tgt, score, carried columns`` (the corpus TSV's other columns, in order).
:func:`export_filtered` turns that back into

* a TSV with the corpus' own columns in their own order and the score appended as the last column
  (what bicleaner-ai writes: the input line plus one score; no header), and
* two line-aligned plain-text files, one sentence per line, for tools that read Moses-style pairs.

The text is the corpus text as preprocessing kept it (Unicode NFC, whitespace runs collapsed to one
space); every other column is carried through byte for byte. Output files appear only when
complete (gzip when they end in ``.gz``).
"""

from __future__ import annotations

from pathlib import Path

from marginmine.errors import InputError
from marginmine.io.progress import Progress
from marginmine.io.text import MAX_LINE_BYTES, format_tsv_line, iter_raw_lines, open_binary, open_text_out


def export_filtered(selection: str | Path, tsv: str | Path, src: str | Path, tgt: str | Path,
                    columns: tuple[int, int] = (0, 1)) -> int:
    """Write ``selection`` as ``tsv`` (corpus columns + score) and ``src``/``tgt``; returns the pair count.

    ``columns`` are the corpus TSV's 0-based source and target columns (the config's
    ``corpus.source.columns``; two aligned files are ``(0, 1)``)."""
    si, ti = columns
    if si == ti or min(si, ti) < 0:
        raise InputError(str(selection), f"source/target columns {columns} must be two different columns >= 0")
    n = 0
    prog = Progress(f"export {Path(selection).name}", unit="pairs")
    with open_binary(selection) as fh, open_text_out(tsv) as out, open_text_out(src) as out_s, \
            open_text_out(tgt) as out_t:
        for n, (raw, too_long) in enumerate(iter_raw_lines(fh, MAX_LINE_BYTES, str(selection)), 1):
            if too_long:
                raise InputError(str(selection), "line longer than 1 MiB", line=n)
            try:
                cols = raw.decode("utf-8").split("\t")
            except UnicodeDecodeError as exc:
                raise InputError(str(selection), f"invalid UTF-8 ({exc.reason})", line=n) from exc
            if len(cols) < 3:
                raise InputError(str(selection), f"{len(cols)} columns; a selection has src, tgt, score, ...",
                                 line=n, hint="pass a file written by `marginmine select`")
            s, t, score, extra = cols[0], cols[1], cols[2], cols[3:]
            width = len(extra) + 2
            if max(si, ti) >= width:
                raise InputError(str(selection), f"has {width} corpus columns; source/target columns {columns} "
                                 "do not fit", line=n, hint="give the corpus' --columns")
            row, rest = [], iter(extra)
            for i in range(width):
                row.append(s if i == si else t if i == ti else next(rest))
            out.write(format_tsv_line([*row, score]))
            out_s.write(s + "\n")
            out_t.write(t + "\n")
            if n % 100_000 == 0:
                prog.tick(100_000)
    prog.done()
    return n
