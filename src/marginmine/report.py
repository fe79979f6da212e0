"""Figures and tables for the Snakemake report (``snakemake --report``).

Pure functions turn parsed data into table rows, HTML and matplotlib figures; reading and writing
files happens only in the ``read_*`` helpers and :func:`write_report_figures` at the end.

* the preprocessing ledger (``ledger.json``): per step and reason, and per source-length bucket;
* score histograms per selection method (the ``select/<method>.<N>.json`` reports), thresholds marked;
* wall time, CPU time, peak memory and throughput per rule from Snakemake's ``benchmark:`` files;
* the result TSVs (encoders, mining benchmark, filtering quality, ...) as readable HTML tables.
"""

from __future__ import annotations

import gzip
import html
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .ledger import Ledger
from .safeio import atomic_path, write_text
from .textio import open_text_out

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

# --- the preprocessing ledger ----------------------------------------------------------------


@dataclass(frozen=True)
class LedgerStep:
    step: str
    pairs_in: int
    kept: int
    reasons: dict[str, int]

    @property
    def removed(self) -> int:
        return self.pairs_in - self.kept


@dataclass(frozen=True)
class LedgerBucket:
    bucket: str
    pairs_in: int
    kept: int
    removed_by_step: dict[str, int]

    @property
    def kept_share(self) -> float:
        return self.kept / self.pairs_in if self.pairs_in else 0.0


@dataclass(frozen=True)
class LedgerView:
    steps: list[LedgerStep]
    buckets: list[LedgerBucket]

    @property
    def pairs_in(self) -> int:
        return self.steps[0].pairs_in if self.steps else 0

    @property
    def kept(self) -> int:
        return self.steps[-1].kept if self.steps else 0


def ledger_view(ledger: Ledger) -> LedgerView:
    """The ledger's step and source-length-bucket tables as the report draws them."""
    steps = [LedgerStep(r["step"], r["in"], r["kept"], r["reasons"]) for r in ledger.step_table()]
    buckets = []
    for r in ledger.bucket_table():
        by_step: dict[str, int] = {}
        for key, n in r["removed"].items():
            step = key.split("/", 1)[0]
            by_step[step] = by_step.get(step, 0) + n
        buckets.append(LedgerBucket(r["bucket"], r["in"], r["kept"], by_step))
    return LedgerView(steps, buckets)


def read_ledger(path: str | Path) -> Ledger:
    """The corpus ledger JSON (``results/<exp>/preprocess/ledger.json``); errors name the file."""
    try:
        return Ledger.read(path)
    except OSError as exc:
        raise InputError(str(path), f"cannot read the ledger ({exc.strerror})") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(str(path), f"is not a marginmine ledger JSON ({exc!r})",
                         hint="pass results/<exp>/preprocess/ledger.json") from exc


def ledger_step_rows(view: LedgerView) -> list[list[str]]:
    """One row per step and one per reason below it: pairs in, removed, % of the step's input,
    % of the whole corpus, kept after the step."""
    total = view.pairs_in or 1
    rows: list[list[str]] = []
    for s in view.steps:
        base = s.pairs_in or 1
        rows.append([s.step, "", _int(s.pairs_in), _int(s.removed), _pct(s.removed / base),
                     _pct(s.removed / total), _int(s.kept)])
        for reason, n in sorted(s.reasons.items(), key=lambda kv: -kv[1]):
            rows.append(["", reason, "", _int(n), _pct(n / base), _pct(n / total), ""])
    rows.append(["total", "", _int(view.pairs_in), _int(view.pairs_in - view.kept),
                 _pct((view.pairs_in - view.kept) / total), _pct((view.pairs_in - view.kept) / total),
                 _int(view.kept)])
    return rows


LEDGER_STEP_HEADER = ["step", "reason", "pairs in", "removed", "% of step input", "% of corpus", "kept"]


def ledger_bucket_rows(view: LedgerView) -> tuple[list[str], list[list[str]]]:
    """Per source-length bucket: pairs in, kept, kept %, then removals by step."""
    steps = [s.step for s in view.steps]
    header = ["source words", "pairs in", "kept", "kept %", *steps]
    rows = [[b.bucket, _int(b.pairs_in), _int(b.kept), _pct(b.kept_share),
             *(_int(b.removed_by_step.get(s, 0)) for s in steps)] for b in view.buckets]
    return header, rows


