"""The result TSVs (encoders, mining benchmark, filtering quality, ...) as readable HTML tables, and
the formatting helpers the report's tables share."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from marginmine.io.markup import html_page

# --- generic tables ----------------------------------------------------------------------------

#: readable titles of the result tables the report renders, by file name
TABLE_TITLES = {
    "intrinsic.tsv": "Encoders: intrinsic evaluation (error %, cosine and ratio margin)",
    "bucc.tsv": "Mining benchmark (BUCC-style): precision / recall / F1 on the test split",
    "quality.tsv": "Filtering quality: ROC-AUC and precision at top-N",
    "comparison.tsv": "BLEU and chrF by selection method and size",
    "composition.tsv": "What each selection is made of: pairs and share by origin (clean) or noise kind",
    "clean_share.tsv": "Estimated clean share by N, threshold and target (noise baseline; an upper bound)",
    "clean_share_check.tsv": "Estimated (noise baseline) vs labelled clean share",
    "baseline_groups.tsv": "Each labelled group's scores against the noise baseline",
    "estimate.tsv": "The labelled audit: precision of the top N with its 95% interval (docs/choosing-n.md)",
}


def parse_tsv(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return [], []
    return lines[0].split("\t"), [ln.split("\t") for ln in lines[1:]]


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "",
               strong_rows: set[int] | frozenset[int] = frozenset(),
               text_columns: set[int] | frozenset[int] = frozenset()) -> str:
    """An HTML table; numeric-looking cells are right-aligned, except in ``text_columns``."""
    out = ["<table>"]
    if caption:
        out.append(f"<caption>{html.escape(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>")
    for i, row in enumerate(rows):
        cls = ' class="strong"' if i in strong_rows else ""
        cells = "".join(f'<td class="num">{html.escape(c)}</td>'
                        if j not in text_columns and _NUMERIC.fullmatch(c.strip())
                        else f"<td>{html.escape(c)}</td>" for j, c in enumerate(row))
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


_NUMERIC = re.compile(r"[-+]?[\d,]*\.?\d+(e[-+]?\d+)?%?")

def tables_html(sections: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]]]], title: str,
                caps: Sequence[str] = ()) -> str:
    """Several titled tables on one page, under the time-cap warnings of the models they are built on."""
    from marginmine.timecap import caps_html

    body = "".join(f"<h2>{html.escape(t)}</h2>" + html_table(h, r) for t, h, r in sections)
    return html_page(title, caps_html(caps) + (body or "<p>No result tables yet.</p>"))


# --- formatting helpers --------------------------------------------------------------------------


def fmt_int(n: int) -> str:
    return f"{n:,}"


def fmt_pct(x: float) -> str:
    if 0 < x < 0.0005:
        return "<0.1%"
    return f"{100 * x:.1f}%"


def fmt_hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


