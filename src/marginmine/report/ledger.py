"""The report's preprocessing-ledger figure and table (``ledger.json``): removals per step and reason,
and per source-length bucket."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marginmine.errors import InputError
from marginmine.preprocess.ledger import Ledger

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure
from marginmine.io.markup import html_page
from marginmine.report.tables import fmt_int, fmt_pct, html_table, pyplot

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
        rows.append([s.step, "", fmt_int(s.pairs_in), fmt_int(s.removed), fmt_pct(s.removed / base),
                     fmt_pct(s.removed / total), fmt_int(s.kept)])
        for reason, n in sorted(s.reasons.items(), key=lambda kv: -kv[1]):
            rows.append(["", reason, "", fmt_int(n), fmt_pct(n / base), fmt_pct(n / total), ""])
    rows.append(["total", "", fmt_int(view.pairs_in), fmt_int(view.pairs_in - view.kept),
                 fmt_pct((view.pairs_in - view.kept) / total), fmt_pct((view.pairs_in - view.kept) / total),
                 fmt_int(view.kept)])
    return rows


LEDGER_STEP_HEADER = ["step", "reason", "pairs in", "removed", "% of step input", "% of corpus", "kept"]


def ledger_bucket_rows(view: LedgerView) -> tuple[list[str], list[list[str]]]:
    """Per source-length bucket: pairs in, kept, kept %, then removals by step."""
    steps = [s.step for s in view.steps]
    header = ["source words", "pairs in", "kept", "kept %", *steps]
    rows = [[b.bucket, fmt_int(b.pairs_in), fmt_int(b.kept), fmt_pct(b.kept_share),
             *(fmt_int(b.removed_by_step.get(s, 0)) for s in steps)] for b in view.buckets]
    return header, rows


def ledger_html(view: LedgerView, title: str = "Preprocessing ledger") -> str:
    head = (f"{fmt_int(view.pairs_in)} pairs in, {fmt_int(view.kept)} kept "
            f"({fmt_pct(view.kept / view.pairs_in if view.pairs_in else 0.0)}); every removed pair is counted "
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
    plt = pyplot()
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
    plt = pyplot()
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
        text = (f"{fmt_int(s.removed)} removed ({fmt_pct(s.removed / s.pairs_in if s.pairs_in else 0.0)})"
                if s.removed else "none removed")
        ax1.text(s.pairs_in + view.pairs_in * 0.01, y, text, va="center", fontsize=8)
    ax1.set_yticks(ypos, names)
    ax1.set_xlabel("pairs (grey: kept after the step)")
    ax1.set_xlim(0, max(view.pairs_in, 1) * 1.32)
    ax1.set_title(f"Pairs removed per step: {fmt_int(view.pairs_in)} in, {fmt_int(view.kept)} kept "
                  f"({fmt_pct(view.kept / view.pairs_in if view.pairs_in else 0.0)})", fontsize=10)
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
        ax2.text(xi, 101, f"n={fmt_int(b.pairs_in)}", ha="center", va="bottom", fontsize=7)
    ax2.set_xticks(x, [b.bucket for b in buckets])
    ax2.set_xlabel("source length (words)")
    ax2.set_ylabel("% of the bucket's pairs")
    ax2.set_ylim(0, 112)
    ax2.set_title("Kept share by source length", fontsize=10)
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, frameon=False)
    fig.tight_layout()
    return fig


