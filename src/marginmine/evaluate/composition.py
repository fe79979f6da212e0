"""What each selection is made of, for a corpus whose pairs carry labels (the demo's sidecar).

The demo corpus names the origin of every pair (``id, origin, kind, clean``); a selection
``{method}.{N}`` keeps the pair id in its fourth column. Counting the selected ids by group - the
origin for clean pairs (``clean:multi30k``), the kind for the rest (``misaligned``,
``machine_translated``, ``paracrawl_E`` ...) - shows *why* two methods give different BLEU: how much
noise each let through, and which clean domain it preferred (a test set rewards its own domain).

:func:`group_density` explains the preference by measurement: per group over the whole corpus, the
mean cosine of its pairs and the mean similarity of their k nearest neighbours (how dense the
neighbourhood is). The ratio margin divides the cosine by that neighbourhood mean, so a domain of
near-identical sentences (image captions) has a high neighbourhood similarity and a low margin. The
neighbourhood mean is recovered exactly from two columns of the score file, a margin scorer's and a
cosine scorer's over the same encoder: for the ratio margin ``cos / margin`` (margin = cos /
neighbourhood), for the distance margin ``cos - margin``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from marginmine.errors import InputError
from marginmine.io.labels import UNLABELLED, PairLabels
from marginmine.io.safe import write_text
from marginmine.io.sizes import parse_count
from marginmine.io.text import open_binary, open_text_out

if TYPE_CHECKING:
    import numpy as np

__all__ = ["UNLABELLED", "Composition", "Density", "PairLabels", "count_groups", "group_density",
           "iter_selection_ids", "read_groups", "selection_name", "write_composition"]


@dataclass(frozen=True)
class Composition:
    method: str
    n: str
    counts: dict[str, int]

    @property
    def pairs(self) -> int:
        return sum(self.counts.values())

    def share(self, group: str) -> float:
        return self.counts.get(group, 0) / self.pairs if self.pairs else 0.0


def read_groups(labels_tsv: str | Path) -> PairLabels:
    """Sidecar ``id, origin, kind, clean`` -> each pair id's group (``clean:<origin>`` or the noise
    kind), held as :class:`~marginmine.io.labels.PairLabels` (memory 19 bytes a pair)."""
    return PairLabels.read(labels_tsv)


def count_groups(ids: Iterable[str], groups: PairLabels) -> dict[str, int]:
    """Selected ids per group; ids the sidecar does not know count as :data:`UNLABELLED`."""
    return groups.count_groups(ids)


def iter_selection_ids(path: str | Path, column: int = 3) -> Iterator[str]:
    """The pair ids of a selection TSV (``src, tgt, score, id``; gz allowed), one at a time."""
    with open_binary(path) as fh:
        for no, raw in enumerate(fh, 1):
            fields = raw.decode("utf-8").rstrip("\r\n").split("\t")
            if len(fields) <= column:
                raise InputError(str(path), f"has {len(fields)} columns, the pair id is column {column + 1}",
                                 line=no, hint="pass select_top's <method>.<N>.tsv.gz")
            yield fields[column]


def selection_name(path: str | Path) -> tuple[str, str]:
    """``.../ratio.20k.tsv.gz`` -> (``ratio``, ``20k``)."""
    name = Path(path).name
    for suffix in (".gz", ".tsv"):
        name = name.removesuffix(suffix)
    method, _, n = name.partition(".")
    if not n:
        raise InputError(str(path), "is not named <method>.<N>.tsv[.gz]")
    return method, n


@dataclass(frozen=True)
class Density:
    group: str
    pairs: int
    mean_cosine: float
    mean_neighbourhood: float  # mean over pairs of (NN_k(x) + NN_k(y)) / 2k similarity


def neighbourhood(margin_kind: str, margin: np.ndarray, cosine: np.ndarray) -> np.ndarray:
    """Per pair, the mean similarity of the k nearest neighbours of its two sides (the margin's
    denominator), from the score file's margin and cosine columns."""
    import numpy as np

    if margin_kind == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(margin != 0, cosine / margin, np.nan)
    if margin_kind == "distance":
        return cosine - margin
    if margin_kind == "absolute":  # no neighbourhood in the score: the column stays empty (nan)
        return np.full(len(cosine), np.nan)
    raise ValueError(f"unknown margin kind {margin_kind!r}")


def group_density(pairs: Sequence[str | Path], scores: Sequence[str | Path], groups: PairLabels,
                  margin_kind: str, margin_column: str, cosine_column: str, id_column: int = 2) -> list[Density]:
    """Per group, over every scored corpus pair: count, mean cosine, mean neighbourhood similarity
    (pairs whose neighbourhood is undefined - a zero margin - are left out of that mean only).
    ``margin_column`` (of kind ``margin_kind``) and ``cosine_column`` name the score-file columns.
    Memory: one shard's scores and group codes at a time; the sums run pair by pair in corpus
    order (``np.add.at`` is unbuffered), so they are those of a loop over the pairs."""
    import numpy as np

    from marginmine.scoring.files import read_scores

    if len(pairs) != len(scores):
        raise InputError(str(scores[0]) if scores else "--scores", f"{len(scores)} score files for {len(pairs)} shards",
                         hint="give one score file per shard, in shard order")
    names = groups.group_names()
    size = len(names)
    count, nb_count = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
    cos_sum, nb_sum = np.zeros(size), np.zeros(size)
    for pf, sf in zip(pairs, scores):
        code = groups.group_codes(iter_selection_ids(pf, id_column))
        m, c = read_scores(sf, margin_column), read_scores(sf, cosine_column)
        if len(code) != len(m):
            raise InputError(str(sf), f"has {len(m)} lines but the shard {pf} has {len(code)}",
                             hint="rescore the shard: the score file does not belong to it")
        nb = np.asarray(neighbourhood(margin_kind, m, c), dtype=np.float64)
        ok = ~np.isnan(nb)
        code_ok = code[ok]
        count += np.bincount(code, minlength=size)
        nb_count += np.bincount(code_ok, minlength=size)
        np.add.at(cos_sum, code, np.asarray(c, dtype=np.float64))
        np.add.at(nb_sum, code_ok, nb[ok])
    return [Density(names[g], int(count[g]), float(cos_sum[g]) / int(count[g]),
                    float(nb_sum[g]) / int(nb_count[g]) if nb_count[g] else float("nan"))
            for g in sorted(range(size), key=lambda g: names[g]) if count[g]]


