"""How many pairs to keep: each scorer's estimated clean share (:mod:`marginmine.evaluate.cleanshare`)
over a whole corpus, from its score files and the noise baselines written beside them
(``marginmine score --baseline``), as tables and a retained-count curve.

For every scorer: the estimated noise share of the corpus, the estimated clean share of the top N
at each configured N and of the pairs at or above each configured threshold, and the largest N
whose estimated clean share is at least each target (90%, 50%); the curve gives, at thresholds
spread over the corpus' scores, how many pairs a threshold keeps, how many of them the baseline
says are noise, and the estimated clean share. Memory: the distinct scores of one column at a time
(:class:`marginmine.evaluate.cleanshare.ScoreCounts`), read one shard at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marginmine.defaults import CLEAN_TARGETS
from marginmine.errors import InputError, MarginmineError
from marginmine.evaluate.cleanshare import ScoreCounts, largest_n_at, noise_share, share_at
from marginmine.io.safe import write_text
from marginmine.scoring.files import read_score_names, read_scores
from marginmine.scoring.metrics import roc_auc

log = logging.getLogger(__name__)

#: thresholds of the retained-count curve (quantiles of the corpus' scores)
CURVE_POINTS = 101


def read_counts(files: Sequence[str | Path], name: str) -> ScoreCounts | None:
    """The distribution of column ``name`` over ``files`` (one shard at a time; empty shards add
    nothing; ``None`` if every file is empty)."""
    total: ScoreCounts | None = None
    for f in files:
        values = read_scores(f, name)
        if len(values):
            part = ScoreCounts.of(values, str(f))
            total = part if total is None else total.merged(part)
    return total


def scorer_columns(groups: Sequence[Sequence[str | Path]], baselines: Sequence[Sequence[str | Path]],
                   names: Sequence[str] = ()) -> dict[str, tuple[list[str], list[str]]]:
    """``{scorer: (score files, baseline files)}`` from groups of shard files (one group per
    encoder, shard order) and their baselines; ``names`` (if given) chooses and orders the scorers."""
    if len(groups) != len(baselines):
        raise MarginmineError(f"{len(groups)} group(s) of score files but {len(baselines)} of baselines: give "
                              "one baseline group per score group, in the same order")
    out: dict[str, tuple[list[str], list[str]]] = {}
    for files, noise in zip(groups, baselines):
        if len(files) != len(noise):
            raise MarginmineError(f"--baselines {noise[0] if noise else ''} ...: {len(noise)} file(s) for "
                                  f"{len(files)} score files (one baseline per score file, same order)")
        if not files:
            continue
        cols = read_score_names(files[0])
        for f, b in zip(files, noise):
            if read_score_names(b) != cols:
                raise InputError(str(b), f"names the columns {read_score_names(b)}, its score file {f} {cols}",
                                 line=1, hint="score the shard again with --baseline (the two are written together)")
        for c in cols:
            if c in out:
                raise MarginmineError(f"score column {c} is in two groups ({out[c][0][0]}, {files[0]}): give each "
                                      "scorer's score files once")
            out[c] = ([str(f) for f in files], [str(b) for b in noise])
    if names:
        missing = [n for n in names if n not in out]
        if missing:
            raise MarginmineError(f"no score column {', '.join(missing)} in the score files (their columns: "
                                  f"{', '.join(out)})")
        out = {n: out[n] for n in names}
    return out


@dataclass(frozen=True)
class ScorerEstimate:
    """One scorer's estimates: ``rows`` for the summary table, ``curve`` for the retained-count curve."""

    name: str
    rows: list[dict[str, object]]
    curve: list[dict[str, object]]


