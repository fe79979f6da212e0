"""The retained-count curve of each scorer (:mod:`marginmine.evaluate.cleanreport`) as a figure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from marginmine.evaluate.cleanreport import ScorerEstimate
from marginmine.report.tables import pyplot


def plot_curves(estimates: Sequence[ScorerEstimate], png: str | Path, title: str = "") -> None:
    """One panel per scorer: pairs kept at each threshold, the noise the baseline expects among
    them, and (right axis) the estimated clean share."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(estimates), figsize=(4.2 * len(estimates), 3.8), squeeze=False)
    handles: list = []
    for ax, e in zip(axes[0], estimates):
        t = [c["threshold"] for c in e.curve]
        kept = ax.plot(t, [c["kept"] for c in e.curve], label="pairs kept (score >= threshold)")
        noise = ax.plot(t, [c["est_noise_kept"] for c in e.curve], "--", label="of them noise (baseline)")
        ax.set_xlabel(f"{e.name} threshold")
        ax.set_ylabel("pairs")
        ax.set_title(e.name)
        right = ax.twinx()
        share = right.plot(t, [c["est_clean_share"] for c in e.curve], ":", color="black",
                           label="estimated clean share (right)")
        right.set_ylim(0, 1.02)
        handles = handles or kept + noise + share
    fig.legend(handles, [h.get_label() for h in handles], loc="lower center", ncol=3, fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    Path(png).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