def ledger_html(view: LedgerView, title: str = "Preprocessing ledger") -> str:
    head = (f"{_int(view.pairs_in)} pairs in, {_int(view.kept)} kept "
            f"({_pct(view.kept / view.pairs_in if view.pairs_in else 0.0)}); every removed pair is counted "
            "once, by the first step that rejects it.")
    bh, br = ledger_bucket_rows(view)
    body = (f"<p>{html.escape(head)}</p>"
            + html_table(LEDGER_STEP_HEADER, ledger_step_rows(view), caption="By step and reason",
                         strong_rows={i for i, r in enumerate(ledger_step_rows(view)) if r[0]})
            + html_table(bh, br, caption="By source length (words of the source side)"))
    return html_page(title, body)


def _mix(rgb: Sequence[float], white: float) -> tuple[float, float, float]:
    r, g, b = rgb[:3]
    return (r + (1 - r) * white, g + (1 - g) * white, b + (1 - b) * white)


def ledger_colours(view: LedgerView) -> tuple[dict[str, tuple[float, float, float]], dict[tuple[str, str], Any]]:
    """One tab10 colour per step; its reasons are lighter shades of it (so both panels match)."""
    plt = _pyplot()
    steps = {s.step: _mix(plt.get_cmap("tab10")(i % 10), 0.0) for i, s in enumerate(view.steps)}
    reasons: dict[tuple[str, str], Any] = {}
    for s in view.steps:
        names = sorted(s.reasons)
        for j, r in enumerate(names):
            reasons[(s.step, r)] = _mix(steps[s.step], 0.55 * j / max(1, len(names)))
    return steps, reasons


def ledger_figure(view: LedgerView) -> Figure:
    """Left: a waterfall of pairs per step (kept grey, removed coloured by step, shaded by reason).
    Right: the share kept per source-length bucket, removals stacked by step."""
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5), dpi=100, gridspec_kw={"width_ratios": [1.35, 1]})
    step_col, reason_col = ledger_colours(view)
    names = [s.step for s in view.steps]
    ypos = list(range(len(names)))[::-1]
    handles, labels = [], []
    for y, s in zip(ypos, view.steps):
        ax1.barh(y, s.kept, color="#d0d0d0", edgecolor="white")
        left = s.kept
        for reason, n in sorted(s.reasons.items()):
            if n:
                h = ax1.barh(y, n, left=left, color=reason_col[(s.step, reason)], edgecolor="white")
                handles.append(h)
                labels.append(f"{s.step}: {reason}")
                left += n
        text = (f"{_int(s.removed)} removed ({_pct(s.removed / s.pairs_in if s.pairs_in else 0.0)})"
                if s.removed else "none removed")
        ax1.text(s.pairs_in + view.pairs_in * 0.01, y, text, va="center", fontsize=8)
    ax1.set_yticks(ypos, names)
    ax1.set_xlabel("pairs (grey: kept after the step)")
    ax1.set_xlim(0, max(view.pairs_in, 1) * 1.32)
    ax1.set_title(f"Pairs removed per step: {_int(view.pairs_in)} in, {_int(view.kept)} kept "
                  f"({_pct(view.kept / view.pairs_in if view.pairs_in else 0.0)})", fontsize=10)
    if handles:
        ax1.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14),
                   ncol=min(4, len(labels)), frameon=False)
    ax1.ticklabel_format(axis="x", style="plain")
    ax1.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:,.0f}"))

    buckets = view.buckets
    x = list(range(len(buckets)))
    bottom = [b.kept_share * 100 for b in buckets]
    ax2.bar(x, bottom, color="#d0d0d0", label="kept")
    for xi, v in zip(x, bottom):
        if v >= 8:
            ax2.text(xi, v / 2, f"{v:.0f}% kept", ha="center", va="center", fontsize=8)
    for step in names:
        vals = [100 * b.removed_by_step.get(step, 0) / b.pairs_in if b.pairs_in else 0.0 for b in buckets]
        if any(vals):
            ax2.bar(x, vals, bottom=bottom, color=step_col[step], label=f"removed: {step}")
            bottom = [a + v for a, v in zip(bottom, vals)]
    for xi, b in zip(x, buckets):
        ax2.text(xi, 101, f"n={_int(b.pairs_in)}", ha="center", va="bottom", fontsize=7)
    ax2.set_xticks(x, [b.bucket for b in buckets])
    ax2.set_xlabel("source length (words)")
    ax2.set_ylabel("% of the bucket's pairs")
    ax2.set_ylim(0, 112)
    ax2.set_title("Kept share by source length", fontsize=10)
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, frameon=False)
    fig.tight_layout()
    return fig


