"""A BUCC-style mining benchmark built from real text, and its evaluation (the paper's Table 2).

Gold translation pairs (e.g. newstest2015-2018 en-de) are hidden in larger monolingual pools made
of unrelated monolingual text plus *unpaired* news sentences (one side of other newstest lines:
same domain, hard distractors), so that about ``share`` (BUCC: 2-3%) of each pool is parallel.
A ``train`` split (its own gold files and half of the monolingual text) is used to choose each
method's threshold, which is then applied to a disjoint ``test`` split: precision, recall and F1
for every scorer x retrieval combination (each scorer's kind supplies the margin function; kinds
that are no margin function, e.g. a text-only score, cannot mine and are listed as such).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from marginmine.defaults import BUCC_DISTRACTORS, BUCC_MONO_MAX, BUCC_SHARE, SEED
from marginmine.encoders.base import SentenceEncoder
from marginmine.errors import InputError, MarginmineError
from marginmine.io.safe import write_text
from marginmine.io.text import open_text_out, read_aligned, read_lines
from marginmine.preprocess.normalize import sentence_key
from marginmine.scoring.mining import embed_unique
from marginmine.scoring.selection import optimal_threshold, prf_at
from marginmine.search.margin import RETRIEVALS, neighbourhoods, retrieve

log = logging.getLogger(__name__)
SPLITS = ("train", "test")


@dataclass(frozen=True)
class Split:
    src: list[str]
    tgt: list[str]
    gold: list[tuple[int, int]]  # 0-based (src row, tgt row)


def _aligned(src_path: str, tgt_path: str) -> list[tuple[str, str]]:
    a, b = read_aligned(src_path, tgt_path, hint="gold files must be line-aligned")
    return [(s.strip(), t.strip()) for s, t in zip(a, b) if s.strip() and t.strip()]


def _distinct(items: Sequence[str], taken: set[bytes]) -> list[str]:
    out = []
    for t in items:
        key = sentence_key(t)
        if t and key not in taken:
            taken.add(key)
            out.append(t)
    return out


def build_split(gold_pairs: Sequence[tuple[str, str]], mono_src: Sequence[str], mono_tgt: Sequence[str],
                share: float, distractors: int, rng: np.random.Generator) -> Split:
    """One split: gold pairs + unpaired distractor lines + monolingual text, shuffled."""
    seen_s: set[bytes] = set()
    seen_t: set[bytes] = set()
    distinct = []
    for s, t in gold_pairs:  # neighbour lists must not hold the same sentence twice
        ks, kt = sentence_key(s), sentence_key(t)
        if ks not in seen_s and kt not in seen_t:
            seen_s.add(ks)
            seen_t.add(kt)
            distinct.append((s, t))
    gold_pairs = distinct
    order = rng.permutation(len(gold_pairs))
    pool_src = len(mono_src) + distractors
    pool_tgt = len(mono_tgt) + distractors
    n_gold = round(share * (pool_src + pool_tgt) / 2 / (1 - share))
    if n_gold + 2 * distractors > len(gold_pairs):
        raise InputError("gold files", f"have {len(gold_pairs)} pairs, need {n_gold + 2 * distractors}",
                         hint="give more gold pairs or fewer distractors")
    pairs = [gold_pairs[i] for i in order]
    gold = pairs[:n_gold]
    only_src = [s for s, _ in pairs[n_gold:n_gold + distractors]]
    only_tgt = [t for _, t in pairs[n_gold + distractors:n_gold + 2 * distractors]]
    seen_src = {sentence_key(s) for s, _ in gold}
    seen_tgt = {sentence_key(t) for _, t in gold}
    src = [s for s, _ in gold] + _distinct(only_src + list(mono_src), seen_src)
    tgt = [t for _, t in gold] + _distinct(only_tgt + list(mono_tgt), seen_tgt)
    ps, pt = rng.permutation(len(src)), rng.permutation(len(tgt))
    pos_s, pos_t = np.argsort(ps), np.argsort(pt)
    return Split([src[i] for i in ps], [tgt[i] for i in pt],
                 sorted((int(pos_s[g]), int(pos_t[g])) for g in range(len(gold))))


def benchmark_files(out: str | Path) -> list[Path]:
    """Every file :func:`build_benchmark` writes into ``out``."""
    d = Path(out)
    return [d / f"{split}.{part}" for split in SPLITS for part in ("src", "tgt", "gold")] + [d / "summary.json"]


def build_benchmark(gold: dict[str, list[tuple[str, str]]], mono_src: Sequence[str], mono_tgt: Sequence[str],
                    out_dir: str | Path, share: float = BUCC_SHARE, distractors: int = BUCC_DISTRACTORS,
                    seed: int = SEED, mono_max: int = BUCC_MONO_MAX) -> dict:
    """Write ``{split}.src``, ``{split}.tgt``, ``{split}.gold`` (1-based src/tgt line numbers) and
    ``summary.json`` for the train and test splits. ``gold`` maps split -> [(src_file, tgt_file)].
    ``mono_max`` > 0 keeps the first ``mono_max`` distinct monolingual lines of each side (half
    for each split; smaller pools for a quick run), 0 all of them."""
    if mono_max < 0:
        raise MarginmineError(f"mono_max must be >= 0 (0 = every line), got {mono_max}")
    rng = np.random.default_rng(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src_mono = _distinct(mono_src, set())
    tgt_mono = _distinct(mono_tgt, set())
    if mono_max:
        src_mono, tgt_mono = src_mono[:mono_max], tgt_mono[:mono_max]
    half_s, half_t = len(src_mono) // 2, len(tgt_mono) // 2
    mono = {"train": (src_mono[:half_s], tgt_mono[:half_t]), "test": (src_mono[half_s:], tgt_mono[half_t:])}
    summary: dict[str, object] = {"share": share, "distractors": distractors, "seed": seed, "mono_max": mono_max,
                                  "mono_lines": {"src": len(src_mono), "tgt": len(tgt_mono)}}
    for split in SPLITS:
        pairs = [p for s, t in gold[split] for p in _aligned(s, t)]
        sp = build_split(pairs, *mono[split], share, distractors, rng)
        write_text(out / f"{split}.src", "".join(s + "\n" for s in sp.src))
        write_text(out / f"{split}.tgt", "".join(t + "\n" for t in sp.tgt))
        write_text(out / f"{split}.gold", "".join(f"{i + 1}\t{j + 1}\n" for i, j in sp.gold))
        summary[split] = {"src": len(sp.src), "tgt": len(sp.tgt), "gold": len(sp.gold),
                          "gold_share_src": len(sp.gold) / len(sp.src), "gold_files": gold[split]}
    write_text(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    return summary


def read_split(directory: str | Path, split: str) -> Split:
    d = Path(directory)
    gold = []
    for n, line in enumerate(read_lines(d / f"{split}.gold"), 1):
        try:
            i, j = (int(v) - 1 for v in line.split("\t"))
        except ValueError as exc:
            raise InputError(str(d / f"{split}.gold"), "expected two line numbers", line=n) from exc
        gold.append((i, j))
    return Split(read_lines(d / f"{split}.src"), read_lines(d / f"{split}.tgt"), gold)


@dataclass(frozen=True)
class MiningResult:
    scorer: str
    encoder: str
    margin: str
    retrieval: str
    threshold: float
    train_f1: float
    precision: float
    recall: float
    f1: float
    candidates: int
    #: per split, the source sentences behind the counts (:func:`unit_items`), for the items sidecar
    items: tuple[tuple[object, ...], ...] = field(default=(), repr=False, compare=False)


#: the items sidecar's columns (:mod:`marginmine.evaluate.paired`)
ITEM_COLUMNS = ("scorer", "encoder", "margin", "retrieval", "split", "item", "tp", "fp", "gold", "units")


def unit_items(split: str, src: Sequence[int], correct: Sequence[bool], gold: Sequence[tuple[int, int]],
               units: int) -> list[tuple[object, ...]]:
    """The accepted pairs of one split counted per source sentence: ``(split, source, tp, fp, gold,
    units)`` for each source with an accepted pair or a gold pair (``units``: the pool's sources, the
    others counting zero); summed, they give the row's precision, recall and F1."""
    counts: dict[int, list[int]] = {}
    for i, c in zip(src, correct):
        counts.setdefault(int(i), [0, 0, 0])[0 if c else 1] += 1
    for i, _ in gold:
        counts.setdefault(int(i), [0, 0, 0])[2] += 1
    return [(split, i, *v, units) for i, v in sorted(counts.items())]


