"""The shortcut check of a fitted scorer: does it tell translations from non-translations within
each domain, or does it tell the domain of its positives from the others?

A fitted scorer (``calibrated``, ``mlp``) learns from positives and negatives that may differ in more
than translation: news positives against web-crawl negatives can be told apart by domain alone,
and such a scorer ranks any news pair, aligned or not, above a well-aligned caption. The check
scores clean pairs of several domains - each *origin* of a labelled set (the clean-mix test set's
``origin`` column) and the scorer's own kept-out positives (``positives_check.tsv`` of its head) -
and the same pairs re-paired at random within their group (a seeded single cycle,
:func:`marginmine.scoring.kinds.repairing`: no pair keeps its own target). Per group:

* ``auc``: the group's true pairs against its re-paired ones (0.5: chance; a scorer that works
  separates them in every domain);
* ``auc_vs_positives``: the group's true pairs against the *positives'* re-paired pairs (below 0.5:
  a wrong pair of the positives' domain outranks a right pair of this one - the domain shortcut);
* both again with the cosine of the same embeddings, the reference.

A group is flagged ``below chance`` when either of the scorer's AUCs is under 0.5, ``far below
cosine`` when either is more than :data:`COSINE_GAP` under cosine's (so a weak encoder, whose cosine
fails too, is not blamed on the scorer), ``too few pairs`` when it has fewer than two pairs to
re-pair (its AUCs are NaN; the row is kept, not dropped), and ``too few positives`` when the
positives have fewer than two (its ``*_vs_positives`` are NaN, its own AUCs still judged).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from marginmine.errors import InputError

#: how far under cosine's within-group AUC a scorer's may fall before the group is flagged
COSINE_GAP = 0.2
POSITIVES = "positives (kept out)"
COLUMNS = ("scorer", "group", "pairs", "median_true", "median_repaired", "auc", "auc_vs_positives",
           "cosine_auc", "cosine_auc_vs_positives", "flag")

Score = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Group:
    """One domain's clean pairs, as embeddings (row i of ``u`` translates row i of ``v``)."""

    name: str
    u: np.ndarray
    v: np.ndarray


def _cosine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", np.asarray(u, np.float64), np.asarray(v, np.float64))


