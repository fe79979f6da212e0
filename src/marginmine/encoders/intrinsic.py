"""Intrinsic evaluation of sentence encoders on gold parallel sets.

* Tatoeba (LASER v1 deu/fra/spa-eng, 1,000 pairs each): for every sentence, is its nearest
  neighbour on the other side its translation? Error rate in both directions.
* newstest2012 sentence-alignment recovery: shuffle one side, recover the alignment with nearest
  neighbours; error averaged over both directions (Table 1/3 of "Learning Bilingual Sentence
  Embeddings via Autoencoding and Computing Similarities with a Multilayer Perceptron").

Each with cosine (``absolute``) and with the ratio margin (k = 4), as in the paper.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from marginmine.defaults import SEED, K
from marginmine.encoders.base import SentenceEncoder
from marginmine.errors import InputError
from marginmine.io.items import items_path, write_items
from marginmine.io.safe import write_text
from marginmine.io.text import open_text_out, read_lines
from marginmine.search.margin import best_candidates

log = logging.getLogger(__name__)


def retrieval_wrong(x: np.ndarray, y: np.ndarray, margin: str = "absolute", k: int = K) -> np.ndarray:
    """Per row ``i`` of ``x``: is its best candidate in ``y`` not ``y[i]``?"""
    best, _ = best_candidates(x, y, k, margin)
    return np.asarray(best != np.arange(len(x)))


def retrieval_error(x: np.ndarray, y: np.ndarray, margin: str = "absolute", k: int = K) -> float:
    """Share of rows ``i`` of ``x`` whose best candidate in ``y`` is not ``y[i]``."""
    return float(np.mean(retrieval_wrong(x, y, margin, k)))


def shuffled_recovery_wrong(x: np.ndarray, y: np.ndarray, margin: str, k: int, seed: int) -> np.ndarray:
    """Shuffle ``y``, recover each ``x[i]``'s partner: per row, is it not the known one?"""
    perm = np.random.default_rng(seed).permutation(len(y))
    best, _ = best_candidates(x, y[perm], k, margin)
    return np.asarray(perm[best] != np.arange(len(x)))


def shuffled_recovery_error(x: np.ndarray, y: np.ndarray, margin: str, k: int, seed: int) -> float:
    """The share of :func:`shuffled_recovery_wrong`'s rows."""
    return float(np.mean(shuffled_recovery_wrong(x, y, margin, k, seed)))


@dataclass(frozen=True)
class GoldSet:
    name: str
    src_lang: str
    tgt_lang: str
    src: Path
    tgt: Path
    kind: str = "tatoeba"  # or "alignment"


def evaluate(encoder: SentenceEncoder, sets: Sequence[GoldSet], k: int = K, seed: int = SEED,
             margins: Sequence[str] = ("absolute", "ratio")) -> list[dict[str, object]]:
    """One row per (set, margin): error rates x->y, y->x and their average (in %). ``margins``:
    any of :data:`marginmine.search.margin.MARGINS` (the paper's table: cosine and ratio)."""
    rows: list[dict[str, object]] = []
    for g in sets:
        x, y = _embedded(encoder, g)
        for margin in margins:
            if g.kind == "alignment":
                w_xy = shuffled_recovery_wrong(x, y, margin, k, seed)
                w_yx = shuffled_recovery_wrong(y, x, margin, k, seed + 1)
            else:
                w_xy, w_yx = retrieval_wrong(x, y, margin, k), retrieval_wrong(y, x, margin, k)
            rows.append(_row(g, "cosine" if margin == "absolute" else margin, len(x), w_xy, w_yx))
    return rows


def _embedded(encoder: SentenceEncoder, g: GoldSet) -> tuple[np.ndarray, np.ndarray]:
    """Both sides of a gold set embedded (line-aligned files, else an error)."""
    xs, ys = read_lines(g.src), read_lines(g.tgt)
    if len(xs) != len(ys):
        raise ValueError(f"{g.src} and {g.tgt} differ in length ({len(xs)} vs {len(ys)})")
    return encoder.encode(xs, g.src_lang), encoder.encode(ys, g.tgt_lang)


def _row(g: GoldSet, margin: str, pairs: int, w_xy: np.ndarray, w_yx: np.ndarray) -> dict[str, object]:
    """The row of one set and margin: error rates (%) and, for the significance tests of
    :mod:`marginmine.evaluate.paired`, which sentences were wrong (a string of 0/1 per direction)."""
    e_xy, e_yx = float(np.mean(w_xy)), float(np.mean(w_yx))
    return {"set": g.name, "kind": g.kind, "margin": margin, "pairs": pairs, "err_src2tgt": 100 * e_xy,
            "err_tgt2src": 100 * e_yx, "err_avg": 100 * (e_xy + e_yx) / 2,
            "wrong_src2tgt": "".join("1" if w else "0" for w in w_xy.tolist()),
            "wrong_tgt2src": "".join("1" if w else "0" for w in w_yx.tolist())}


