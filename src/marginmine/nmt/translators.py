"""Training data of the translators that translate-then-vote uses (:mod:`marginmine.scoring.votes`).

The translators are ordinary systems of our NMT stage (``train-nmt``), one per direction, trained
on the pairs of the encoder's training data in that language pair
(:mod:`marginmine.encoders.data`: already checked against every protected dev/test/evaluation
set and, with ``exclude_corpus``, against the corpus that will be scored; its ``report.json``
counts what was removed). The reverse direction is the same pairs with the columns swapped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from marginmine.errors import InputError
from marginmine.io.safe import write_text
from marginmine.io.text import format_tsv_line, open_text_out, read_aligned


def translator_pairs(manifest: str | Path, src_lang: str, tgt_lang: str, output: str | Path,
                     report: str | Path | None = None) -> dict[str, Any]:
    """Write every ``src_lang``-``tgt_lang`` pair of the encoder data listed in ``manifest`` (either
    column order there) to the TSV ``output`` as ``source <tab> target``; returns (and writes to
    ``report``) the pairs per data set. No pair is dropped; a language pair with none is an error."""
    path = Path(manifest)
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(str(path), f"cannot read the encoder data manifest ({exc})",
                         hint="rerun the encoder_data step (marginmine encoder-data)") from exc
    counts: dict[str, int] = {}
    with open_text_out(output) as out:
        for e in entries:
            if {e["src_lang"], e["tgt_lang"]} != {src_lang, tgt_lang} or src_lang == tgt_lang:
                continue
            a, b = read_aligned(path.parent / e["src"], path.parent / e["tgt"])
            if e["src_lang"] != src_lang:
                a, b = b, a
            for s, t in zip(a, b):
                out.write(format_tsv_line([s, t]))
            counts[e["name"]] = len(a)
    if not counts:
        raise InputError(str(path), f"lists no {src_lang}-{tgt_lang} pairs to train a {src_lang}>{tgt_lang} translator",
                         hint="add data of that language pair to encoder.train")
    result = {"src_lang": src_lang, "tgt_lang": tgt_lang, "pairs": sum(counts.values()), "sources": counts,
              "manifest": str(path)}
    if report:
        write_text(report, json.dumps(result, indent=1) + "\n")
    return result
