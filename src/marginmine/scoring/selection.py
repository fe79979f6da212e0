"""Choosing pairs by score: top-N over many shards, a threshold, and the optimal threshold on gold.

Top-N works in two streaming passes over the per-shard score files, so memory holds N scores plus
one shard, never the corpus: pass 1 finds the N-th best score, pass 2 writes the pairs above it
(and, among pairs tied with it, the earliest ones until N are reached). Ties are therefore broken
by corpus order, and the selection is deterministic. The ``random`` method draws one seeded
uniform score per pair (the same on every run); ``unfiltered`` keeps every pair.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from marginmine.defaults import SEED as DEFAULT_SEED
from marginmine.errors import InputError, MarginmineError
from marginmine.io.progress import Progress
from marginmine.io.safe import write_text
from marginmine.io.text import format_tsv_line, open_text_out
from marginmine.scoring.files import read_scores

log = logging.getLogger(__name__)

def random_scores(n: int, seed: int, shard: int) -> np.ndarray:
    """The ``random`` method's scores for one shard: seeded per (seed, shard), so reproducible."""
    return np.random.default_rng([seed, shard]).random(n)


@dataclass(frozen=True)
class Source:
    """One shard: its pairs (TSV, src/tgt first) and its score file (``None`` for random/unfiltered)."""

    pairs: Path
    scores: Path | None


def _scores(i: int, src: Source, method: str, seed: int) -> np.ndarray:
    if src.scores is not None:
        return read_scores(src.scores, method)
    return random_scores(sum(1 for _ in _pair_lines(src.pairs)), seed, i)


def _pair_lines(path: Path) -> Iterator[str]:
    from marginmine.io.text import iter_sentences

    yield from iter_sentences(path)


class TopN:
    """The n largest values seen so far, fed one array at a time (memory: n + one array)."""

    def __init__(self, n: int):
        self.n, self.best, self.total = n, np.empty(0), 0

    def add(self, values: np.ndarray) -> None:
        self.total += len(values)
        merged = np.concatenate([self.best, np.asarray(values, np.float64)])
        self.best = merged if len(merged) <= self.n else -np.partition(-merged, self.n - 1)[:self.n]

    def threshold(self) -> tuple[float, int]:
        """``(t, above)``: the n-th largest value (``-inf`` if fewer were seen) and how many of the
        n best lie strictly above it."""
        if len(self.best) < self.n:
            return -np.inf, len(self.best)
        t = float(self.best.min())
        return t, int((self.best > t).sum())


@dataclass
class SelectionReport:
    method: str
    requested: int | None
    threshold: float | None
    selected: int
    total: int
    histogram: dict[str, list[float]]

    def write(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(self.__dict__, indent=1) + "\n")


