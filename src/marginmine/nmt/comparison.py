"""The comparison of selection methods over training seeds: ``comparison.{tsv,md}``, the per-run table,
the BLEU-vs-N plot, and the headline file ``bleu_<N>.txt``. BLEU and chrF (sacreBLEU's, defaults) side by
side: chrF is computed here from the hypothesis files, so reports written before chrF need no re-decoding.

Inputs are the ``bleu.json`` sidecars of ``marginmine evaluate``, laid out as
``.../nmt/<method>.<N>/seed<S>/bleu.json`` (the directories name the method, the size and the seed;
the seed must agree with the one the model was trained with, ``meta.seed``). Each report names its
hypothesis and reference files per test set; they are re-read and scored here, so every number in
the tables comes from the files the systems wrote (never from a hand computation).

* ``comparison.tsv``/``.md``: per test set (the headline ``test`` first, then its parts by clean
  origin when ``subsets`` are given, then the extra sets), per N and method: mean and sample sd of
  sacreBLEU over seeds, and the two-level bootstrap (training seeds and test sentences,
  :mod:`marginmine.nmt.significance`) of the method against the headline method: difference,
  95% interval, p-value; the same for chrF (``chrf_*`` columns), on the same bootstrap rounds.
  ``dev`` is not tested (it chose nothing, but it is not a test set either).
  The Markdown names the machines the systems were trained and decoded on (BLEU differs between
  CPU models).
* ``comparison_runs.tsv``: one row per trained system (method, N, seed): pairs, updates, training
  seconds, dev loss, sacreBLEU and chrF on every set (chrF blank in reports written before it), and the
  train and decode machines (``marginmine.machine``).
* ``comparison.png``: mean dev BLEU (test where no dev) against N, one line per method, sd as bars.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from marginmine.errors import InputError, MarginmineError
from marginmine.io.safe import atomic_path, write_text
from marginmine.io.sizes import parse_count
from marginmine.nmt.metrics import BLEU_METRIC, CHRF_METRIC
from marginmine.nmt.significance import (
    SeedRun,
    SeedSummary,
    SeedTableRow,
    SignificanceResult,
    SignificanceSettings,
    read_hypotheses,
    read_reference,
    seed_comparison,
    seed_table_tsv,
    summarize_seeds,
)
from marginmine.timecap import caps_lines

_SEED_DIR = re.compile(r"^seed(\d+)$")


@dataclass(frozen=True)
class SetScore:
    bleu: float
    tok_bleu: float
    hyp: str
    ref: str
    lines: int
    signature: str = ""
    chrf: float | None = None  # None in reports written before chrF (the tables compute it from ``hyp``)


@dataclass(frozen=True)
class Run:
    """One trained system's ``bleu.json``."""

    method: str
    n: str
    seed: int
    path: str
    pairs: int
    num_updates: int | None
    train_seconds: float | None
    dev_loss: float | None
    sets: dict[str, SetScore]  # "test", "dev" (when decoded) and the extra sets
    #: where it was trained and decoded (``marginmine.machine``); None in reports older than that field
    train_machine: str | None = None
    machine: str | None = None
    #: the warning of a system its time cap cut short (``on_time_cap: warn``; :mod:`marginmine.timecap`)
    time_cap: str | None = None