def planted_lines(rows: Sequence[Composition], groups: Sequence[str], density: Sequence[Density]) -> list[str]:
    """Markdown: each selection's precision (planted true translations among its pairs) and, when
    the scored corpus' groups are known (``density``), its recall (of the planted pairs that
    preprocessing kept)."""
    kept = sum(d.pairs for d in density if d.group.startswith("clean:")) if density else 0
    lines = ["", "## Planted true translations at N", "",
             "Precision: share of the selected pairs that are labelled clean (true translations, the planted "
             "pairs of a built corpus); recall: of the clean pairs in the scored corpus" +
             (f" ({kept:,})." if kept else " (not known: no density table)."), "",
             "| selection | clean selected | precision | recall |", "|---|---:|---:|---:|"]
    for r in rows:
        hit = sum(r.counts.get(g, 0) for g in groups if g.startswith("clean:"))
        recall = f"{hit / kept:.3f}" if kept else "n/a"
        lines.append(f"| {r.method}.{r.n} | {hit:,} | {hit / r.pairs if r.pairs else 0:.3f} | {recall} |")
    return lines


def write_composition(rows: Sequence[Composition], tsv: str | Path, md: str | Path, title: str = "",
                      density: Sequence[Density] = (), density_tsv: str | Path | None = None) -> None:
    """Long TSV (method, N, group, pairs, share) and a Markdown table: groups x selections, shares in %."""
    rows = sorted(rows, key=lambda r: (parse_count(r.n), r.method))
    total = Counter[str]()
    for r in rows:
        total.update(r.counts)
    groups = sorted(total, key=lambda g: (not g.startswith("clean:"), -total[g], g))
    with open_text_out(tsv) as fh:
        fh.write("method\tN\tgroup\tpairs\tshare\n")
        for r in rows:
            for g in groups:
                if r.counts.get(g):
                    fh.write(f"{r.method}\t{r.n}\t{g}\t{r.counts[g]}\t{r.share(g):.4f}\n")
    head = [f"{r.method}.{r.n}" for r in rows]
    lines = [f"# What each selection is made of{': ' + title if title else ''}", "",
             "Share of the selected pairs (%) by origin (clean pairs) or noise kind, from the corpus' labels.", "",
             "| group | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    clean = ["**clean, all**", *(f"**{100 * sum(r.share(g) for g in groups if g.startswith('clean:')):.1f}**"
                                 for r in rows)]
    lines.append("| " + " | ".join(clean) + " |")
    for g in groups:
        lines.append("| " + " | ".join([g, *(f"{100 * r.share(g):.1f}" for r in rows)]) + " |")
    lines.append("| pairs | " + " | ".join(f"{r.pairs:,}" for r in rows) + " |")
    lines += planted_lines(rows, groups, density)
    if not density and density_tsv is not None:
        lines += ["", "(No density table: it needs a ratio or distance scorer and a cosine scorer over one "
                  "encoder's score files, and none were given - a suite's table leaves it to the experiment's; "
                  "see density.tsv.)"]
    if density:
        corpus = sum(d.pairs for d in density)
        lines += ["", "## Why: how dense each group's neighbourhood is", "",
                  "Over the whole scored corpus: the group's share, the mean cosine of its pairs and the mean "
                  "similarity of their k nearest neighbours (the ratio margin's denominator; a high value "
                  "lowers the margin), beside its share in each selection (%).", "",
                  "| group | corpus % | mean cosine | mean kNN similarity | " + " | ".join(head) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(head)]
        for d in sorted(density, key=lambda d: (not d.group.startswith("clean:"), -d.pairs, d.group)):
            nb = "n/a" if d.mean_neighbourhood != d.mean_neighbourhood else f"{d.mean_neighbourhood:.3f}"
            lines.append(f"| {d.group} | {100 * d.pairs / corpus:.1f} | {d.mean_cosine:.3f} | {nb} | "
                         + " | ".join(f"{100 * r.share(d.group):.1f}" for r in rows) + " |")
    write_text(md, "\n".join(lines) + "\n")
    if density_tsv is not None:
        with open_text_out(density_tsv) as fh:
            fh.write("group\tpairs\tcorpus_share\tmean_cosine\tmean_knn_similarity\n")
            corpus = sum(d.pairs for d in density) or 1
            for d in density:
                fh.write(f"{d.group}\t{d.pairs}\t{d.pairs / corpus:.4f}\t{d.mean_cosine:.4f}\t"
                         f"{d.mean_neighbourhood:.4f}\n")