def select(sources: Sequence[Source], output: str | Path, method: str, n: int | None = None,
           threshold: float | None = None, seed: int = DEFAULT_SEED,
           bins: int = 50) -> SelectionReport:
    """Write the selected pairs of all ``sources`` to ``output`` (TSV: src, tgt, score, the shard's
    further columns), in corpus order.

    ``method`` ``unfiltered`` keeps everything; otherwise ``n`` (top-N) or ``threshold`` (score >=
    threshold) chooses. Sources with a score file rank by its column named ``method``; sources without
    one get seeded random scores."""
    if method != "unfiltered" and (n is None) == (threshold is None):
        raise MarginmineError("give exactly one of a count N or a threshold")
    top = TopN(n or 1)
    lo, hi = np.inf, -np.inf
    prog = Progress(f"select {method}: pass 1 of 2 (scores)", total=len(sources), unit="shards")
    for i, src in enumerate(sources):  # pass 1: the N-th best score and the score range
        sc = _scores(i, src, method, seed)
        prog.tick()
        top.add(sc)
        if len(sc):
            lo, hi = min(lo, float(sc.min())), max(hi, float(sc.max()))
    if method == "unfiltered":
        t, ties_left = -np.inf, top.total
    elif n is not None:
        t, above = top.threshold()
        ties_left = n - above
    else:
        t, ties_left = float(threshold), top.total  # type: ignore[arg-type]
    edges = np.linspace(lo, hi, bins + 1) if np.isfinite(lo) and hi > lo else np.array([lo, lo + 1.0])
    counts = np.zeros(len(edges) - 1, np.int64)
    written = 0
    out_path = Path(output)
    part = out_path.with_name(out_path.name + ".part" + out_path.suffix)
    prog.done()
    prog = Progress(f"select {method}: pass 2 of 2 (pairs)", total=len(sources), unit="shards")
    with open_text_out(part) as out:
        for i, src in enumerate(sources):  # pass 2: write the selection
            sc = _scores(i, src, method, seed)
            prog.tick()
            counts += np.histogram(sc, bins=edges)[0]
            for line, value in zip_longest(_pair_lines(src.pairs), sc.tolist()):
                if line is None or value is None:
                    raise InputError(str(src.scores), f"has {len(sc)} scores, a different count from the "
                                     f"pairs in {src.pairs}", hint="re-run the scoring step for this shard")
                if value > t or (value == t and ties_left > 0):
                    if value == t and n is not None:
                        ties_left -= 1
                    cols = line.split("\t")
                    out.write(format_tsv_line([cols[0], cols[1], f"{value:.6f}", *cols[2:]]))
                    written += 1
    prog.done()
    part.replace(out_path)
    report = SelectionReport(method, n, None if method == "unfiltered" else float(t), written, top.total,
                             {"counts": counts.tolist(), "edges": [round(e, 6) for e in edges.tolist()]})
    log.info("%s: selected %d of %d pairs (threshold %s)", method, written, top.total, report.threshold)
    return report


@dataclass(frozen=True)
class PRF:
    threshold: float
    precision: float
    recall: float
    f1: float
    selected: int


def prf_of_counts(tp: np.ndarray, selected: np.ndarray, n_gold: "int | np.ndarray"
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F1 of ``tp`` correct among ``selected`` accepted pairs, ``n_gold`` gold
    pairs in all (arrays element by element; 0 where a denominator is 0)."""
    precision = np.where(selected > 0, tp / np.maximum(selected, 1), 0.0)
    recall = tp / np.maximum(n_gold, 1)
    f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300), 0.0)
    return precision, recall, f1


def optimal_threshold(scores: np.ndarray, correct: np.ndarray, n_gold: int) -> PRF:
    """The threshold (accept ``score >= t``) with the best F1, found with one sort.

    ``correct[i]`` says whether candidate i is a gold pair; ``n_gold`` counts all gold pairs,
    including those no candidate found (they limit recall). Ties in score are accepted together.
    """
    scores = np.asarray(scores, np.float64)
    correct = np.asarray(correct, bool)
    if len(scores) == 0:
        return PRF(np.inf, 0.0, 0.0, 0.0, 0)
    order = np.argsort(-scores, kind="stable")
    s, c = scores[order], correct[order]
    tp = np.cumsum(c)
    last_of_tie = np.r_[s[1:] != s[:-1], True]
    pos = np.flatnonzero(last_of_tie)
    p, r, f = prf_of_counts(tp[pos], pos + 1, n_gold)
    best = int(np.argmax(f))
    return PRF(float(s[pos[best]]), float(p[best]), float(r[best]), float(f[best]), int(pos[best] + 1))


def prf_at(scores: np.ndarray, correct: np.ndarray, n_gold: int, threshold: float) -> PRF:
    """Precision, recall and F1 of accepting ``score >= threshold``."""
    keep = np.asarray(scores, np.float64) >= threshold
    tp = int(np.asarray(correct, bool)[keep].sum())
    p, r, f = prf_of_counts(np.array([tp]), np.array([int(keep.sum())]), n_gold)
    return PRF(float(threshold), float(p[0]), float(r[0]), float(f[0]), int(keep.sum()))
