"""Encoder training data: the configured parallel sources, cleaned and checked against leakage.

Every pair of every source is either written to the training files or counted as removed:
input defects, a side that occurs in a protected set (dev/test sets, the intrinsic-evaluation
sets) or in the corpus the encoder will score. The manifest (``manifest.json``) lists the
training directions for :func:`marginmine.encoders.base.read_training_data`; ``report.json`` holds the
counts.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from marginmine.errors import InputError
from marginmine.preprocess.leakage import protected_index, protected_keys
from marginmine.preprocess.normalize import clean_text, sentence_key
from marginmine.preprocess.pipeline import InputSpec
from marginmine.io.text import ReadStats, iter_raw_lines, open_binary, open_text_out
from marginmine.io.safe import write_text

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
