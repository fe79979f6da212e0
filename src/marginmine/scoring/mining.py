"""Mining mode: parallel sentences out of two monolingual text files.

Both files are reduced to their distinct non-empty sentences, embedded, searched against each
other in both directions (k nearest neighbours), and the candidates are chosen by the retrieval
mode and margin (see :mod:`marginmine.search.margin`). Mined pairs then pass the preprocessing's checks
(language id, length, copies/token overlap, length ratio) and an optional score threshold, with
every removal counted in a ledger. The output is a TSV sorted by descending score:
``src, tgt, score, src_line, tgt_line`` (1-based line of each sentence's first occurrence).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from marginmine.encoders.base import SentenceEncoder
from marginmine.errors import InputError
from marginmine.io.text import format_tsv_line, iter_sentences, open_text_out
from marginmine.preprocess.filters import Candidate, apply_filters
from marginmine.preprocess.ledger import Ledger, length_bucket
from marginmine.preprocess.pipeline import PreprocessSettings
from marginmine.search.knn import IndexSpec
from marginmine.search.margin import EXACT, Mined, neighbourhoods, retrieve, unique_groups

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sentences:
    """The distinct non-empty sentences of a file and the 1-based line of each one's first occurrence."""

    texts: list[str]
    lines: np.ndarray
    read: int

    @classmethod
    def read_file(cls, path: str | Path) -> "Sentences":
        all_lines = list(iter_sentences(path))
        if not all_lines:
            raise InputError(str(path), "is empty: nothing to mine", hint="give a file with one sentence per line")
        keys = [t.strip() for t in all_lines]
        first, _ = unique_groups(keys)
        first = first[[bool(keys[i]) for i in first]]
        return cls([keys[i] for i in first], first + 1, len(all_lines))


def embed_unique(encoder: SentenceEncoder, texts: Sequence[str], lang: str, chunk: int = 50_000) -> np.ndarray:
    out = np.empty((len(texts), encoder.dim), dtype=np.float16)
    for a in range(0, len(texts), chunk):
        out[a:a + chunk] = encoder.encode(list(texts[a:a + chunk]), lang)
        log.info("embedded %d/%d %s sentences", min(a + chunk, len(texts)), len(texts), lang)
    return out


def mine_arrays(x: np.ndarray, y: np.ndarray, k: int, margin: str, retrieval: str,
                spec: IndexSpec = EXACT) -> Mined:
    """Candidates between unique source rows ``x`` and unique target rows ``y``."""
    return retrieve(neighbourhoods(x, y, k, spec), margin, retrieval)


def check_pairs(mined: Mined, src: Sentences, tgt: Sentences, settings: PreprocessSettings | None,
                threshold: float | None, chunk: int = 10_000) -> tuple[np.ndarray, Ledger]:
    """Which mined pairs survive the threshold and the preprocessing's checks; the ledger counts
    each removal once (threshold first, then the filters in preprocessing order)."""
    ledger = Ledger()
    filters = settings.filters() if settings else []
    ledger.declare(["threshold", *(f.name for f in filters)])
    keep = np.zeros(len(mined), bool)
    alive = []
    for n, (i, s) in enumerate(zip(mined.src.tolist(), mined.score.tolist())):
        if threshold is not None and s < threshold:
            ledger.add_removed("threshold", "below_threshold", length_bucket(src.texts[i]))
        else:
            alive.append(n)
    for a in range(0, len(alive), chunk):
        part = alive[a:a + chunk]
        cands = [Candidate(src.texts[mined.src[n]], tgt.texts[mined.tgt[n]], settings.src_lang, settings.tgt_lang)
                 for n in part] if settings else []
        verdicts = apply_filters(filters, cands) if settings else [None] * len(part)
        for n, verdict in zip(part, verdicts):
            bucket = length_bucket(src.texts[mined.src[n]])
            if verdict is None:
                keep[n] = True
                ledger.add_kept(bucket)
            else:
                ledger.add_removed(verdict[0], verdict[1], bucket)
    ledger.check()
    return keep, ledger


def write_mined(path: str | Path, mined: Mined, keep: np.ndarray, src: Sentences, tgt: Sentences) -> int:
    n = 0
    with open_text_out(path) as out:
        for i, j, s in zip(mined.src[keep].tolist(), mined.tgt[keep].tolist(), mined.score[keep].tolist()):
            out.write(format_tsv_line([src.texts[i], tgt.texts[j], f"{s:.6f}", str(src.lines[i]), str(tgt.lines[j])]))
            n += 1
    return n