def evaluate_split_pair(train: tuple[np.ndarray, np.ndarray, Split], test: tuple[np.ndarray, np.ndarray, Split],
                        k: int, margins: Sequence[tuple[str, str]], encoder: str = "",
                        retrievals: Sequence[str] = RETRIEVALS,
                        rescore: Mapping[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] | None = None,
                        ) -> list[MiningResult]:
    """Every ``(scorer, margin function)`` x retrieval with one neighbourhood size ``k``: the
    threshold with the best F1 on train, P/R/F1 at it on test. A scorer in ``rescore`` retrieves
    with its margin function and thresholds the found pairs by its own score of their embeddings
    (``rescore[scorer](src_rows, tgt_rows)``, e.g. the calibrated confidence)."""
    data = {"train": train, "test": test}
    nbs = {name: (neighbourhoods(x, y, k), set(sp.gold), len(sp.gold)) for name, (x, y, sp) in data.items()}
    rows = []
    for scorer, margin in margins:
        for retrieval in retrievals:
            found, srcs = {}, {}
            for name, (nb, gold, n_gold) in nbs.items():
                mined = retrieve(nb, margin, retrieval)
                correct = np.fromiter(((i, j) in gold for i, j in zip(mined.src.tolist(), mined.tgt.tolist())),
                                      bool, len(mined))
                score = mined.score
                if rescore and scorer in rescore:
                    x, y, _ = data[name]
                    score = rescore[scorer](np.asarray(x)[mined.src], np.asarray(y)[mined.tgt])
                found[name] = (score, correct, n_gold)
                srcs[name] = mined.src
            best = optimal_threshold(*found["train"])
            res = prf_at(*found["test"], best.threshold)
            items = [u for name, (x, y, sp) in data.items()
                     for u in _accepted_items(name, srcs[name], *found[name][:2], best.threshold, sp)]
            rows.append(MiningResult(scorer, encoder, margin, retrieval, best.threshold, best.f1, res.precision,
                                     res.recall, res.f1, len(found["test"][0]), tuple(items)))
    return rows


