"""What each selection is made of, for a corpus whose pairs carry labels (the demo's sidecar).

The demo corpus names the origin of every pair (``id, origin, kind, clean``); a selection
``{method}.{N}`` keeps the pair id in its fourth column. Counting the selected ids by group - the
origin for clean pairs (``clean:multi30k``), the kind for the rest (``misaligned``,
``machine_translated``, ``paracrawl_E`` ...) - shows *why* two methods give different BLEU: how much
noise each let through, and which clean domain it preferred (a test set rewards its own domain).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .democorpus import read_label_rows
from .errors import InputError
from .selection import parse_count
from .textio import open_binary, open_text_out
from .safeio import write_text

UNLABELLED = "unlabelled"


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


def read_groups(labels_tsv: str | Path) -> dict[str, str]:
    """Sidecar ``id, origin, kind, clean`` -> pair id -> group (``clean:<origin>`` or the noise kind)."""
    return {row["id"]: f"clean:{row['origin']}" if row["clean"] == "1" else row["kind"]
            for row in read_label_rows(labels_tsv)}


def count_groups(ids: Iterable[str], groups: Mapping[str, str]) -> dict[str, int]:
    """Selected ids per group; ids the sidecar does not know count as :data:`UNLABELLED`."""
    return dict(Counter(groups.get(i, UNLABELLED) for i in ids))


def selection_ids(path: str | Path, column: int = 3) -> list[str]:
    """The pair ids of a selection TSV (``src, tgt, score, id``; gz allowed)."""
    ids = []
    with open_binary(path) as fh:
        for no, raw in enumerate(fh, 1):
            fields = raw.decode("utf-8").rstrip("\r\n").split("\t")
            if len(fields) <= column:
                raise InputError(str(path), f"has {len(fields)} columns, the pair id is column {column + 1}",
                                 line=no, hint="pass select_top's <method>.<N>.tsv.gz")
            ids.append(fields[column])
    return ids


def selection_name(path: str | Path) -> tuple[str, str]:
    """``.../ratio.20k.tsv.gz`` -> (``ratio``, ``20k``)."""
    name = Path(path).name
    for suffix in (".gz", ".tsv"):
        name = name.removesuffix(suffix)
    method, _, n = name.partition(".")
    if not n:
        raise InputError(str(path), "is not named <method>.<N>.tsv[.gz]")
    return method, n


def write_composition(rows: Sequence[Composition], tsv: str | Path, md: str | Path, title: str = "") -> None:
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
    write_text(md, "\n".join(lines) + "\n")
