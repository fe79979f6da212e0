"""The audit's estimate written out: a row per configured N and threshold (precision with its 95%
interval, expected good pairs), the largest N whose interval's lower end meets the target, the
label counts, a plot of precision against N with its band; and the labels filled from a corpus'
own label sidecar where that stands in for a person (the demo)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from marginmine.evaluate.audit import DRAWS, LEVEL, Audit

TITLE = "How many pairs to keep: the labelled audit"


def estimate(audit: Audit, scorer: str, sizes: Sequence[int], thresholds: Mapping[str, int], target: float,
             seed: int, draws: int = DRAWS) -> dict:
    """The estimate's rows (each N of ``sizes``, then each threshold with the N it keeps), the largest
    N at ``target`` and the label counts. An N above the ranking's size is left out (``skipped``); an
    N inside a stratum (not one of the sample's edges) takes a proportional share of the stratum's
    estimate (``within stratum``)."""
    cuts = [("N", str(n), int(n)) for n in sizes] + [("threshold", t, int(n)) for t, n in thresholds.items()]
    skipped = [f"{k} {v}" for k, v, n in cuts if not 1 <= n <= audit.n]
    cuts = [c for c in cuts if 1 <= c[2] <= audit.n]
    p = audit.precision([c[2] for c in cuts], draws, seed)
    rows = []
    for j, (kind, value, n) in enumerate(cuts):
        rows.append({"scorer": scorer, "cut": kind, "value": value, "N": n,
                     "precision": round(float(p.point[j]), 4), "low": round(float(p.low[j]), 4),
                     "high": round(float(p.high[j]), 4), "expected good": int(round(float(p.good[j]))),
                     "good low": int(np.floor(p.low[j] * n)), "good high": int(np.ceil(p.high[j] * n)),
                     "within stratum": "no" if n in audit.edges else "yes"})
    return {"scorer": scorer, "pairs": audit.n, "target": target, "level": LEVEL,
            "largest_n": audit.largest_n(target, draws, seed), "labels": audit.counts(), "rows": rows,
            "skipped": skipped}


def summary_line(result: dict) -> str:
    """One line for the report."""
    c = result["labels"]
    head = (f"{result['scorer']}: the largest N whose precision's {result['level']:.0%} lower bound is at least "
            f"{result['target']:g}: {result['largest_n']:,} of {result['pairs']:,} pairs")
    cuts = "; ".join(f"{r['cut']} {r['value']}: {r['precision']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"
                     for r in result["rows"])
    return (f"{head}" + (f" ({cuts})" if cuts else "")
            + f"; labels: {c['good']} good, {c['bad']} bad, {c['unsure']} unsure (left out), "
              f"{c['unlabelled']} unlabelled")


def write_estimate(result: dict, audit: Audit, tsv: str | Path, md: str | Path, png: str | Path,
                   json_path: str | Path, note: str = "", draws: int = DRAWS, seed: int = 0) -> None:
    """The table (TSV, Markdown with the summary line and ``note``), the result as JSON, the plot."""
    from marginmine.io.markup import md_table
    from marginmine.io.safe import write_text

    cols = ["scorer", "cut", "value", "N", "precision", "low", "high", "expected good", "good low", "good high",
            "within stratum"]
    rows = [[str(r[c]) for c in cols] for r in result["rows"]]
    write_text(tsv, "\t".join(cols) + "\n" + "".join("\t".join(r) + "\n" for r in rows))
    skipped = (f"Not estimated: {', '.join(result['skipped'])} (above the {result['pairs']:,} ranked pairs).\n\n"
               if result.get("skipped") else "")
    text = (f"# {TITLE}\n\n{summary_line(result)}.\n\n" + (f"{note}\n\n" if note else "") + skipped
            + "Precision of the top N estimated from the labelled sample, stratified over the ranking ("
            + ("rates fitted monotone in the rank" if audit.monotone else "each stratum its own rate")
            + "), 95% intervals from Jeffreys posterior draws (docs/choosing-n.md); "
              "`good low`/`good high`: the interval as pairs; `within stratum`: N is not an edge of the sample's "
              "strata, its stratum's estimate is shared in proportion.\n\n" + "\n".join(md_table(cols, rows)) + "\n")
    write_text(md, text)
    write_text(json_path, json.dumps(result, indent=1) + "\n")
    _plot(audit, result, png, draws, seed)


def _plot(audit: Audit, result: dict, png: str | Path, draws: int, seed: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.unique(np.round(np.geomspace(1, audit.n, 200)).astype(np.int64))
    p = audit.precision(grid, draws, seed)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.fill_between(grid, p.low, p.high, alpha=0.25, label=f"{result['level']:.0%} interval")
    ax.plot(grid, p.point, label="estimated precision of the top N")
    ax.axhline(result["target"], color="grey", ls=":", label=f"target {result['target']:g}")
    if result["largest_n"]:
        ax.axvline(result["largest_n"], color="C3", ls="--", label=f"largest N at target: {result['largest_n']:,}")
    ranks = audit.ranks + 1
    ax.scatter(ranks[audit.labels == 1], np.full((audit.labels == 1).sum(), 1.02), marker="|", s=30, color="C2",
               label="labelled good")
    ax.scatter(ranks[audit.labels == 0], np.full((audit.labels == 0).sum(), -0.02), marker="|", s=30, color="C3",
               label="labelled bad")
    ax.set(xscale="log", xlabel="N (top N of the ranking)", ylabel="precision", ylim=(-0.05, 1.05),
           title=f"{result['scorer']}: {result['pairs']:,} pairs, {len(audit.ranks)} labels")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    Path(png).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(png).with_name(Path(png).name + ".part.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(png)


def fill_from_sidecar(sample_tsv: str | Path, sidecar: str | Path, out_tsv: str | Path) -> dict[str, int]:
    """The sample with each pair's label taken from a label sidecar (``clean`` 1 = good, 0 = bad):
    a corpus' own labels standing in for a person. An id the sidecar lacks is an error."""
    from marginmine.errors import InputError
    from marginmine.evaluate.audit_files import read_sample
    from marginmine.io.labels import PairLabels
    from marginmine.io.text import open_text_out

    labels = PairLabels.read(sidecar)
    header, body = read_sample(sample_tsv, ("id", "label"))
    ci, cl = header.index("id"), header.index("label")
    pos = labels.positions(r[ci] for r in body)
    if (pos < 0).any():
        first = int(np.flatnonzero(pos < 0)[0])
        raise InputError(str(sample_tsv), f"pair id {body[first][ci]!r} is not in {sidecar}", line=first + 2,
                         hint="fill the sample of the corpus this sidecar belongs to")
    out = {"good": 0, "bad": 0}
    with open_text_out(out_tsv) as w:
        w.write("\t".join(header) + "\n")
        for r, p in zip(body, pos):
            r[cl] = "good" if labels.clean[p] else "bad"
            out[r[cl]] += 1
            w.write("\t".join(r) + "\n")
    return out