def _accepted_items(split: str, src: np.ndarray, score: np.ndarray, correct: np.ndarray, threshold: float,
                    sp: Split) -> list[tuple[object, ...]]:
    keep = np.asarray(score, np.float64) >= threshold
    return unit_items(split, np.asarray(src)[keep].tolist(), np.asarray(correct, bool)[keep].tolist(), sp.gold,
                      len(sp.src))


def vote_rows(data: Mapping[str, tuple[np.ndarray, np.ndarray, Split]],
              translated: Mapping[str, tuple[np.ndarray, np.ndarray]], votes: Sequence[tuple[str, object]],
              encoder: str = "") -> list[MiningResult]:
    """Translate-then-vote scorers (kind ``vote``): the pairs each one's rule keeps of the three
    searches (ratio margin, intersection, no threshold: the paper's setting), P/R/F1 on test and
    F1 on train; ``translated[split]``: the embedded translations of that split's pools."""
    from marginmine.scoring.votes import mined_sets, rule_pairs, set_prf

    rows = []
    for name, kind in votes:
        prf, items = {}, []
        for split, (x, y, sp) in data.items():
            sets = mined_sets(x, y, *translated[split], int(kind.k))  # type: ignore[attr-defined]
            kept = rule_pairs(sets, kind.rule)  # type: ignore[attr-defined]
            gold = set(sp.gold)
            prf[split] = (*set_prf(kept, gold), len(kept))
            ordered = sorted(kept)
            items += unit_items(split, [i for i, _ in ordered], [p in gold for p in ordered], sp.gold, len(sp.src))
        rows.append(MiningResult(name, encoder, "ratio", f"vote:{kind.rule}", float("nan"),  # type: ignore[attr-defined]
                                 prf["train"][2], *prf["test"], tuple(items)))
    return rows


