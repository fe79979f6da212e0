"""Training data of the translators that translate-then-vote uses (:mod:`marginmine.scoring.votes`).

The translators are ordinary systems of our NMT stage (``train-nmt``), one per direction, trained
on the pairs of the encoder's training data in that language pair
(:mod:`marginmine.encoders.data`: already checked against every protected dev/test/evaluation
set and, with ``exclude_corpus``, against the corpus that will be scored; its ``report.json``
counts what was removed). The reverse direction is the same pairs with the columns swapped.
``max_pairs`` keeps a seeded uniform sample of that many pairs (file order kept; the same pairs for
both directions), recorded in the report as what was available and what was kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from marginmine.defaults import SEED
from marginmine.errors import InputError, MarginmineError
from marginmine.io.safe import write_text
from marginmine.io.text import count_lines, format_tsv_line, open_text_out, read_aligned


def translator_pairs(manifest: str | Path, src_lang: str, tgt_lang: str, output: str | Path,
                     report: str | Path | None = None, *, max_pairs: int = 0, seed: int = SEED) -> dict[str, Any]:
    """Write every ``src_lang``-``tgt_lang`` pair of the encoder data listed in ``manifest`` (either
    column order there) to the TSV ``output`` as ``source <tab> target``, or with ``max_pairs`` a
    uniform sample of that many (by ``seed``; the same rows whichever the direction); returns (and
    writes to ``report``) the pairs per data set (``sources``: available; with a sample, ``sample.kept``:
    written). Nothing is dropped unrecorded; a language pair with
    none is an error."""
    import numpy as np

    if max_pairs < 0:
        raise MarginmineError(f"max_pairs must be >= 0 (0 = all), got {max_pairs}")
    path = Path(manifest)
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(str(path), f"cannot read the encoder data manifest ({exc})",
                         hint="rerun the encoder_data step (marginmine encoder-data)") from exc
    chosen = [e for e in entries if {e["src_lang"], e["tgt_lang"]} == {src_lang, tgt_lang} and src_lang != tgt_lang]
    if not chosen:
        raise InputError(str(path), f"lists no {src_lang}-{tgt_lang} pairs to train a {src_lang}>{tgt_lang} translator",
                         hint="add data of that language pair to encoder.train")
    total = sum(count_lines(path.parent / e["src"]) for e in chosen)
    keep = None  # every row; else the sorted row numbers over all chosen entries, the same for both directions
    if max_pairs and max_pairs < total:
        keep = np.sort(np.random.default_rng(seed).choice(total, max_pairs, replace=False))
    counts: dict[str, int] = {}
    kept: dict[str, int] = {}
    row = written = 0
    with open_text_out(output) as out:
        for e in chosen:
            a, b = read_aligned(path.parent / e["src"], path.parent / e["tgt"])
            if e["src_lang"] != src_lang:
                a, b = b, a
            rows = range(len(a)) if keep is None else \
                keep[np.searchsorted(keep, row):np.searchsorted(keep, row + len(a))] - row
            for i in rows:
                out.write(format_tsv_line([a[i], b[i]]))
            counts[e["name"]] = len(a)
            kept[e["name"]] = len(rows)
            row += len(a)
            written += len(rows)
    if row != total:
        raise InputError(str(path), f"its {src_lang}-{tgt_lang} files hold {row} pairs, {total} when counted first",
                         hint="a file changed while it was read: rerun")
    result = {"src_lang": src_lang, "tgt_lang": tgt_lang, "pairs": written, "available": row,
              "sample": None if keep is None else {"max_pairs": max_pairs, "seed": seed, "kept": kept},
              "sources": counts, "manifest": str(path)}
    if report:
        write_text(report, json.dumps(result, indent=1) + "\n")
    return result