# --- score histograms of the selections --------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    method: str
    n: str
    requested: int | None
    threshold: float | None
    selected: int
    total: int
    counts: list[int]
    edges: list[float]


def parse_selection(obj: Mapping[str, Any], n: str = "", source: str = "selection") -> Selection:
    """A ``marginmine select --report`` JSON object (``n``: the size label, e.g. ``20k``)."""
    try:
        hist = obj["histogram"]
        counts, edges = [int(c) for c in hist["counts"]], [float(e) for e in hist["edges"]]
        sel = Selection(str(obj["method"]), n or str(obj.get("requested") or "all"), obj.get("requested"),
                        None if obj.get("threshold") is None else float(obj["threshold"]),
                        int(obj["selected"]), int(obj["total"]), counts, edges)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(source, f"is not a selection report ({exc!r} missing or malformed)") from exc
    if len(edges) != len(counts) + 1:
        raise InputError(source, f"histogram has {len(counts)} counts but {len(edges)} edges (need counts + 1)")
    return sel


@dataclass(frozen=True)
class HistogramPanel:
    """One method: its score histogram (the same for every N) and one threshold per selection."""

    method: str
    counts: list[int]
    edges: list[float]
    total: int
    thresholds: list[tuple[str, float | None, int]] = field(default_factory=list)  # (N, threshold, selected)

    @property
    def centres(self) -> list[float]:
        return [(a + b) / 2 for a, b in zip(self.edges, self.edges[1:])]


def histogram_panels(selections: Iterable[Selection], order: Sequence[str] = ()) -> list[HistogramPanel]:
    """Group selections by method (configured order first, then by name); thresholds sorted by N."""
    from .selection import parse_count

    by_method: dict[str, list[Selection]] = {}
    for s in selections:
        by_method.setdefault(s.method, []).append(s)
    rank = {m: i for i, m in enumerate(order)}
    panels = []
    for method in sorted(by_method, key=lambda m: (rank.get(m, len(rank)), m)):
        sels = sorted(by_method[method], key=lambda s: _count_or_inf(parse_count, s.n))
        first = sels[0]
        panels.append(HistogramPanel(method, first.counts, first.edges, first.total,
                                     [(s.n, s.threshold, s.selected) for s in sels]))
    return panels


def _count_or_inf(parse: Any, text: str) -> float:
    try:
        return float(parse(text))
    except Exception:  # noqa: BLE001 - "all" (unfiltered) sorts last
        return math.inf


