"""The audit's files: the sample drawn from a scored corpus (a TSV with an empty label column, its
plan as JSON, the labelling page), the labels read back, and the estimate's table and plot.

The sample's pairs are ranked as top-N selection ranks them (score descending, ties in corpus
order) in two streaming passes over the shards: the score distribution first
(:class:`marginmine.evaluate.cleanshare.ScoreCounts`), then each pair's rank, so memory holds the
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

#: the sample file's columns (the page exports the same with ``label`` filled). ``first`` / ``last``:
#: the rank range of the row's stratum, ``pairs``: the ranking's size - so a labelled file is an
#: audit on its own, whatever happens to the plan later (a sample drawn again for new sizes)
SAMPLE_COLUMNS = ("item", "rank", "stratum", "first", "last", "pairs", "score", "id", "src", "tgt", "label")


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

    def matches(self, audit: Audit) -> bool:
        """Whether ``audit`` (read from a labels file) is a labelling of this plan's sample."""
        return (self.n == audit.n and tuple(self.edges) == tuple(audit.edges)
                and set(audit.ranks.tolist()) <= set(self.ranks))

    @classmethod
    def read(cls, path: str | Path) -> "SamplePlan":
        d = read_json(path, "audit sample plan", hint="draw the sample again (marginmine audit-sample)")
        try:
            return cls(d["scorer"], int(d["n"]), tuple(d["edges"]), tuple(d["ranks"]), tuple(d["sizes"]),
                       {k: int(v) for k, v in d["thresholds"].items()}, int(d["seed"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(str(path), f"is not an audit sample plan ({exc!r})",
                             hint="draw the sample again (marginmine audit-sample)") from exc


def read_sample(path: str | Path, need: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """A sample TSV's header and rows (its fields as written); a header without every column of
    ``need`` is an error naming the file."""
    from marginmine.io.text import open_binary

    with open_binary(path) as fh:
        lines = [raw.decode("utf-8").rstrip("\r\n").split("\t") for raw in fh]
    header, body = (lines[0] if lines else []), [r for r in lines[1:] if r != [""]]
    missing = [c for c in need if c not in header]
    if missing:
        raise InputError(str(path), f"header {header[:8]} lacks {', '.join(missing)}", line=1,
                         hint="give the sample TSV marginmine audit-sample wrote")
    return header, body


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
    from marginmine.evaluate.cleanreport import read_counts
    from marginmine.io.markup import tsv_field
    from marginmine.io.text import format_tsv_line, iter_sentences, open_text_out
    from marginmine.scoring.files import read_scores

    if len(pairs) != len(scores):
        raise MarginmineError(f"{len(pairs)} pair shards for {len(scores)} score files (one per shard, same order)")
    counts = read_counts(scores, scorer)
    if counts is None:
        raise MarginmineError(f"no scored pairs in {len(scores)} score file(s): nothing to audit")
    n = counts.n
    too_big = [s for s in sizes if s > n]
    if too_big:  # as top-N selection keeps them all and the clean share skips them: said, not fatal
        import logging

        logging.getLogger(__name__).warning("audit: N = %s above the %d scored pairs: not a stratum edge, not "
                                            "estimated", ", ".join(map(str, too_big)), n)
    sizes = [s for s in sizes if s <= n]
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
                if len(cols) < 2:
                    raise InputError(str(p), f"has {len(cols)} column(s), a pair needs two", line=line_no + 1)
                # a corpus without an id column: the shard and line name the pair
                pid = cols[id_column] if len(cols) > id_column else f"{Path(p).name}:{line_no + 1}"
                j, h = int(pos[line_no]), int(stratum[int(pos[line_no])])
                rows[j] = [str(item_of[j] + 1), str(ranks[j] + 1), str(h + 1), str(edges[h] + 1), str(edges[h + 1]),
                           str(n), f"{sc[line_no]:.6f}", tsv_field(pid), tsv_field(cols[0]), tsv_field(cols[1]), ""]
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


def read_labels(path: str | Path, monotone: bool = False) -> Audit:
    """The labelled sample (the sample TSV with its ``label`` column filled: ``good``, ``bad``,
    ``unsure`` or empty, any case) as an :class:`Audit`, from the file alone: its rows carry their
    ranks, their strata's rank ranges and the ranking's size."""
    from marginmine.io.text import open_binary

    need = ("item", "rank", "first", "last", "pairs", "label")
    hint = "export the labels from the audit page, or fill the label column of a copy of the sample TSV"
    ranks: list[int] = []
    labels: list[int] = []
    bounds: set[int] = set()
    sizes: set[int] = set()
    items: set[int] = set()
    try:
        with open_binary(path) as fh:
            header = fh.readline().decode("utf-8").lstrip("\ufeff").rstrip("\r\n").split("\t")
            if any(c not in header for c in need):
                missing = ", ".join(c for c in need if c not in header)
                raise InputError(str(path), f"header {header[:8]} lacks {missing}", line=1, hint=hint)
            ci, cr, cf, cl_, cp, cl = (header.index(c) for c in need)
            for n, raw in enumerate(fh, 2):
                cols = raw.decode("utf-8").rstrip("\r\n").split("\t")
                if cols == [""]:
                    continue
                if len(cols) < len(header):
                    raise InputError(str(path), f"has {len(cols)} columns, the header {len(header)}", line=n)
                try:
                    item, rank, first, last, pairs = (int(cols[c]) for c in (ci, cr, cf, cl_, cp))
                except ValueError as exc:
                    raise InputError(str(path), f"item, rank, first, last or pairs is not a number: {exc}",
                                     line=n) from exc
                if not 1 <= first <= rank <= last <= pairs:
                    raise InputError(str(path), f"rank {rank} is not in its stratum {first}..{last} of {pairs}",
                                     line=n, hint=hint)
                if item in items:
                    raise InputError(str(path), f"item {item} is labelled twice", line=n)
                word = cols[cl].strip().lower()
                if word not in LABEL_WORDS:
                    raise InputError(str(path), f"label {cols[cl]!r}: give good, bad, unsure or leave it empty",
                                     line=n)
                items.add(item)
                ranks.append(rank - 1)
                labels.append(LABEL_WORDS[word])
                bounds |= {first - 1, last}
                sizes.add(pairs)
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"is not UTF-8 text ({exc.reason})",
                         hint="save it as UTF-8 (a spreadsheet's 'TSV UTF-8'), or export it from the page") from exc
    if len(sizes) != 1:
        raise InputError(str(path), f"its rows name {len(sizes)} ranking sizes ({sorted(sizes)[:3]}): "
                         "rows of different samples", hint=hint)
    if not ranks:
        raise InputError(str(path), "has no labelled rows", hint=hint)
    order = np.argsort(ranks)
    n_pairs = sizes.pop()
    try:
        return Audit(n_pairs, tuple(sorted(bounds | {0, n_pairs})), np.asarray(ranks, np.int64)[order],
                     np.asarray(labels, np.int64)[order], monotone)
    except ValueError as exc:
        raise InputError(str(path), f"is not one audit sample: {exc}", hint=hint) from exc
