"""Per-item outcomes beside an evaluation table, for significance tests between its rows.

A table ``X.tsv`` (intrinsic retrieval errors, BUCC-style mining, labelled-pair quality, the shortcut
check) summarises many items - sentences, source sentences of a pool, labelled pairs - into one
number per row. Its sidecar ``X.items.tsv.gz`` (:func:`items_path`) keeps the items behind each row,
one line per item: the row's key columns (the same names and values as the table's), ``item`` (an id
shared by the rows that saw the same item, which makes a test paired) and the statistic's inputs
(:mod:`marginmine.evaluate.paired` says which table writes which). Written by the table's writer in
the same job, read by ``marginmine claims``; a table without a sidecar has no per-item test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from marginmine.errors import InputError


def items_path(table: str | Path) -> Path:
    """``X.items.tsv.gz`` beside the table ``X.tsv``."""
    p = Path(table)
    stem = p.name[:-4] if p.name.endswith(".tsv") else p.name
    return p.with_name(f"{stem}.items.tsv.gz")


def write_items(path: str | Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """A gzipped TSV (atomic: written whole or not at all); floats with 7 significant digits."""
    from marginmine.io.text import open_text_out

    def cell(v: object) -> str:
        return f"{v:.7g}" if isinstance(v, float) else str(v)

    with open_text_out(path) as fh:
        fh.write("\t".join(header) + "\n")
        for r in rows:
            if len(r) != len(header):
                raise ValueError(f"{path}: an item row has {len(r)} fields for {len(header)} columns")
            fh.write("\t".join(cell(v) for v in r) + "\n")


def read_items(path: str | Path, where: Sequence[Mapping[str, str]] | None = None) -> list[dict[str, str]]:
    """The sidecar's lines as dicts (column -> text); with ``where``, only the lines whose columns
    equal one of its selectors' values (a selector naming a column the file lacks matches none), so a
    large sidecar is never held whole. A missing header is an error naming the file."""
    import gzip

    with (gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz")
          else open(path, encoding="utf-8")) as fh:
        head = fh.readline().rstrip("\n").split("\t")
        if head == [""]:
            raise InputError(str(path), "empty items file (no header)", hint="rebuild its table with the workflow")
        index = {c: i for i, c in enumerate(head)}
        tests = None if where is None else [[(index[k], v) for k, v in s.items()] for s in where
                                            if all(k in index for k in s)]
        rows = []
        for n, line in enumerate(fh, 2):
            cells = line.rstrip("\n").split("\t")
            if len(cells) != len(head):
                raise InputError(str(path), f"{len(cells)} fields for {len(head)} columns", line=n,
                                 hint="rebuild its table with the workflow")
            if tests is None or any(all(cells[i] == v for i, v in t) for t in tests):
                rows.append(dict(zip(head, cells)))
    return rows
