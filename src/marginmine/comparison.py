"""The comparison of selection methods: one row per (method, N) with dev and test BLEU, as a TSV,
a Markdown table and the paper's dev-BLEU-vs-N plot (PNG).

Inputs are the ``bleu.json`` sidecars of ``marginmine evaluate``, laid out as
``.../nmt/<method>.<N>/bleu.json`` (the directory names the method and the size).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .errors import InputError
from .selection import parse_count
from .safeio import atomic_path, write_text
from .textio import open_text_out


@dataclass(frozen=True)
class Row:
    method: str
    n: str
    pairs: int
    dev_bleu: float | None
    test_bleu: float
    tok_test_bleu: float
    extra: dict[str, float]


def read_row(path: str | Path) -> Row:
    p = Path(path)
    method, _, n = p.parent.name.partition(".")
    if not n:
        raise InputError(str(p), "is not below a <method>.<N> directory", hint="pass evaluate_nmt's bleu.json files")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
        test = obj["test"]
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(str(p), f"not a marginmine evaluate report ({exc})") from exc
    dev = obj.get("dev") or None
    return Row(method, n, int(obj.get("meta", {}).get("train_pairs", 0) or 0), dev["bleu"] if dev else None,
               test["bleu"], test["tok_bleu"], {k: v["bleu"] for k, v in (obj.get("extra") or {}).items()})


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def write_comparison(rows: Sequence[Row], tsv: str | Path, md: str | Path, png: str | Path | None,
                     title: str = "") -> None:
    rows = sorted(rows, key=lambda r: (parse_count(r.n), r.method))
    extras = sorted({k for r in rows for k in r.extra})
    header = ["method", "N", "pairs", "dev_bleu", "test_bleu", "test_tok_bleu", *(f"{e}_bleu" for e in extras)]
    with open_text_out(tsv) as fh:
        fh.write("\t".join(header) + "\n")
        for r in rows:
            vals = [r.method, r.n, str(r.pairs), _fmt(r.dev_bleu), _fmt(r.test_bleu), _fmt(r.tok_test_bleu),
                    *(_fmt(r.extra.get(e)) for e in extras)]
            fh.write("\t".join(vals) + "\n")
    lines = [f"# BLEU by selection method{': ' + title if title else ''}", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        vals = [r.method, r.n, f"{r.pairs:,}", _fmt(r.dev_bleu), f"**{r.test_bleu:.2f}**", _fmt(r.tok_test_bleu),
                *(_fmt(r.extra.get(e)) for e in extras)]
        lines.append("| " + " | ".join(vals) + " |")
    write_text(md, "\n".join(lines) + "\n")
    if png:
        plot(rows, png, title)


def plot(rows: Sequence[Row], png: str | Path, title: str = "") -> None:
    """Dev BLEU (test where no dev) against N, one line per method (the paper's Figure 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for method in sorted({r.method for r in rows}):
        pts = sorted((parse_count(r.n) if r.method != "unfiltered" else r.pairs or parse_count(r.n),
                      r.dev_bleu if r.dev_bleu is not None else r.test_bleu) for r in rows if r.method == method)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=method)
    ax.set_xscale("log")
    ax.set_xlabel("training pairs (N)")
    ax.set_ylabel("dev BLEU")
    ax.set_title(title or "BLEU by selection method")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
