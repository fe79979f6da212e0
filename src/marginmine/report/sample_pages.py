"""The samples as TSV files and as one HTML page of the report, with the texts escaped for each
(:mod:`marginmine.io.markup`: shown, never run, in HTML; one line per pair in TSV); a cell's
direction follows its first strong letter (``dir="auto"``), so right-to-left sentences read right to
left and no text can reorder the page around it."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path

from marginmine.io.markup import html_page, tsv_field, visible_html
from marginmine.io.text import format_tsv_line, open_text_out
from marginmine.preprocess.removed import Removed
from marginmine.report.samples import Drawn, PairText

# --- TSV ---------------------------------------------------------------------------------------

SCORE_HEADER = ("scorer", "section", "label", "rank", "score", "kept", "other", "other_rank", "other_score",
                "shard", "line", "src", "tgt", "extra")
REMOVED_HEADER = ("step", "reason", "raw_line", "shard", "shard_line", "src", "tgt", "extra")


def _score_fields(d: Drawn, p: PairText) -> list[str]:
    other = [d.other, str(d.other_rank), f"{d.other_score:.6f}"] if d.other else ["", "", ""]
    return [d.scorer, d.section, d.label, str(d.rank), f"{d.score:.6f}", "yes" if d.kept else "no", *other,
            str(p.shard), str(p.line), p.src, p.tgt, p.extra]


def _removed_fields(r: Removed) -> list[str]:
    shard = "" if r.file < 0 else str(r.file)
    return [r.step, r.reason, "" if r.raw_line is None else str(r.raw_line), shard,
            "" if r.file < 0 else str(r.line), r.src, r.tgt, r.extra]


def write_tsv(path: str | Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    with open_text_out(path) as out:
        out.write(format_tsv_line(header))
        for row in rows:
            out.write(format_tsv_line([tsv_field(c) for c in row]))


def score_rows(drawn: Sequence[Drawn], texts: dict[int, PairText]) -> list[list[str]]:
    return [_score_fields(d, texts[d.index]) for d in drawn]


def removed_rows(removed: Sequence[Removed]) -> list[list[str]]:
    return [_removed_fields(r) for r in removed]


# --- HTML --------------------------------------------------------------------------------------

_CSS = ("<style>td.text{white-space:pre-wrap;max-width:38em;unicode-bidi:isolate}"
        "span.cc{color:#a40;background:#fde8d8;font-size:0.8em;border-radius:2px;padding:0 1px}"
        "td.kept{color:#064}td.dropped{color:#a00}nav a{margin-right:1em}</style>")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], text_columns: set[int],
           cls: Callable[[Sequence[str]], str] | None = None) -> str:
    out = ["<table><thead><tr>", *(f"<th>{html.escape(h)}</th>" for h in header), "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for j, c in enumerate(row):
            if j in text_columns:
                cells.append(f'<td class="text" dir="auto">{visible_html(c)}</td>')
            else:
                extra = f' class="{cls(row)}"' if cls and header[j] == "kept" else ""
                cells.append(f"<td{extra}>{visible_html(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _kept_class(row: Sequence[str]) -> str:
    return "kept" if row[2] == "yes" else "dropped"


def _groups(rows: Sequence[Sequence[str]], key: Callable[[Sequence[str]], object]) -> dict[object, list[Sequence[str]]]:
    out: dict[object, list[Sequence[str]]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def samples_html(title: str, score: Sequence[Sequence[str]], disagree: Sequence[Sequence[str]],
                 removed: Sequence[Sequence[str]], sizes: Sequence[str]) -> str:
    """The page: removed pairs per preprocessing step, pairs by score per scorer, disagreements.
    The rows are those written to the TSVs (unescaped), :data:`SCORE_HEADER` / :data:`REMOVED_HEADER`."""
    h = html.escape
    n_text = ", ".join(sizes) or "none"
    body = [_CSS, '<nav><a href="#removed">Removed by preprocessing</a><a href="#scores">By score</a>'
                  '<a href="#disagree">Where two scorers disagree</a></nav>',
            "<p>Pairs to read beside the numbers, drawn reproducibly (the same on every run). Invisible "
            "and layout-changing characters are shown as <span class=\"cc\">[U+XXXX]</span> markers (hover for "
            "their names); the same rows are in the TSV files of <code>samples/</code>.</p>",
            '<h2 id="removed">Removed by preprocessing: a seeded sample per step</h2>']
    if not removed:
        body.append("<p>No pair was removed.</p>")
    for step, rows in _groups(removed, lambda r: r[0]).items():
        body.append(f"<h3>{h(str(step))} ({len(rows)} sampled)</h3>")
        body.append(_table(("reason", "raw line", "shard", "shard line", "source", "target", "carried"),
                           [r[1:] for r in rows], {4, 5, 6}))
    body.append(f'<h2 id="scores">By score: pairs at score quantiles and at the top-N boundary (N = {h(n_text)})</h2>'
                "<p>Rank 1 is the best pair; ties are ranked in corpus order, as the selection breaks them. "
                "Quantile q: q of the pairs score lower; <em>kept</em> there says whether the first N keeps the "
                "pair. Boundary: the last pairs the top N keeps and the first it drops.</p>")
    for scorer, rows in _groups(score, lambda r: r[0]).items():
        body.append(f"<h3>{h(str(scorer))}</h3>")
        body.append(_table(("label", "rank", "kept", "score", "source", "target", "carried"),
                           [[r[2], r[3], r[5], r[4], r[11], r[12], r[13]] for r in rows], {4, 5, 6}, _kept_class))
    body.append('<h2 id="disagree">Where two scorers disagree: kept by one top N, dropped by the other\'s</h2>')
    if not disagree:
        body.append("<p>No two scorers to compare, or they keep the same pairs.</p>")
    for (label, keeps), rows in _groups(disagree, lambda r: (r[2], r[0])).items():  # type: ignore[misc]
        body.append(f"<h3>{h(label)}: kept by {h(keeps)}, dropped by {h(rows[0][6])}</h3>")
        body.append(_table((f"rank ({keeps})", f"score ({keeps})", f"rank ({rows[0][6]})", f"score ({rows[0][6]})",
                            "source", "target", "carried"),
                           [[r[3], r[4], r[7], r[8], r[11], r[12], r[13]] for r in rows], {4, 5, 6}))
    return html_page(title, "".join(body))
