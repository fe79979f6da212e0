"""Test-set leakage: which sentences of a corpus occur in protected dev/test sets.

Sentences are compared in :func:`marginmine.preprocess.normalize.match_form` (NFKC, whitespace collapsed,
case kept) through their 16-byte keys, so the index of all protected sets stays small.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

from marginmine.errors import InputError
from marginmine.io.progress import Progress
from marginmine.io.text import iter_raw_lines, open_binary, read_lines
from marginmine.preprocess.normalize import sentence_key


def protected_index(files: Iterable[str | Path]) -> dict[bytes, str]:
    """sentence key -> ``folder/file`` of the first protected file that holds the sentence."""
    index: dict[bytes, str] = {}
    for path in map(Path, files):
        label = f"{path.parent.name}/{path.name}"
        for line in read_lines(path):
            if line.strip():
                index.setdefault(sentence_key(line), label)
    return index


def protected_keys(files: Iterable[str | Path]) -> frozenset[bytes]:
    """The keys of every sentence in the protected files."""
    return frozenset(protected_index(files))


def overlap_report(corpora: Sequence[str | Path], protected: Iterable[str | Path]) -> dict[str, Any]:
    """Count pairs of corpus TSVs (source, target, ...; .gz allowed) with a side in a protected file.

    Streams the corpora. Returns ``pairs``, ``overlapping_pairs``, ``src_hits``, ``tgt_hits``,
    ``by_file`` (overlapping pairs per protected file), up to 5 ``examples`` (file:line, id) and the
    ``protected_files`` checked.
    """
    protected = list(protected)
    index = protected_index(protected)
    pairs = overlapping = src_hits = tgt_hits = 0
    by_file: Counter[str] = Counter()
    examples: list[str] = []
    prog = Progress("overlap check")
    for tsv in corpora:
        with open_binary(tsv) as fh:
            for n, (raw, _) in enumerate(iter_raw_lines(fh, 1 << 22, str(tsv)), 1):
                cols = raw.decode("utf-8", errors="replace").split("\t")
                if len(cols) < 2:
                    raise InputError(str(tsv), "expected at least 2 tab-separated columns", line=n)
                pairs += 1
                prog.tick()
                hit_s, hit_t = index.get(sentence_key(cols[0])), index.get(sentence_key(cols[1]))
                src_hits += hit_s is not None
                tgt_hits += hit_t is not None
                hit = hit_s or hit_t
                if hit is not None:
                    overlapping += 1
                    by_file[hit] += 1
                    if len(examples) < 5:
                        examples.append(f"{tsv}:{n}" + (f" ({cols[2]})" if len(cols) > 2 else ""))
    prog.done()
    return {"pairs": pairs, "overlapping_pairs": overlapping, "src_hits": src_hits, "tgt_hits": tgt_hits,
            "by_file": dict(sorted(by_file.items())), "examples": examples,
            "protected_files": sorted(str(p) for p in protected)}