def best_of_neighbours(x: np.ndarray, y: np.ndarray, k: int,
                       score: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``x``: the row of ``y`` among its ``k`` nearest by cosine that ``score(x rows,
    y rows)`` rates highest (first on ties), and that score."""
    from marginmine.search.knn import knn

    _, ids = knn(np.asarray(x), np.asarray(y), min(k, len(y)))
    rep = np.repeat(np.arange(len(x)), ids.shape[1])
    s = np.asarray(score(np.asarray(x)[rep], np.asarray(y)[ids.ravel()]), np.float64).reshape(ids.shape)
    best = np.argmax(s, axis=1)
    rows = np.arange(len(x))
    return ids[rows, best].astype(np.int64), s[rows, best]


def rerank_rows(data: Mapping[str, tuple[np.ndarray, np.ndarray, Split]], scorers: Sequence[tuple[str, object]],
                k: int, encoder: str = "") -> list[MiningResult]:
    """Scorers that score pairs but define no margin (``pair_scores`` without ``mines``, e.g. mlp):
    each source's best of its ``k`` cosine neighbours by the scorer's own score, the threshold with
    the best F1 on train, P/R/F1 on test."""
    rows = []
    for name, kind in scorers:
        found = {}
        for split, (x, y, sp) in data.items():
            tgt, score = best_of_neighbours(x, y, k, kind.pair_scores)  # type: ignore[attr-defined]
            gold = set(sp.gold)
            correct = np.fromiter(((i, int(j)) in gold for i, j in enumerate(tgt.tolist())), bool, len(x))
            found[split] = (score, correct, len(sp.gold))
        train = optimal_threshold(*found["train"])
        res = prf_at(*found["test"], train.threshold)
        items = [u for split, (x, y, sp) in data.items()
                 for u in _accepted_items(split, np.arange(len(x)), *found[split][:2], train.threshold, sp)]
        rows.append(MiningResult(name, encoder, "own score", f"fwd: best of {k} by cosine", train.threshold,
                                 train.f1, res.precision, res.recall, res.f1, len(found["test"][0]), tuple(items)))
    return rows


def read_translated(directory: str | Path, split: str,
                    translations: Mapping[str, str | Path]) -> tuple[list[str], list[str]]:
    """A split's pools translated (``translations``: ``<split>.src``/``<split>.tgt`` -> file), line
    for line with the pool files (checked)."""
    out = []
    for side in ("src", "tgt"):
        key = f"{split}.{side}"
        if key not in translations:
            raise InputError(str(directory), f"no translation of {key} was given",
                             hint="give --translated train.src=FILE train.tgt=FILE test.src=FILE test.tgt=FILE")
        lines, pool = read_lines(translations[key]), read_lines(Path(directory) / key)
        if len(lines) != len(pool):
            raise InputError(str(translations[key]), f"has {len(lines)} lines, {Path(directory) / key} has "
                             f"{len(pool)}",
                             hint="a translation must be line-aligned with its pool: translate it again")
        out.append(lines)
    return out[0], out[1]


def evaluate(encoders: dict[str, SentenceEncoder], scorers: dict[str, tuple[str, object]], directory: str | Path,
             src_lang: str, tgt_lang: str, default_k: int,
             translations: Mapping[str, str | Path] | None = None) -> tuple[list[MiningResult], list[str]]:
    """Rows for every scorer that can mine (``scorers``: name -> (encoder name, kind instance)),
    each encoder's pools embedded once; and the names of the scorers that cannot mine. Scorers
    that vote over translations need ``translations`` of the pools (:func:`read_translated`)."""
    rows: list[MiningResult] = []
    votes = {n for n, (_, kind) in scorers.items() if getattr(kind, "translated", False)}
    rerank = {n for n, (_, kind) in scorers.items()
              if getattr(kind, "mines", None) is None and callable(getattr(kind, "pair_scores", None))}
    cannot = [n for n, (_, kind) in scorers.items() if getattr(kind, "mines", None) is None and n not in votes | rerank]
    for enc_name, encoder in encoders.items():
        mine = [(n, kind) for n, (e, kind) in scorers.items() if e == enc_name and n not in cannot]
        if not mine:
            continue
        data = {}
        for split in SPLITS:
            sp = read_split(directory, split)
            data[split] = (embed_unique(encoder, sp.src, src_lang), embed_unique(encoder, sp.tgt, tgt_lang), sp)
        voting = [(n, kind) for n, kind in mine if n in votes]
        if voting:
            trans = {split: read_translated(directory, split, translations or {}) for split in SPLITS}
            emb = {split: (embed_unique(encoder, a, tgt_lang), embed_unique(encoder, b, src_lang))
                   for split, (a, b) in trans.items()}
            rows += vote_rows(data, emb, voting, enc_name)
        reranked = [(n, kind) for n, kind in mine if n in rerank]
        if reranked:
            rows += rerank_rows(data, reranked, default_k, enc_name)
        mine = [(n, kind) for n, kind in mine if n not in votes | rerank]
        by_k: dict[int, list[tuple[str, str]]] = {}
        for n, kind in mine:
            by_k.setdefault(int(getattr(kind, "k", default_k)), []).append((n, kind.mines))  # type: ignore[attr-defined]
        rescore = {n: kind.pair_scores for n, kind in mine if callable(getattr(kind, "pair_scores", None))}
        for k, margins in by_k.items():
            rows += evaluate_split_pair(data["train"], data["test"], k, margins, enc_name, rescore=rescore)
    order = list(scorers)
    rows.sort(key=lambda r: order.index(r.scorer))  # stable: retrievals keep their order
    return rows, cannot


def write_table(rows: Sequence[MiningResult], tsv: str | Path, md: str | Path, title: str,
                cannot_mine: Sequence[str] = ()) -> None:
    """The table (TSV and Markdown) and its items sidecar (:data:`ITEM_COLUMNS`)."""
    from marginmine.io.items import items_path, write_items

    fields = [f for f in asdict(rows[0]) if f != "items"] if rows else []
    with open_text_out(tsv) as fh:
        fh.write("\t".join(fields) + "\n")
        for r in rows:
            fh.write("\t".join(f"{v:.4f}" if isinstance(v, float) else str(v)
                               for v in (getattr(r, f) for f in fields)) + "\n")
    write_items(items_path(tsv), ITEM_COLUMNS,
                ((r.scorer, r.encoder, r.margin, r.retrieval, *u) for r in rows for u in r.items))
    lines = [f"# {title}", "",
             "| scorer | encoder | margin | retrieval | P | R | F1 | threshold (from train) | train F1 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.scorer} | {r.encoder} | {r.margin} | {r.retrieval} | {100 * r.precision:.1f} | "
                     f"{100 * r.recall:.1f} | {100 * r.f1:.1f} | "
                     f"{'none' if np.isnan(r.threshold) else f'{r.threshold:.4f}'} | {100 * r.train_f1:.1f} |")
    if cannot_mine:
        lines += ["", f"Not mining scores (no margin function to retrieve with): {', '.join(cannot_mine)}."]
    write_text(md, "\n".join(lines) + "\n")