def histogram_figure(panels: Sequence[HistogramPanel], title: str = "") -> Figure:
    """One panel per method: score histogram, each selection's threshold as a dashed line with the
    share of pairs kept; the selected side shaded for the largest threshold."""
    plt = _pyplot()
    n = max(1, len(panels))
    cols = 2 if n > 1 else 1
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.3 * rows), dpi=100, squeeze=False)
    for ax, p in zip(axes.flat, panels):
        widths = [b - a for a, b in zip(p.edges, p.edges[1:])]
        ax.bar(p.edges[:-1], p.counts, width=widths, align="edge", color="#7b9fc7", edgecolor="#5577a0",
               linewidth=0.4)
        ax.set_title(f"{p.method}: {_int(p.total)} pairs scored", fontsize=10)
        ax.set_xlabel("seeded random score" if p.method in ("random", "unfiltered") else f"{p.method} score")
        ax.set_ylabel("pairs")
        styles = ["--", ":", "-.", (0, (5, 1))]
        for i, (n_label, t, selected) in enumerate(p.thresholds):
            share = selected / p.total if p.total else 0.0
            if t is None or not math.isfinite(t):
                ax.text(0.98, 0.92 - 0.1 * i, f"no threshold: all {_int(selected)} pairs kept",
                        transform=ax.transAxes, ha="right", fontsize=8)
                continue
            ax.axvline(t, color="#c0392b", linestyle=styles[i % len(styles)], linewidth=1.3,
                       label=f"top {n_label}: t={t:.3f}, {_int(selected)} kept ({_pct(share)})")
        finite = [t for _, t, _ in p.thresholds if t is not None and math.isfinite(t)]
        if finite:
            ax.axvspan(min(finite), p.edges[-1], color="#c0392b", alpha=0.08)
            ax.legend(fontsize=8, loc="upper left", frameon=False)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def selection_rows(selections: Iterable[Selection]) -> list[list[str]]:
    return [[s.method, s.n, "" if s.threshold is None else f"{s.threshold:.4f}", _int(s.selected), _int(s.total),
             _pct(s.selected / s.total if s.total else 0.0)] for s in selections]


SELECTION_HEADER = ["method", "N", "threshold", "selected", "scored", "selected %"]

# --- benchmarks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkRun:
    rule: str
    job: str
    seconds: float
    cpu_seconds: float | None
    max_rss_mb: float | None


#: benchmark file (relative to the benchmark directory, without .tsv) -> rule and job label
RULE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"preprocess/shard(?P<job>\d+)", "preprocess_shard"),
    (r"embed/shard(?P<job>\d+)", "embed_shard"),
    (r"score/shard(?P<job>\d+)", "score_shard"),
    (r"select/(?P<job>.+)", "select_top"),
    (r"train_encoder/(?P<job>.+)", "train_encoder"),
    (r"eval_encoder/(?P<job>.+)", "eval_encoder"),
    (r"mining_eval/data", "mining_benchmark_data"),
    (r"mining_eval/eval", "eval_mining"),
    (r"filter_eval", "eval_filter"),
    (r"nmt/(?P<job>.+)\.train", "train_nmt"),
    (r"nmt/(?P<job>.+)\.evaluate", "evaluate_nmt"),
    (r"nmt/bleu_(?P<job>.+)", "headline_bleu"),
    (r"nmt/comparison", "compare_methods"),
)

#: pipeline order of the rules in the table (unknown rules follow, by name)
RULE_ORDER = (
    "download", "extract_member", "fetch_sacrebleu", "demo_corpus", "split_corpus", "preprocess_shard",
    "preprocess_ledger", "check_overlap", "tatoeba_share", "encoder_data", "train_encoder", "eval_encoder",
    "encoder_report", "embed_shard", "score_shard", "select_top", "mining_benchmark_data", "eval_mining",
    "eval_filter", "train_nmt", "evaluate_nmt", "headline_bleu", "compare_methods", "report_figures",
)

#: rules whose item count is known, and the unit counted
ITEM_UNITS = {
    "split_corpus": "pairs read",
    "preprocess_shard": "pairs in",
    "embed_shard": "pairs (both sides)",
    "score_shard": "pairs",
    "select_top": "pairs scanned",
}


def rule_of(relpath: str) -> tuple[str, str]:
    """``(rule, job)`` of a benchmark file path relative to the benchmark directory (no ``.tsv``).
    Unknown paths: a top-level file names its rule; otherwise the first directory does."""
    for pattern, rule in RULE_PATTERNS:
        m = re.fullmatch(pattern, relpath)
        if m:
            return rule, m.groupdict().get("job") or ""
    head, _, rest = relpath.partition("/")
    return head, rest


