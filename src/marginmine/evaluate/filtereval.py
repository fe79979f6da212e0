"""How well a filter's scores separate good pairs from bad ones: ROC-AUC and precision at top-N.

Two real labelled sets: the ParaCrawl v3 human evaluation (label ``V`` = valid; BiCleaner,
Zipporah and hunalign scores shipped in the same rows, so they are compared on exactly the same
pairs), and the demo noisy corpus, whose sidecar labels say which pairs are clean.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from marginmine.errors import InputError
from marginmine.io.labels import PairLabels
from marginmine.io.safe import write_text
from marginmine.io.text import open_binary, open_text_out
from marginmine.scoring.metrics import precision_at, roc_auc

log = logging.getLogger(__name__)

#: columns of paracrawl-v3-validation-data.sorted.*.tsv
PARACRAWL_COLUMNS = ("url_src", "url_tgt", "src", "tgt", "hunalign", "zipporah", "bicleaner", "label", "comment")
SHIPPED_SCORES = ("bicleaner", "zipporah", "hunalign")
#: 0-based columns of the two sentences (what translate-then-vote translates)
PARACRAWL_SIDES = {"src": PARACRAWL_COLUMNS.index("src"), "tgt": PARACRAWL_COLUMNS.index("tgt")}


@dataclass(frozen=True)
class LabelledPairs:
    src: list[str]
    tgt: list[str]
    positive: np.ndarray
    shipped: dict[str, np.ndarray]
    #: each pair's human label as given (V valid; the others name what is wrong)
    labels: tuple[str, ...] = ()


def read_paracrawl_eval(path: str | Path) -> LabelledPairs:
    """The ParaCrawl v3 human-evaluation TSV (9 columns; label V = valid)."""
    src, tgt, labels = [], [], []
    shipped: dict[str, list[float]] = {k: [] for k in SHIPPED_SCORES}
    with open_binary(path) as fh:
        for n, raw in enumerate(fh, 1):
            cols = raw.decode("utf-8").rstrip("\n").split("\t")
            if len(cols) < 8:
                raise InputError(str(path), f"has {len(cols)} columns, expected {len(PARACRAWL_COLUMNS)}", line=n)
            row = dict(zip(PARACRAWL_COLUMNS, cols))
            src.append(row["src"])
            tgt.append(row["tgt"])
            labels.append(row["label"].strip())
            for k in SHIPPED_SCORES:
                try:
                    shipped[k].append(float(row[k]))
                except ValueError as exc:
                    raise InputError(str(path), f"column {k} is not a number: {row[k]!r}", line=n) from exc
    return LabelledPairs(src, tgt, np.array([lab == "V" for lab in labels]),
                         {k: np.asarray(v) for k, v in shipped.items()}, tuple(labels))


def demo_positives(labels_path: str | Path, pairs: Sequence[str | Path], id_column: int) -> np.ndarray:
    """Whether each pair of the shards ``pairs`` (in order; its id in TSV column ``id_column``) is
    labelled clean in the sidecar ``labels_path`` (held as :class:`marginmine.io.labels.PairLabels`).
    A pair id the sidecar lacks is an error naming the first one's shard and line and how many
    there are."""
    return demo_labels(labels_path, pairs, id_column)[0]


def demo_labels(labels_path: str | Path, pairs: Sequence[str | Path],
                id_column: int) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """:func:`demo_positives`, each pair's group code and the groups' names (``clean:<origin>`` or
    the noise kind, :func:`marginmine.io.labels.group_of`)."""
    from marginmine.io.text import iter_sentences

    labels = PairLabels.read(labels_path)
    pos = labels.positions(i for p in pairs for i in iter_sentences(p, column=id_column))
    missing = np.flatnonzero(pos < 0)
    if len(missing):
        index = int(missing[0])
        for p in pairs:
            for line, pid in enumerate(iter_sentences(p, column=id_column), 1):
                if index == 0:
                    raise InputError(str(p), f"{len(missing)} pair ids (e.g. {pid!r}) are not in {labels_path}",
                                     line=line, hint="score the shards of the corpus this sidecar belongs to")
                index -= 1
    return labels.clean[pos], labels.codes[pos].astype(np.int64), labels.groups


def quality_rows(name: str, scores: dict[str, np.ndarray], positive: np.ndarray,
                 top_n: Sequence[int], ids: np.ndarray | None = None) -> list[dict[str, object]]:
    """One row per scorer: data set, scorer, pairs, positives, ROC-AUC, precision at each N; and
    under ``_items`` each pair's id (``ids``: its index in the data set, default its position), label
    and score (the items sidecar's, not a column)."""
    rows = []
    for scorer, values in scores.items():
        row: dict[str, object] = {"data": name, "scorer": scorer, "pairs": len(values),
                                  "positives": int(np.asarray(positive).sum()), "auc": roc_auc(values, positive),
                                  "_items": (np.arange(len(values)) if ids is None else np.asarray(ids),
                                             np.asarray(positive, bool), np.asarray(values, np.float64))}
        for n in top_n:
            row[f"p@{n}"] = precision_at(values, positive, n) if n <= len(values) else None
        rows.append(row)
    return rows


def write_quality_table(rows: Sequence[dict[str, object]], tsv: str | Path, md: str | Path, title: str) -> None:
    """The table as TSV and Markdown; rows from :func:`quality_rows` also give the items sidecar
    (data, scorer, item, label, score: :mod:`marginmine.evaluate.paired`)."""
    from marginmine.io.items import items_path, write_items

    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields and not k.startswith("_")]
    itemised = [r for r in rows if "_items" in r]
    if itemised:
        write_items(items_path(tsv), ("data", "scorer", "item", "label", "score"),
                    ((r["data"], r["scorer"], int(i), int(label), float(score))
                     for r in itemised for i, label, score in zip(*r["_items"])))  # type: ignore[call-overload]

    def fmt(v: object) -> str:
        return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))

    with open_text_out(tsv) as fh:
        fh.write("\t".join(fields) + "\n")
        for r in rows:
            fh.write("\t".join(fmt(r.get(f)) for f in fields) + "\n")
    lines = [f"# {title}", "", "| " + " | ".join(fields) + " |", "|" + "---|" * len(fields)]
    lines += ["| " + " | ".join(fmt(r.get(f)) for f in fields) + " |" for r in rows]
    write_text(md, "\n".join(lines) + "\n")
