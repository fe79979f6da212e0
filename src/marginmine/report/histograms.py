"""Score histograms per selection (the ``select/<method>.<N>.json`` reports), thresholds marked."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from marginmine.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure
from marginmine.report.tables import fmt_int, fmt_pct, pyplot

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
    from marginmine.io.sizes import size_key

    by_method: dict[str, list[Selection]] = {}
    for s in selections:
        by_method.setdefault(s.method, []).append(s)
    rank = {m: i for i, m in enumerate(order)}
    panels = []
    for method in sorted(by_method, key=lambda m: (rank.get(m, len(rank)), m)):
        sels = sorted(by_method[method], key=lambda s: size_key(s.n))
        first = sels[0]
        panels.append(HistogramPanel(method, first.counts, first.edges, first.total,
                                     [(s.n, s.threshold, s.selected) for s in sels]))
    return panels


def histogram_figure(panels: Sequence[HistogramPanel], title: str = "") -> Figure:
    """One panel per method: score histogram, each selection's threshold as a dashed line with the
    share of pairs kept; the selected side shaded for the largest threshold."""
    plt = pyplot()
    n = max(1, len(panels))
    cols = 2 if n > 1 else 1
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.3 * rows), dpi=100, squeeze=False)
    for ax, p in zip(axes.flat, panels):
        widths = [b - a for a, b in zip(p.edges, p.edges[1:])]
        ax.bar(p.edges[:-1], p.counts, width=widths, align="edge", color="#7b9fc7", edgecolor="#5577a0",
               linewidth=0.4)
        ax.set_title(f"{p.method}: {fmt_int(p.total)} pairs scored", fontsize=10)
        ax.set_xlabel("seeded random score" if p.method in ("random", "unfiltered") else f"{p.method} score")
        ax.set_ylabel("pairs")
        styles = ["--", ":", "-.", (0, (5, 1))]
        for i, (n_label, t, selected) in enumerate(p.thresholds):
            share = selected / p.total if p.total else 0.0
            if t is None or not math.isfinite(t):
                ax.text(0.98, 0.92 - 0.1 * i, f"no threshold: all {fmt_int(selected)} pairs kept",
                        transform=ax.transAxes, ha="right", fontsize=8)
                continue
            ax.axvline(t, color="#c0392b", linestyle=styles[i % len(styles)], linewidth=1.3,
                       label=f"top {n_label}: t={t:.3f}, {fmt_int(selected)} kept ({fmt_pct(share)})")
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
    return [[s.method, s.n, "" if s.threshold is None else f"{s.threshold:.4f}", fmt_int(s.selected), fmt_int(s.total),
             fmt_pct(s.selected / s.total if s.total else 0.0)] for s in selections]


SELECTION_HEADER = ["method", "N", "threshold", "selected", "scored", "selected %"]

