"""Encoder training data: the configured parallel sources, cleaned and checked against leakage.

Every pair of every source is either written to the training files or counted as removed:
input defects, a side that occurs in a protected set (dev/test sets, the intrinsic-evaluation
sets) or in the corpus the encoder will score. The manifest (``manifest.json``) lists the
training directions for :func:`marginmine.encoders.base.read_training_data`; ``report.json`` holds the
counts. :func:`sample_pairs` writes one language pair's training pairs (all, or a seeded sample) as a
TSV: the translators' training data and the fitted scorers' positives.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from marginmine.defaults import SEED
from marginmine.errors import InputError, MarginmineError
from marginmine.io.safe import write_text
from marginmine.io.text import (
    ReadStats,
    count_lines,
    format_tsv_line,
    iter_raw_lines,
    open_binary,
    open_text_out,
    read_aligned,
)
from marginmine.preprocess.leakage import protected_index, protected_keys
from marginmine.preprocess.normalize import clean_text, sentence_key
from marginmine.preprocess.pipeline import InputSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingSource:
    """One configured source: a TSV (columns) or two aligned files, and its language pair."""

    name: str
    src_lang: str
    tgt_lang: str
    files: tuple[str, ...]
    columns: tuple[int, int] = (0, 1)
    detokenize: str | None = None    # "moses": undo Moses tokenization (and its &apos; escapes)


DETOKENIZERS = ("moses",)


def detokenizer(kind: str | None, lang: str) -> Callable[[str], str]:
    """A function from a tokenized line to running text (the identity for ``None``)."""
    if kind is None:
        return lambda text: text
    if kind != "moses":
        raise ValueError(f"unknown detokenizer {kind!r} (known: {', '.join(DETOKENIZERS)})")
    from marginmine.preprocess.tokens import detokenize

    return lambda text: detokenize(text, lang)


def tsv_keys(paths: Iterable[str | Path]) -> set[bytes]:
    """Sentence keys of both sides of corpus TSVs (to keep a scored corpus out of training)."""
    keys: set[bytes] = set()
    for p in paths:
        with open_binary(p) as fh:
            for raw, _ in iter_raw_lines(fh, 1 << 22, str(p)):
                cols = raw.decode("utf-8", errors="replace").split("\t")
                keys.update(sentence_key(c) for c in cols[:2])
    return keys


def prepare(sources: Sequence[TrainingSource], outdir: str | Path, protect: Sequence[str | Path],
            exclude_corpora: Sequence[str | Path] = (), *, exclude_files: Sequence[str | Path] = (),
            protected_is_error: bool = False) -> dict[str, Any]:
    """Write ``outdir/<name>.<lang>`` files, ``manifest.json`` and ``report.json``; return the report.

    A pair with a side in ``protect`` (or in the corpus TSVs ``exclude_corpora``, or in the plain
    text files ``exclude_files``) is removed and counted as ``leakage``; with ``protected_is_error``
    a side in ``protect`` is an :class:`InputError` naming the source file, its line and the
    protected file instead (held-out pairs that must be disjoint from every evaluation set)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    index = protected_index(protect)
    banned = set(index)
    n_protected = len(banned)
    banned |= tsv_keys(exclude_corpora)
    n_corpus = len(banned) - n_protected
    banned |= protected_keys(exclude_files)
    manifest, report = [], {"protected_sentences": n_protected, "excluded_corpus_sentences": n_corpus,
                            "excluded_other_sentences": len(banned) - n_protected - n_corpus, "sources": {}}
    for s in sources:
        counts: Counter[str] = Counter()
        stats = ReadStats()
        fs, ft = out / f"{s.name}.{s.src_lang}", out / f"{s.name}.{s.tgt_lang}"
        det_src, det_tgt = detokenizer(s.detokenize, s.src_lang), detokenizer(s.detokenize, s.tgt_lang)
        with open_text_out(fs) as hs, open_text_out(ft) as ht:
            for p in InputSpec(s.files, s.columns).open(10_000, stats):
                counts["in"] += 1
                if p.defect:
                    counts[p.defect] += 1
                    continue
                a, b = clean_text(det_src(p.src)), clean_text(det_tgt(p.tgt))
                ka, kb = sentence_key(a), sentence_key(b)
                if ka in banned or kb in banned:
                    if protected_is_error and (ka in index or kb in index):
                        side = 0 if ka in index else 1
                        raise InputError(s.files[min(side, len(s.files) - 1)],
                                         f"this pair's {(s.src_lang, s.tgt_lang)[side]} side occurs in the "
                                         f"evaluation set {index[(ka, kb)[side]]}", line=p.line,
                                         hint="held-out pairs must be disjoint from every dev/test, intrinsic and "
                                              "mining set: remove the line or choose other held-out pairs")
                    counts["leakage"] += 1
                    continue
                hs.write(a + "\n")
                ht.write(b + "\n")
                counts["kept"] += 1
        report["sources"][s.name] = {"files": list(s.files), **dict(counts), "notes": dict(stats.notes)}
        manifest.append({"name": s.name, "src_lang": s.src_lang, "tgt_lang": s.tgt_lang,
                         "src": fs.name, "tgt": ft.name, "pairs": counts["kept"]})
        log.info("%s: %d of %d pairs kept (%s)", s.name, counts["kept"], counts["in"],
                 ", ".join(f"{k} {v}" for k, v in counts.items() if k not in ("in", "kept")) or "none removed")
    write_text(out / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    write_text(out / "report.json", json.dumps(report, indent=1) + "\n")
    return report


def sample_pairs(manifest: str | Path, src_lang: str, tgt_lang: str, output: str | Path,
                 report: str | Path | None = None, *, max_pairs: int = 0, seed: int = SEED,
                 purpose: str = "to sample") -> dict[str, Any]:
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
        raise InputError(str(path), f"lists no {src_lang}-{tgt_lang} pairs {purpose}",
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