def read_run(path: str | Path) -> Run:
    """A ``<method>.<N>/seed<S>/bleu.json`` report; anything else is refused naming the file."""
    p = Path(path)
    m = _SEED_DIR.match(p.parent.name)
    method, _, n = p.parent.parent.name.partition(".")
    if not m or not n:
        raise InputError(str(p), "is not below a <method>.<N>/seed<S> directory",
                         hint="pass evaluate_nmt's bleu.json files (results/<exp>/nmt/<method>.<N>/seed<S>/bleu.json)")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
        meta = obj.get("meta", {})
        sets = {"test": obj["test"], **({"dev": obj["dev"]} if obj.get("dev") else {}), **(obj.get("extra") or {})}
        scores = {k: SetScore(float(v["bleu"]), float(v["tok_bleu"]), str(v["hyp_file"]), str(v["ref_file"]),
                              int(v["lines"]), str(v.get("signature", "")),
                              None if v.get("chrf") is None else float(v["chrf"])) for k, v in sets.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(str(p), f"not a marginmine evaluate report ({exc!r})",
                         hint="rerun the evaluate_nmt rule that wrote it") from exc
    seed = int(m.group(1))
    if meta.get("seed") is not None and int(meta["seed"]) != seed:
        raise InputError(str(p), f"is in a seed{seed} directory but its model was trained with seed {meta['seed']}",
                         hint="retrain that system (its directory and the model disagree)")
    updates = meta.get("num_updates")
    return Run(method, n, seed, str(p), int(meta.get("train_pairs") or 0), int(updates) if updates else None,
               meta.get("train_seconds_total"), meta.get("dev_loss"), scores, meta.get("train_machine"),
               meta.get("machine"), meta.get("time_cap") or None)


def check_runs(runs: Sequence[Run], headline: str) -> None:
    """Refuse duplicates, a missing headline method, and systems that decoded different test sets."""
    if not runs:
        raise MarginmineError("no runs to compare")
    seen: dict[tuple[str, str, int], str] = {}
    for r in runs:
        key = (r.method, r.n, r.seed)
        if key in seen:
            raise InputError(r.path, f"{r.method}.{r.n} seed {r.seed} is also given as {seen[key]}")
        seen[key] = r.path
    if headline not in {r.method for r in runs}:
        raise MarginmineError(f"headline method {headline!r} has no runs (methods: "
                              f"{', '.join(sorted({r.method for r in runs}))})")
    by_system: dict[tuple[str, str], set[str]] = {}
    for r in runs:
        sets = set(r.sets)
        first = by_system.setdefault((r.method, r.n), sets)
        if first != sets:
            raise InputError(r.path, f"decoded {sorted(sets)} but another seed of {r.method}.{r.n} decoded "
                             f"{sorted(first)}", hint="every seed of a system must decode the same sets")


def compare_runs(runs: Sequence[Run], headline: str, subsets: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
                 settings: SignificanceSettings = SignificanceSettings()) -> list[SeedTableRow]:
    """The seed table over every test set the runs decoded (``dev`` excluded)."""
    check_runs(runs, headline)
    seed_runs = [SeedRun(r.method, r.n, r.seed, name, s.hyp, s.ref)
                 for r in runs for name, s in r.sets.items() if name != "dev"]
    rows = seed_comparison(seed_runs, headline, settings, subsets)
    order = {name: i for i, name in enumerate(_set_order(rows))}
    return sorted(rows, key=lambda r: order[r.test_set])  # stable: keeps N and method order within a set


def _set_order(rows: Sequence[SeedTableRow]) -> list[str]:
    names = list(dict.fromkeys(r.test_set for r in rows))
    return sorted(names, key=lambda t: (t.split("/")[0] != "test", t.split("/")[0], "/" in t, t))


def _f(v: float | None, digits: int = 2) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def runs_tsv(runs: Sequence[Run]) -> str:
    sets = sorted({k for r in runs for k in r.sets}, key=lambda k: (k != "test", k != "dev", k))
    header = ["method", "N", "seed", "pairs", "updates", "train_s", "dev_loss", *(f"{s}_bleu" for s in sets),
              *(f"{s}_chrf" for s in sets), "train_machine", "decode_machine"]
    lines = ["\t".join(header)]
    for r in sorted(runs, key=lambda r: (parse_count(r.n), r.method, r.seed)):
        lines.append("\t".join([r.method, r.n, str(r.seed), str(r.pairs),
                                "" if r.num_updates is None else str(r.num_updates),
                                _f(r.train_seconds, 0), _f(r.dev_loss, 3),
                                *(_f(r.sets[s].bleu) if s in r.sets else "" for s in sets),
                                *(_f(r.sets[s].chrf) if s in r.sets else "" for s in sets),
                                r.train_machine or "", r.machine or ""]))
    return "\n".join(lines) + "\n"


#: (method, N, seed, train machine, decode machine) of one trained system
SystemMachines = tuple[str, str, int, str | None, str | None]


def machines_line(systems: Iterable[SystemMachines]) -> str:
    """Where the systems were trained and decoded: floating-point results, and so BLEU, differ from one
    CPU model to another, so a table joining runs of two machines says which ran where."""
    def where(train: str | None, decode: str | None) -> str:
        t, d = train or "not recorded", decode or "not recorded"
        return f"trained and decoded on {t}" if t == d else f"trained on {t}, decoded on {d}"
    systems = list(systems)
    if not systems:
        return ""
    if not any(train or decode for *_, train, decode in systems):
        return "Machine: not recorded (reports written before marginmine.machine)."
    groups: dict[str, list[str]] = {}
    for method, n, seed, train, decode in sorted(systems, key=lambda x: (parse_count(x[1]), x[0], x[2])):
        groups.setdefault(where(train, decode), []).append(f"{method}.{n} seed {seed}")
    if len(groups) == 1:
        return f"Machine: every system {next(iter(groups))}."
    return "Machines (BLEU differs between CPU models): " + "; ".join(
        f"{', '.join(names)} {w}" for w, names in groups.items()) + "."


def run_machines(runs: Iterable[Run]) -> list[SystemMachines]:
    return [(r.method, r.n, r.seed, r.train_machine, r.machine) for r in runs]


def run_caps(runs: Iterable[Run], caps: Iterable[str] = ()) -> list[str]:
    """The time-cap warnings of a table: its systems' own and ``caps`` (e.g. its encoders'), each once."""
    return sorted({*caps, *(r.time_cap for r in runs if r.time_cap)})


def comparison_md(rows: Sequence[SeedTableRow], runs: Sequence[Run], headline: str, title: str = "",
                  settings: SignificanceSettings = SignificanceSettings(), caps: Sequence[str] = ()) -> str:
    per_seed = {(r.method, r.n, r.seed, name): _f(s.bleu) + ("" if s.chrf is None else f" / {s.chrf:.2f}")
                for r in runs for name, s in r.sets.items()}
    out = [f"# BLEU and chrF by selection method{': ' + title if title else ''}", "",
           f"sacreBLEU's BLEU (13a, mixed case) and chrF (chrF2: character n-grams up to 6, no word n-grams, "
           f"beta 2) per test set: mean and sample sd over training seeds; each method "
           f"against the headline method **{headline}** at the same N by a two-level paired bootstrap "
           f"({settings.resamples} rounds: test sentences drawn with replacement, shared by both methods, "
           "and each method's seeds drawn with replacement; BLEU and chrF on the same rounds), difference with its "
           f"{settings.confidence:.0%} interval and two-sided p-value. `test/<origin>` rows score the "
           "clean-mix test's lines of one clean origin. Computed from the hypothesis files by "
           "`marginmine compare` (workflow rule compare_methods).", "",
           f"Signatures: BLEU `{BLEU_METRIC.signature()}`, chrF `{CHRF_METRIC.signature()}`.", "",
           machines_line(run_machines(runs)), *caps_lines(run_caps(runs, caps))]
    current = None
    notes: list[str] = []

    def flush() -> None:
        if notes:
            out.extend(["", *(f"{i}. {n}" for i, n in enumerate(notes, 1))])
            notes.clear()

    for r in rows:
        if r.test_set != current:
            flush()
            current = r.test_set
            out += ["", f"## {current}", "",
                    f"| method | N | seeds | BLEU mean ± sd | per seed (BLEU / chrF) | vs {headline} [CI] | p "
                    f"| chrF mean ± sd | chrF vs {headline} [CI] | chrF p |",
                    "|---|---|---|---|---|---|---|---|---|---|"]
        s, t = r.summary, r.test
        base = r.test_set.split("/")[0]
        seeds = ", ".join(per_seed.get((r.method, r.n, x, base), "") if "/" not in r.test_set else "" for x in s.seeds)
        mean, vs, p = _cells(s, t, r.method == headline)
        c_mean, c_vs, c_p = _cells(r.chrf, r.chrf_test, r.method == headline)
        if r.note:
            if r.note not in notes:
                notes.append(r.note)
            p += f" ({notes.index(r.note) + 1})"
        out.append(f"| {r.method} | {r.n} | {s.n_seeds} | {mean} | {seeds.strip(', ')} | {vs} | {p} "
                   f"| {c_mean} | {c_vs} | {c_p} |")
    flush()
    return "\n".join(out) + "\n"


def _cells(s: SeedSummary | None, t: SignificanceResult | None, bold: bool) -> tuple[str, str, str]:
    """Mean ± sd (bold for the headline), difference [interval] and p of one metric; empty where none."""
    if s is None:
        return "", "", ""
    mean = f"{s.mean:.2f} ± {s.sd:.2f}" if s.sd is not None else f"{s.mean:.2f}"
    vs = "" if t is None else f"{t.diff:+.2f} [{t.low:+.2f}, {t.high:+.2f}]"
    return (f"**{mean}**" if bold else mean), vs, ("" if t is None else f"{t.p_value:.3f}")


def write_comparison(rows: Sequence[SeedTableRow], runs: Sequence[Run], headline: str, tsv: str | Path,
                     md: str | Path, runs_out: str | Path | None = None, png: str | Path | None = None,
                     title: str = "", settings: SignificanceSettings = SignificanceSettings(),
                     caps: Sequence[str] = ()) -> None:
    write_text(tsv, seed_table_tsv(rows))
    write_text(md, comparison_md(rows, runs, headline, title, settings, caps))
    if runs_out:
        write_text(runs_out, runs_tsv(runs))
    if png:
        plot(runs, png, title)


def plot(runs: Sequence[Run], png: str | Path, title: str = "") -> None:
    """Mean dev BLEU (test where no dev) against N, one line per method, sd over seeds as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for method in sorted({r.method for r in runs}):
        by_n: dict[str, list[Run]] = {}
        for r in runs:
            if r.method == method:
                by_n.setdefault(r.n, []).append(r)
        pts = []
        for n, rs in by_n.items():
            s = summarize_seeds({r.seed: (r.sets["dev"] if "dev" in r.sets else r.sets["test"]).bleu for r in rs})
            x = rs[0].pairs if method == "unfiltered" and rs[0].pairs else parse_count(n)
            pts.append((x, s.mean, s.sd or 0.0))
        pts.sort()
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                    label=method)
    ax.set_xscale("log")
    ax.set_xlabel("training pairs (N)")
    ax.set_ylabel("dev BLEU (mean over seeds)")
    ax.set_title(title or "BLEU by selection method")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def read_subsets(specs: Mapping[str, str | Path]) -> dict[str, dict[str, list[int]]]:
    """test set -> labels file (the held-out sidecar: id, origin, kind, clean) -> {origin: lines}."""
    from marginmine.data.cleanmix import origin_lines
    from marginmine.io.text import read_label_rows

    return {name: origin_lines([row["origin"] for row in read_label_rows(path)]) for name, path in specs.items()}


def chrf_of_test(run: Run) -> float:
    """A run's test chrF, computed from its hypothesis and reference files (as the comparison does: a
    report written before chrF has none, and needs no re-decoding for it)."""
    s = run.sets["test"]
    refs = read_reference(s.ref)
    stats = CHRF_METRIC.extract(read_hypotheses(s.hyp, len(refs), s.ref), refs)
    return float(CHRF_METRIC.score(stats.sum(axis=0)))


def headline_text(runs: Sequence[Run], caps: Sequence[str] = ()) -> str:
    """``bleu_<N>.txt``: the mean test sacreBLEU over the headline method's seeds on the first line,
    then the mean chrF, and each seed's numbers and report."""
    if not runs:
        raise MarginmineError("no runs for the headline")
    systems = {(r.method, r.n) for r in runs}
    if len(systems) != 1:
        raise MarginmineError(f"the headline is one method at one N, got {sorted(systems)}")
    check_runs(runs, runs[0].method)
    summary = summarize_seeds({r.seed: r.sets["test"].bleu for r in runs})
    chrf = {r.seed: chrf_of_test(r) for r in runs}
    chrf_summary = summarize_seeds(chrf)
    method, n = next(iter(systems))
    lines = [f"{summary.mean:.2f}", "",
             f"{method}.{n}: test sacreBLEU, mean over {summary.n_seeds} training seed(s)"
             + (f", sd {summary.sd:.2f}" if summary.sd is not None else "") + " (see comparison.md for the tests)",
             f"  sacreBLEU signature: {runs[0].sets['test'].signature}",
             f"  chrF {chrf_summary.mean:.2f}" + (f", sd {chrf_summary.sd:.2f}" if chrf_summary.sd is not None else "")
             + f"  (chrF signature: {CHRF_METRIC.signature()})"]
    for r in sorted(runs, key=lambda r: r.seed):
        lines.append(f"  seed {r.seed}: {r.sets['test'].bleu:.2f}  chrF {chrf[r.seed]:.2f}  ({r.path})")
    lines += [f"  WARNING {c}" for c in run_caps(runs, caps)]
    return "\n".join(lines) + "\n"