def estimate(name: str, s: ScoreCounts, b: ScoreCounts, sizes: Mapping[str, int],
             thresholds: Sequence[float] = (), targets: Sequence[float] = CLEAN_TARGETS,
             points: int = CURVE_POINTS) -> ScorerEstimate:
    """The summary rows (one per N, threshold and target) and the curve of one scorer."""
    pi0, lam = noise_share(s, b)
    common = {"scorer": name, "pairs": s.n, "baseline_pairs": b.n, "noise_share": pi0, "lambda": lam}
    rows: list[dict[str, object]] = []

    def row(kind: str, label: str, t: float) -> dict[str, object]:
        kept = int(s.at_least(t))
        return {**common, "by": kind, "at": label, "threshold": t, "kept": kept,
                "est_clean_share": float(share_at(s, b, pi0, t)), "est_clean_pairs": None}

    for label, n in sizes.items():
        if n > s.n:
            log.warning("%s: N = %s is above the %d scored pairs: not estimated", name, label, s.n)
            continue
        rows.append(row("N", label, s.lowest_of_top(n)))
    for t in thresholds:
        rows.append(row("threshold", f"{t:g}", float(t)))
    for target in targets:
        n = largest_n_at(s, b, target)
        r = row("target", f"{target:.0%}", s.lowest_of_top(n)) if n else {
            **common, "by": "target", "at": f"{target:.0%}", "threshold": None, "kept": 0,
            "est_clean_share": None, "est_clean_pairs": None}
        rows.append(r)
    for r in rows:
        if r["est_clean_share"] is not None:
            r["est_clean_pairs"] = int(round(float(r["est_clean_share"]) * int(r["kept"])))  # type: ignore[arg-type]
    qs = np.linspace(0, 1, points)
    ts = np.unique(s.values[np.minimum(np.searchsorted(s.cum, np.ceil(qs * s.n), side="left"), len(s.values) - 1)])
    kept, base = s.at_least(ts), b.at_least(ts)
    curve = [{"scorer": name, "threshold": float(t), "kept": int(k), "baseline_at_or_above": float(a / b.n),
              "est_noise_kept": float(pi0 * s.n * a / b.n), "est_clean_share": float(c)}
             for t, k, a, c in zip(ts, kept, base, share_at(s, b, pi0, ts))]
    return ScorerEstimate(name, rows, curve)


def top_masks(s: np.ndarray, counts: ScoreCounts, top_n: Sequence[int]) -> dict[int, np.ndarray]:
    """For each N of ``top_n`` up to ``len(s)``: which of ``s`` are in its top N, the lowest score's
    ties included (as the estimate counts them)."""
    return {n: s >= counts.lowest_of_top(n) for n in top_n if n <= len(s)}


def labelled_check(data: str, scores: Mapping[str, np.ndarray], noise: Mapping[str, np.ndarray],
                   positive: np.ndarray, top_n: Sequence[int],
                   also: Mapping[str, np.ndarray] | None = None) -> list[dict[str, object]]:
    """The estimate beside labels: for each scorer with a baseline in ``noise``, the whole set's
    clean share (labelled; estimated: one minus the noise share) and, for each N of ``top_n`` up to
    the set's size, the top N's (its lowest score's ties included, as the estimate counts them).
    ``also``: further labellings (a column each: the share of the kept pairs they mark)."""
    positive = np.asarray(positive, bool)
    rows: list[dict[str, object]] = []
    for name, s in scores.items():
        if name not in noise:
            continue
        counts, base = ScoreCounts.of(s, name), ScoreCounts.of(noise[name], f"{name} baseline")
        pi0, _ = noise_share(counts, base)
        kept = [(f"{n}", top) for n, top in top_masks(s, counts, top_n).items()]
        for at, top in [("all", np.ones(len(s), bool)), *kept]:
            t = float(s[top].min())
            est = float(share_at(counts, base, pi0, t)) if at != "all" else 1.0 - pi0
            lab = float(positive[top].mean())
            rows.append({"data": data, "scorer": name, "N": at, "kept": int(top.sum()), "labelled": lab,
                         "estimated": est, "estimated - labelled": est - lab,
                         **{k: float(np.asarray(v, bool)[top].mean()) for k, v in (also or {}).items()}})
    return rows


def baseline_by_group(data: str, scores: Mapping[str, np.ndarray], noise: Mapping[str, np.ndarray],
                      codes: np.ndarray, groups: Sequence[str], top_n: Sequence[int]) -> list[dict[str, object]]:
    """Why the estimate is off where it is: per scorer and labelled group (``codes`` index
    ``groups``), the group's pairs, their median score, the share below lambda (the baseline's
    median: 0.5 for pairs that score like random re-pairings, 0 for pairs well above), the ROC-AUC of
    the group against the baseline, and the group's share of each top N."""
    rows: list[dict[str, object]] = []
    for name, s in scores.items():
        if name not in noise:
            continue
        b = np.asarray(noise[name], np.float64)
        counts = ScoreCounts.of(s, name)
        _, lam = noise_share(counts, ScoreCounts.of(b, f"{name} baseline"))
        tops = top_masks(s, counts, top_n)
        for code in np.unique(codes):
            v = s[codes == code]
            auc = roc_auc(np.r_[v, b], np.r_[np.ones(len(v), bool), np.zeros(len(b), bool)])
            rows.append({"data": data, "scorer": name, "group": groups[code] if code < len(groups) else "unlabelled",
                         "pairs": len(v), "median": float(np.median(v)), "below lambda": float(np.mean(v < lam)),
                         "auc vs baseline": auc,
                         **{f"share of top {n}": float(np.mean(codes[t] == code)) for n, t in tops.items()}})
    return rows