def parse_benchmark_tsv(text: str, rule: str, job: str, source: str = "benchmark") -> BenchmarkRun:
    """A Snakemake benchmark TSV (``s, h:m:s, max_rss, ..., cpu_time``); repeated runs are averaged
    (wall and CPU time) and their peak memory maximised."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise InputError(source, "is not a Snakemake benchmark file (no data row)")
    header = lines[0].split("\t")
    if "s" not in header:
        raise InputError(source, "is not a Snakemake benchmark file (no 's' column)")
    rows = [dict(zip(header, ln.split("\t"))) for ln in lines[1:]]

    def col(name: str) -> list[float]:
        out = []
        for r in rows:
            try:
                out.append(float(r[name]))
            except (KeyError, ValueError):  # "NA" when psutil could not measure
                pass
        return out

    secs = col("s")
    if not secs:
        raise InputError(source, "has no wall time in column 's'")
    cpu, rss = col("cpu_time"), col("max_rss")
    return BenchmarkRun(rule, job, sum(secs) / len(secs), sum(cpu) / len(cpu) if cpu else None,
                        max(rss) if rss else None)


@dataclass(frozen=True)
class RuleSummary:
    rule: str
    jobs: int
    wall_s: float
    max_job_s: float
    cpu_s: float | None
    max_rss_mb: float | None
    items: int | None = None
    item_wall_s: float = 0.0  # wall time of the jobs whose items are known
    unit: str = ""

    @property
    def items_per_s(self) -> float | None:
        return self.items / self.item_wall_s if self.items is not None and self.item_wall_s > 0 else None


def summarise_benchmarks(runs: Iterable[BenchmarkRun], items: Mapping[tuple[str, str], int]) -> list[RuleSummary]:
    """One row per rule, in pipeline order. Throughput = items of the jobs whose count is known /
    those jobs' summed wall time; rules without known counts get none."""
    by_rule: dict[str, list[BenchmarkRun]] = {}
    for r in runs:
        by_rule.setdefault(r.rule, []).append(r)
    rank = {r: i for i, r in enumerate(RULE_ORDER)}
    out = []
    for rule in sorted(by_rule, key=lambda r: (rank.get(r, len(rank)), r)):
        rs = by_rule[rule]
        known = [r for r in rs if (r.rule, r.job) in items]
        cpus = [r.cpu_seconds for r in rs if r.cpu_seconds is not None]
        rsss = [r.max_rss_mb for r in rs if r.max_rss_mb is not None]
        out.append(RuleSummary(
            rule, len(rs), sum(r.seconds for r in rs), max(r.seconds for r in rs), sum(cpus) if cpus else None,
            max(rsss) if rsss else None, sum(items[(r.rule, r.job)] for r in known) if known else None,
            sum(r.seconds for r in known), ITEM_UNITS.get(rule, "items") if known else ""))
    return out


BENCHMARK_HEADER = ["rule", "jobs", "wall time", "wall s", "longest job s", "CPU s", "peak RSS MB", "items",
                    "items/s", "unit"]


def benchmark_rows(summary: Sequence[RuleSummary]) -> list[list[str]]:
    rows = [[s.rule, str(s.jobs), _hms(s.wall_s), f"{s.wall_s:.1f}", f"{s.max_job_s:.1f}",
             "" if s.cpu_s is None else f"{s.cpu_s:.1f}", "" if s.max_rss_mb is None else f"{s.max_rss_mb:.0f}",
             "" if s.items is None else _int(s.items),
             "" if s.items_per_s is None else f"{s.items_per_s:,.0f}", s.unit] for s in summary]
    total = sum(s.wall_s for s in summary)
    rows.append(["total", str(sum(s.jobs for s in summary)), _hms(total), f"{total:.1f}", "", "", "", "", "", ""])
    return rows


def benchmark_job_rows(runs: Iterable[BenchmarkRun], items: Mapping[tuple[str, str], int]) -> list[list[str]]:
    rank = {r: i for i, r in enumerate(RULE_ORDER)}
    out = []
    for r in sorted(runs, key=lambda r: (rank.get(r.rule, len(rank)), r.rule, r.job)):
        n = items.get((r.rule, r.job))
        out.append([r.rule, r.job, f"{r.seconds:.1f}", "" if r.cpu_seconds is None else f"{r.cpu_seconds:.1f}",
                    "" if r.max_rss_mb is None else f"{r.max_rss_mb:.0f}", "" if n is None else _int(n),
                    "" if n is None or r.seconds <= 0 else f"{n / r.seconds:,.0f}"])
    return out


BENCHMARK_JOB_HEADER = ["rule", "job", "wall s", "CPU s", "peak RSS MB", "items", "items/s"]