def _repaired(g: Group, seed: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    from marginmine.scoring.kinds import repairing

    return g.u, g.v[repairing(len(g.u), seed)]


def shortcut_rows(scorer: str, score: Score, groups: Sequence[Group], positives: Group,
                  seed: int) -> list[dict[str, Any]]:
    """A row per group and one for ``positives`` (last), as the module describes."""
    from marginmine.scoring.metrics import roc_auc

    def auc(pos: np.ndarray, neg: np.ndarray) -> float:
        return roc_auc(np.r_[pos, neg], np.r_[np.ones(len(pos), bool), np.zeros(len(neg), bool)])

    everything = [*groups, positives]  # group i is re-paired by the seed (seed, i)
    ref = ({f: np.asarray(f(*_repaired(positives, (seed, len(groups)))), np.float64) for f in (score, _cosine)}
           if len(positives.u) >= 2 else {})
    rows = []
    nan = float("nan")
    for i, g in enumerate(everything):
        if len(g.u) < 2:  # nothing to re-pair: a row saying so
            rows.append({"scorer": scorer, "group": g.name, "pairs": len(g.u), "median_true": nan,
                         "median_repaired": nan, "auc": nan, "auc_vs_positives": nan, "cosine_auc": nan,
                         "cosine_auc_vs_positives": nan, "flag": "too few pairs"})
            continue
        wrong = _repaired(g, (seed, i))
        found: dict[str, Any] = {}
        for key, f in (("", score), ("cosine_", _cosine)):
            true, other = np.asarray(f(g.u, g.v), np.float64), np.asarray(f(*wrong), np.float64)
            found[f"{key}auc"] = auc(true, other)
            found[f"{key}auc_vs_positives"] = auc(true, ref[f]) if ref else nan  # too few positives: own AUC only
            if not key:
                found["median_true"], found["median_repaired"] = float(np.median(true)), float(np.median(other))
                own = f"{scorer}:" if g is positives else ""  # the positives are this scorer's own pairs
                found["_items"] = ([("own", f"{own}t{j}", 1, v) for j, v in enumerate(true.tolist())]
                                   + [("own", f"{own}r{j}", 0, v) for j, v in enumerate(other.tolist())]
                                   + ([("positives", f"{own}t{j}", 1, v) for j, v in enumerate(true.tolist())]
                                      + [("positives", f"{scorer}:p{j}", 0, v) for j, v in enumerate(ref[f].tolist())]
                                      if ref else []))
        pairs = [(found[c], found[f"cosine_{c}"]) for c in ("auc", "auc_vs_positives") if ref or c == "auc"]
        flag = ("below chance" if min(a for a, _ in pairs) < 0.5 else
                "far below cosine" if any(a < c - COSINE_GAP for a, c in pairs) else
                "" if ref else "too few positives")
        rows.append({"scorer": scorer, "group": g.name, "pairs": len(g.u), **found, "flag": flag})
    return rows


def read_origins(src: Sequence[str], tgt: Sequence[str], labels: str | Path) -> dict[str, tuple[list[str], list[str]]]:
    """The clean pairs of a labelled set (``src``/``tgt`` lines; ``labels`` a TSV with ``origin`` and
    ``clean`` columns, a row per line) grouped by origin, in first-seen order; rows not clean are left
    out (they are not translations)."""
    path = Path(labels)
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    if rows and not {"origin", "clean"} <= set(rows[0]):
        raise InputError(str(path), f"has no origin and clean columns (header: {', '.join(rows[0])})",
                         hint="give the clean-mix set's labels (work/<exp>/corpus/heldout.test.labels.tsv)")
    if len(rows) != len(src) or len(src) != len(tgt):
        raise InputError(str(path), f"has {len(rows)} rows for {len(src)} source and {len(tgt)} target lines",
                         hint="give the labels written with these two files")
    out: dict[str, tuple[list[str], list[str]]] = {}
    for r, a, b in zip(rows, src, tgt):
        if r["clean"] == "1":
            s, t = out.setdefault(r["origin"], ([], []))
            s.append(a)
            t.append(b)
    return out


def write_tables(rows: Sequence[dict[str, Any]], tsv: str | Path, md: str | Path, title: str) -> None:
    """The rows as a TSV and as Markdown with what each column means, and the TSV's items sidecar
    (scorer, group, against, item, label, score: :mod:`marginmine.evaluate.paired`)."""
    from marginmine.io.items import items_path, write_items
    from marginmine.io.safe import write_text

    write_items(items_path(tsv), ("scorer", "group", "against", "item", "label", "score"),
                ((r["scorer"], r["group"], *it) for r in rows for it in r.get("_items", ())))

    def cell(r: dict[str, Any], c: str) -> str:
        v = r[c]
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    write_text(tsv, "".join("\t".join(x) + "\n" for x in
                            [list(COLUMNS), *([cell(r, c) for c in COLUMNS] for r in rows)]))
    lines = [f"# {title}", "",
             "Each fitted scorer on clean pairs of each origin of the clean-mix test set and on its own "
             "kept-out positives, against the same pairs re-paired at random within the group "
             "(`marginmine shortcut-check`). `auc`: the group's true pairs vs its re-paired ones; "
             "`auc_vs_positives`: the group's true pairs vs the positives' re-paired ones (under 0.5: a "
             "wrong pair of the positives' domain outranks a right pair of this one); `cosine_*`: the same "
             "with the cosine of the scorer's embeddings. Flag: `below chance` (an AUC of the scorer under "
             f"0.5), `far below cosine` (an AUC of the scorer more than {COSINE_GAP} under cosine's), `too few "
             "pairs` (under two to re-pair), `too few positives` (under two: no `*_vs_positives`). "
             "Medians are of the scorer's score (a logit for calibrated and mlp).", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r, c) or " " for c in COLUMNS) + " |" for r in rows]
    write_text(md, "\n".join(lines) + "\n")
