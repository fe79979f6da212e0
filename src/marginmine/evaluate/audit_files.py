"""The audit's files: the sample drawn from a scored corpus (a TSV with an empty label column, its
plan as JSON, the labelling page), the labels read back, and the estimate's table and plot.

The sample's pairs are ranked as top-N selection ranks them (score descending, ties in corpus
order) in two streaming passes over the shards: the score distribution first
(:class:`marginmine.scoring.cleanshare.ScoreCounts`), then each pair's rank, so memory holds the
distinct scores and one shard, never the corpus. The rows are shown in a seeded shuffled order
(``item``), so the labeller sees neither the rank nor the score.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marginmine.errors import InputError, MarginmineError
from marginmine.evaluate.audit import LABEL_WORDS, Audit, allocate, draw_ranks, plan_strata
from marginmine.io.safe import read_json, write_text

#: the sample file's columns (the page exports the same with ``label`` filled)
SAMPLE_COLUMNS = ("item", "rank", "stratum", "score", "id", "src", "tgt", "label")


@dataclass(frozen=True)
class SamplePlan:
    """What the estimate needs of the sample: the ranking's size, the strata, the sampled ranks
    (by item), the configured cuts and thresholds (with the N each keeps)."""

    scorer: str
    n: int
    edges: tuple[int, ...]
    ranks: tuple[int, ...]
    sizes: tuple[int, ...]
    thresholds: dict[str, int]
    seed: int

    @classmethod
    def read(cls, path: str | Path) -> "SamplePlan":
        d = read_json(path, "audit sample plan", hint="draw the sample again (marginmine audit-sample)")
        try:
            return cls(d["scorer"], int(d["n"]), tuple(d["edges"]), tuple(d["ranks"]), tuple(d["sizes"]),
                       {k: int(v) for k, v in d["thresholds"].items()}, int(d["seed"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(str(path), f"is not an audit sample plan ({exc})",
                             hint="draw the sample again (marginmine audit-sample)") from exc


def _rank_shard(values: np.ndarray, scores: np.ndarray, greater: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """The ranks of one shard's pairs (``seen``: the earlier shards' count of each distinct score,
    updated)."""
    idx = np.searchsorted(values, scores)
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_idx)) + 1]
    occurrence = np.empty(len(idx), np.int64)
    occurrence[order] = np.arange(len(idx)) - np.repeat(starts, np.diff(np.r_[starts, len(idx)]))
    ranks = greater[idx] + seen[idx] + occurrence
    np.add.at(seen, idx, 1)
    return ranks


def draw_sample(pairs: Sequence[str | Path], scores: Sequence[str | Path], scorer: str, labels: int, strata: int,
                sizes: Sequence[int], thresholds: Sequence[float], seed: int, id_column: int,
                tsv: str | Path, plan_json: str | Path) -> SamplePlan:
    """Draw the audit sample of ``scorer``'s ranking over the shards (``pairs[i]`` scored in
    ``scores[i]``) and write it (``tsv``, ``plan_json``)."""
    from marginmine.io.text import format_tsv_line, iter_sentences, open_text_out
    from marginmine.report.sample_pages import tsv_field
    from marginmine.scoring.cleanreport import read_counts
    from marginmine.scoring.files import read_scores

    if len(pairs) != len(scores):
        raise MarginmineError(f"{len(pairs)} pair shards for {len(scores)} score files (one per shard, same order)")
    counts = read_counts(scores, scorer)
    if counts is None:
        raise MarginmineError(f"no scored pairs in {len(scores)} score file(s): nothing to audit")
    n = counts.n
    for s in sizes:
        if not 1 <= s <= n:
            raise MarginmineError(f"audit size N = {s}: outside 1..{n} (the scored pairs)")
    kept = {f"{t:g}": int(counts.at_least(float(t))) for t in thresholds}
    edges = plan_strata(n, strata, [*sizes, *kept.values()])
    ranks = draw_ranks(edges, allocate(edges, labels), seed)
    item_of = np.empty(len(ranks), np.int64)
    item_of[np.random.default_rng([seed, 1]).permutation(len(ranks))] = np.arange(len(ranks))
    greater = counts.n - counts.cum  # scores above each distinct value
    seen = np.zeros(len(counts.values), np.int64)
    rows: list[list[str] | None] = [None] * len(ranks)
    stratum = np.searchsorted(np.asarray(edges), ranks, side="right") - 1
    for p, f in zip(pairs, scores):
        sc = read_scores(f, scorer)
        shard_ranks = _rank_shard(counts.values, sc, greater, seen)
        pos = np.searchsorted(ranks, shard_ranks)
        hit = set(np.flatnonzero((pos < len(ranks)) & (ranks[np.minimum(pos, len(ranks) - 1)] == shard_ranks)))
        if not hit:
            continue
        for line_no, line in enumerate(iter_sentences(p)):
            if line_no in hit:
                cols = line.split("\t")
                if len(cols) <= max(1, id_column):
                    raise InputError(str(p), f"has {len(cols)} columns, the pair id is column {id_column}",
                                     line=line_no + 1)
                j = int(pos[line_no])
                rows[j] = [str(item_of[j] + 1), str(ranks[j] + 1), str(stratum[j] + 1), f"{sc[line_no]:.6f}",
                           tsv_field(cols[id_column]), tsv_field(cols[0]), tsv_field(cols[1]), ""]
    if any(r is None for r in rows):
        raise MarginmineError(f"{sum(r is None for r in rows)} sampled ranks were not found in the pair shards "
                              "(a score file and its shard differ in length: score the shard again)")
    with open_text_out(tsv) as out:
        out.write(format_tsv_line(SAMPLE_COLUMNS))
        for j in np.argsort(item_of):
            out.write(format_tsv_line(rows[j]))  # type: ignore[arg-type]
    plan = SamplePlan(scorer, n, tuple(int(e) for e in edges), tuple(int(ranks[j]) for j in np.argsort(item_of)),
                      tuple(int(s) for s in sizes), kept, int(seed))
    write_text(plan_json, json.dumps(plan.__dict__, indent=1) + "\n")
    return plan


def read_labels(path: str | Path, plan: SamplePlan, monotone: bool = False) -> Audit:
    """The labelled sample (the sample TSV with its ``label`` column filled: ``good``, ``bad``,
    ``unsure`` or empty) as an :class:`Audit` of ``plan``'s ranking. Rows are matched by ``item``
    and checked against the plan's ranks; a missing item counts as unlabelled."""
    from marginmine.io.text import open_binary

    labels = np.full(len(plan.ranks), LABEL_WORDS[""], np.int64)
    seen: set[int] = set()
    with open_binary(path) as fh:
        header = fh.readline().decode("utf-8").rstrip("\r\n").split("\t")
        need = ("item", "rank", "label")
        if any(c not in header for c in need):
            raise InputError(str(path), f"header {header[:8]} lacks {', '.join(c for c in need if c not in header)}",
                             line=1, hint="export the labels from the audit page, or fill the sample TSV's label column")
        ci, cr, cl = (header.index(c) for c in need)
        for n, raw in enumerate(fh, 2):
            cols = raw.decode("utf-8").rstrip("\r\n").split("\t")
            if cols == [""]:
                continue
            if len(cols) < len(header):
                raise InputError(str(path), f"has {len(cols)} columns, the header {len(header)}", line=n)
            try:
                item, rank = int(cols[ci]), int(cols[cr])
            except ValueError as exc:
                raise InputError(str(path), f"item {cols[ci]!r} / rank {cols[cr]!r} is not a number", line=n) from exc
            if not 1 <= item <= len(plan.ranks) or plan.ranks[item - 1] + 1 != rank:
                raise InputError(str(path), f"item {item} with rank {rank} is not in the sample's plan",
                                 line=n, hint="label the sample drawn with this plan (same scorer, seed, corpus)")
            if item in seen:
                raise InputError(str(path), f"item {item} is labelled twice", line=n)
            seen.add(item)
            word = cols[cl].strip().lower()
            if word not in LABEL_WORDS:
                raise InputError(str(path), f"label {cols[cl]!r}: give good, bad, unsure or leave it empty", line=n)
            labels[item - 1] = LABEL_WORDS[word]
    order = np.argsort(plan.ranks)
    return Audit(plan.n, plan.edges, np.asarray(plan.ranks, np.int64)[order], labels[order], monotone)