def benchmark_html(summary: Sequence[RuleSummary], job_rows: Sequence[Sequence[str]], title: str = "") -> str:
    note = ("Wall time is summed over a rule's jobs (jobs may have run in parallel). Throughput is items "
            "per second of wall time, where the item count is known: pairs read (split_corpus), pairs in "
            "(preprocess_shard), kept pairs of the shard (embed_shard: both sides; score_shard), pairs "
            "scanned (select_top).")
    body = (f"<p>{html.escape(note)}</p>"
            + html_table(BENCHMARK_HEADER, benchmark_rows(summary), caption="Per rule",
                         strong_rows={len(summary)})
            + html_table(BENCHMARK_JOB_HEADER, job_rows, caption="Per job", text_columns={1}))
    return html_page(title or "Wall time and throughput per rule", body)


# --- generic tables ----------------------------------------------------------------------------

#: readable titles of the result tables the report renders, by file name
TABLE_TITLES = {
    "intrinsic.tsv": "Encoders: intrinsic evaluation (error %, cosine and ratio margin)",
    "bucc.tsv": "Mining benchmark (BUCC-style): precision / recall / F1 on the test split",
    "quality.tsv": "Filtering quality: ROC-AUC and precision at top-N",
    "comparison.tsv": "BLEU by selection method and size",
    "composition.tsv": "What each selection is made of: pairs and share by origin (clean) or noise kind",
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

_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;font-size:14px;margin:1.2em;color:#222}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;margin:0.6em 0 1.4em 0}
caption{text-align:left;font-weight:600;padding:0.3em 0}
th,td{border-bottom:1px solid #ddd;padding:3px 9px}
th{background:#f3f5f8;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.strong td{font-weight:600;background:#fafafa}
p{max-width:60em}
"""


def html_page(title: str, body: str) -> str:
    """A self-contained HTML page (inline CSS, no external resources)."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>\n")


def tables_html(sections: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]]]], title: str) -> str:
    """Several titled tables on one page."""
    body = "".join(f"<h2>{html.escape(t)}</h2>" + html_table(h, r) for t, h, r in sections)
    return html_page(title, body or "<p>No result tables yet.</p>")


# --- formatting helpers --------------------------------------------------------------------------


def _int(n: int) -> str:
    return f"{n:,}"


def _pct(x: float) -> str:
    if 0 < x < 0.0005:
        return "<0.1%"
    return f"{100 * x:.1f}%"


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# --- I/O at the edges ---------------------------------------------------------------------------


def _read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot be read ({exc.strerror or exc})") from exc


def read_selection(path: str | Path) -> Selection:
    """``<method>.<N>.json``: the size label comes from the file name."""
    p = Path(path)
    try:
        obj = json.loads(_read_text(p))
    except ValueError as exc:
        raise InputError(str(p), f"is not JSON ({exc})") from exc
    stem = p.name.removesuffix(".json")
    method, _, n = stem.partition(".")
    return parse_selection(obj, n if n else "", str(p))


def read_benchmarks(bench_dir: str | Path) -> list[BenchmarkRun]:
    """Every ``**/*.tsv`` below the benchmark directory (a missing directory: none)."""
    root = Path(bench_dir)
    runs = []
    for p in sorted(root.rglob("*.tsv")) if root.is_dir() else []:
        rel = p.relative_to(root).as_posix().removesuffix(".tsv")
        rule, job = rule_of(rel)
        runs.append(parse_benchmark_tsv(_read_text(p), rule, job, str(p)))
    return runs