def matrix_wrong(sim: np.ndarray, kind: str, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence x -> y and y -> x: wrong when the row (column) takes another best partner by
    ``sim`` over all pairs (gold: row i with column i); alignment sets shuffle the candidates first,
    as :func:`shuffled_recovery_wrong` does."""
    n = len(sim)
    if kind != "alignment":
        return np.argmax(sim, axis=1) != np.arange(n), np.argmax(sim, axis=0) != np.arange(n)
    wrong = []
    for m, s in ((sim, seed), (sim.T, seed + 1)):
        perm = np.random.default_rng(s).permutation(n)
        wrong.append(perm[np.argmax(m[:, perm], axis=1)] != np.arange(n))
    return wrong[0], wrong[1]


def matrix_errors(sim: np.ndarray, kind: str, seed: int = SEED) -> tuple[float, float]:
    """The shares of :func:`matrix_wrong`'s sentences, x -> y and y -> x."""
    w_xy, w_yx = matrix_wrong(sim, kind, seed)
    return float(np.mean(w_xy)), float(np.mean(w_yx))


def evaluate_similarity(encoder: SentenceEncoder, sets: Sequence[GoldSet],
                        similarity: Callable[[np.ndarray, np.ndarray], np.ndarray],
                        src_lang: str, label: str = "similarity", seed: int = SEED) -> list[dict[str, object]]:
    """As :func:`evaluate`, with a learned similarity of every pair (``similarity(x, y)`` -> matrix,
    ``x`` in ``src_lang``: sets in the other orientation are read backwards) instead of a margin."""
    rows: list[dict[str, object]] = []
    for g in sets:
        x, y = _embedded(encoder, g)
        sim = similarity(x, y) if g.src_lang == src_lang else similarity(y, x).T
        rows.append(_row(g, label, len(x), *matrix_wrong(sim, g.kind, seed)))
    return rows


def vote_section(votes: Path) -> list[str]:
    """Markdown lines: translate-then-vote's candidate sets on the intrinsic sets (F1 and P / R, the
    ``intrinsic`` rows of ``marginmine vote-report``'s TSV), one row per rule."""
    rows = []
    for n, line in enumerate(votes.read_text(encoding="utf-8").splitlines(), 1):
        section, _, payload = line.partition("\t")
        if section == "intrinsic":
            try:
                rows.append(json.loads(payload))
            except json.JSONDecodeError as exc:
                raise InputError(str(votes), f"not a vote-report row ({exc})", line=n,
                                 hint="write it again with marginmine vote-report") from exc
    if not rows:
        raise InputError(str(votes), "holds no intrinsic rows", hint="give vote-report --set (the intrinsic sets)")
    sets = list(dict.fromkeys(r["set"] for r in rows))
    rules = list(dict.fromkeys(r["rule"] for r in rows))
    by = {(r["set"], r["rule"]): r for r in rows}
    lines = ["", f"## Translate-then-vote on the same sets ({votes.name})", "",
             "F1 of each candidate set against the gold alignment, precision / recall in brackets (higher is "
             "better; ratio margin, intersection, no threshold, all n x n pairs; orig = the original search, "
             "forward / backward = against a side's translation).", "",
             "| rule | " + " | ".join(f"{s} F1 (P / R)" for s in sets) + " |", "|---" * (len(sets) + 1) + "|"]
    for rule in rules:
        cells = [f"{100 * by[s, rule]['f1']:.1f} ({100 * by[s, rule]['precision']:.1f} / "
                 f"{100 * by[s, rule]['recall']:.1f})" if (s, rule) in by else "n/a" for s in sets]
        lines.append(f"| vote-{rule} | " + " | ".join(cells) + " |")
    return lines


def write_report(inputs: Sequence[Path], tsv: Path, md: Path, votes: Path | None = None) -> None:
    """One row per encoder x set x margin (TSV, with the sentences behind each in its items sidecar,
    :func:`marginmine.io.items.items_path`), and a Markdown table: encoder per row; with
    ``votes`` (a vote-report TSV) the votes' F1 on the intrinsic sets below it (Markdown only: F1 is
    not an error rate)."""
    from marginmine.io.safe import read_json

    results = [read_json(p, "an eval-encoder result", hint="rerun eval-encoder") for p in inputs]
    for p, res in zip(inputs, results):
        if any("wrong_src2tgt" not in r for r in res["rows"]):
            log.warning(
                "%s: written before each sentence's outcome was recorded: its rows get no items (no significance "
                "test); rerun its rule (snakemake -R eval_encoder published_eval_encoder ...) to test them", p)
    with open_text_out(tsv) as fh:
        fh.write("encoder\tset\tmargin\tpairs\terr_src2tgt\terr_tgt2src\terr_avg\ttrain_minutes\n")
        for res in results:
            minutes = res.get("info", {}).get("minutes", "")
            for r in res["rows"]:
                fh.write(f"{res['encoder']}\t{r['set']}\t{r['margin']}\t{r['pairs']}\t{r['err_src2tgt']:.2f}\t"
                         f"{r['err_tgt2src']:.2f}\t{r['err_avg']:.2f}\t{minutes}\n")
    write_items(items_path(tsv), ("encoder", "set", "margin", "direction", "item", "wrong"),
                ((res["encoder"], r["set"], r["margin"], d, i, w) for res in results for r in res["rows"]
                 for d in ("src2tgt", "tgt2src") for i, w in enumerate(r.get(f"wrong_{d}", ""))))
    sets = list(dict.fromkeys(r["set"] for res in results for r in res["rows"]))
    margins = list(dict.fromkeys(r["margin"] for res in results for r in res["rows"]))
    head = "| encoder | " + " | ".join(f"{s} err % ({' / '.join(margins)})" for s in sets) + " |"
    lines = [head, "|---" * (len(sets) + 1) + "|"]
    for res in results:
        cells = []
        for s in sets:
            by = {r["margin"]: r["err_avg"] for r in res["rows"] if r["set"] == s}
            cells.append(" / ".join(f"{by[m]:.1f}" if m in by else "n/a" for m in margins))
        lines.append(f"| {res['encoder']} | " + " | ".join(cells) + " |")
    if votes is not None:
        lines += vote_section(votes)
    write_text(md, "# Encoder intrinsic evaluation\n\nError rates averaged over both directions (lower is "
                  f"better); ratio margin with k = {K}.\n\n" + "\n".join(lines) + "\n")