def _fmt(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6f}" if abs(v) < 1e3 else f"{v:.1f}"
    return str(v)


def write_tsv(rows: Sequence[Mapping[str, object]], path: str | Path) -> None:
    fields = list(rows[0]) if rows else []
    write_text(path, "\n".join(["\t".join(fields)] + ["\t".join(_fmt(r[f]) for f in fields) for r in rows]) + "\n")


def summary_md(estimates: Sequence[ScorerEstimate], title: str) -> str:
    """The Markdown table of the summary rows, with the estimator's assumptions stated."""
    lines = [f"# {title}", "",
             "Estimated share of true translations among the pairs a scorer keeps, from a noise baseline: every "
             "scoring batch re-paired at random (seeded) and scored by the same scorer against the same "
             "neighbourhoods. Estimator: Storey's pi0 with lambda = the baseline's median. Assumptions: the "
             "corpus' noise scores like random re-pairings, and no true pair scores below lambda. Noise that "
             "scores above random re-pairings (near-translations, misalignments of related sentences, "
             "near-duplicates) is not seen, so the estimate is an upper bound where such noise exists; true "
             "pairs below lambda make it too low. `target` rows: the largest N whose estimate reaches the "
             "share. docs/choosing-n.md explains the columns.", "",
             "| scorer | pairs | est. noise share | by | at | threshold | kept | est. clean share | est. clean pairs |",
             "|---|---:|---:|---|---|---:|---:|---:|---:|"]
    for e in estimates:
        for r in e.rows:
            share = "" if r["est_clean_share"] is None else f"{float(r['est_clean_share']):.1%}"  # type: ignore[arg-type]
            t = "" if r["threshold"] is None else f"{float(r['threshold']):.4f}"  # type: ignore[arg-type]
            ncl = "" if r["est_clean_pairs"] is None else f"{int(r['est_clean_pairs']):,}"  # type: ignore[call-overload]
            lines.append(f"| {r['scorer']} | {int(r['pairs']):,} | {float(r['noise_share']):.1%} | {r['by']} | "  # type: ignore[call-overload, arg-type]
                         f"{r['at']} | {t} | {int(r['kept']):,} | {share} | {ncl} |")  # type: ignore[call-overload]
    return "\n".join(lines) + "\n"


def clean_share_report(columns: Mapping[str, tuple[Sequence[str], Sequence[str]]], sizes: Mapping[str, int],
                       thresholds: Mapping[str, Sequence[float]], tsv: str | Path, md: str | Path,
                       curve: str | Path | None = None, title: str = "",
                       targets: Sequence[float] = CLEAN_TARGETS) -> list[ScorerEstimate]:
    """Every scorer's estimates (:func:`estimate`) written as TSV + Markdown, the curve as TSV
    (:func:`marginmine.report.curves.plot_curves` draws it)."""
    out = []
    for name, (files, noise) in columns.items():
        s, b = read_counts(files, name), read_counts(noise, name)
        if s is None or b is None:
            raise InputError(str(files[0] if s is None else noise[0]),
                             f"no {'scores' if s is None else 'baseline scores'} of {name} in {len(files)} file(s)",
                             hint="the score files are empty" if s is None else
                             "every batch has fewer than two distinct pairs: no re-pairing, no baseline")
        out.append(estimate(name, s, b, sizes, thresholds.get(name, ()), targets))
        log.info("%s: %d pairs, %d baseline pairs, estimated noise share %.3f", name, s.n, b.n,
                 out[-1].rows[0]["noise_share"])
    write_tsv([r for e in out for r in e.rows], tsv)
    write_text(md, summary_md(out, title or "Estimated clean share by N and threshold"))
    if curve is not None:
        write_tsv([c for e in out for c in e.curve], curve)
    return out