def _count_lines(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:  # type: ignore[operator]
        return sum(1 for _ in fh)


def item_counts(work_dir: str | Path, selections: Iterable[Selection]) -> dict[tuple[str, str], int]:
    """Known item counts per (rule, job) from the files the jobs wrote: the split and shard
    ledgers (pairs in; kept pairs = lines of ``kept/shardNNNN.tsv.gz``, counted from the file
    when its ledger is missing) and the selection reports (pairs scanned)."""
    work = Path(work_dir)
    items: dict[tuple[str, str], int] = {}
    split = work / "preprocess" / "split" / "ledger.json"
    if split.is_file():
        items[("split_corpus", "")] = int(json.loads(_read_text(split))["pairs_in"])
    ledgers = {p.name.removeprefix("shard").removesuffix(".json"): p
               for p in (work / "preprocess" / "ledger").glob("shard*.json")}
    kept_files = {p.name.removeprefix("shard").removesuffix(".tsv.gz"): p
                  for p in (work / "preprocess" / "kept").glob("shard*.tsv.gz")}
    for shard in sorted(set(ledgers) | set(kept_files)):
        kept: int | None = None
        if shard in ledgers:
            obj = json.loads(_read_text(ledgers[shard]))
            items[("preprocess_shard", shard)] = int(obj["pairs_in"])
            kept = int(obj["kept"])
        elif shard in kept_files:
            kept = _count_lines(kept_files[shard])
        if kept is not None:
            items[("embed_shard", shard)] = items[("score_shard", shard)] = kept
    for s in selections:
        items[("select_top", f"{s.method}.{s.n}")] = s.total
    return items


@dataclass(frozen=True)
class ReportOutputs:
    ledger_png: Path
    ledger_html: Path
    histograms_png: Path
    tables_html: Path
    benchmarks_html: Path
    benchmarks_tsv: Path

    @classmethod
    def in_dir(cls, outdir: str | Path) -> ReportOutputs:
        d = Path(outdir)
        return cls(d / "ledger.png", d / "ledger.html", d / "score_histograms.png", d / "tables.html",
                   d / "benchmarks.html", d / "benchmarks.tsv")


def write_report_figures(ledger_json: str | Path, selection_files: Sequence[str | Path],
                         bench_dir: str | Path, work_dir: str | Path, outdir: str | Path,
                         tables: Sequence[str | Path] = (), methods: Sequence[str] = (),
                         title: str = "") -> ReportOutputs:
    """Read the workflow's results, write every figure and table; returns the paths written."""
    out = ReportOutputs.in_dir(outdir)
    Path(outdir).mkdir(parents=True, exist_ok=True)
    prefix = f"{title}: " if title else ""

    view = ledger_view(read_ledger(ledger_json))
    fig = ledger_figure(view)
    with atomic_path(out.ledger_png) as tmp:
        fig.savefig(tmp, format="png")
    _pyplot().close(fig)
    write_text(out.ledger_html, ledger_html(view, f"{prefix}preprocessing ledger"))

    selections = [read_selection(p) for p in selection_files]
    fig = histogram_figure(histogram_panels(selections, methods), f"{prefix}score distributions and selections")
    with atomic_path(out.histograms_png) as tmp:
        fig.savefig(tmp, format="png")
    _pyplot().close(fig)

    sections: list[tuple[str, Sequence[str], Sequence[Sequence[str]]]] = []
    if selections:
        sections.append(("Selections: threshold and pairs kept per method and size", SELECTION_HEADER,
                         selection_rows(selections)))
    for t in tables:
        header, rows = parse_tsv(_read_text(t))
        sections.append((TABLE_TITLES.get(Path(t).name, str(t)), header, rows))
    write_text(out.tables_html, tables_html(sections, f"{prefix}result tables"))

    runs = read_benchmarks(bench_dir)
    items = item_counts(work_dir, selections)
    summary = summarise_benchmarks(runs, items)
    write_text(out.benchmarks_html,
               benchmark_html(summary, benchmark_job_rows(runs, items), f"{prefix}wall time and throughput per rule"))
    with open_text_out(out.benchmarks_tsv) as fh:
        fh.write("\t".join(["rule", "jobs", "wall_s", "max_job_s", "cpu_s", "max_rss_mb", "items", "items_per_s",
                            "unit"]) + "\n")
        for s in summary:
            vals = [s.rule, str(s.jobs), f"{s.wall_s:.2f}", f"{s.max_job_s:.2f}",
                    "" if s.cpu_s is None else f"{s.cpu_s:.2f}",
                    "" if s.max_rss_mb is None else f"{s.max_rss_mb:.1f}",
                    "" if s.items is None else str(s.items),
                    "" if s.items_per_s is None else f"{s.items_per_s:.1f}", s.unit]
            fh.write("\t".join(vals) + "\n")
    return out
