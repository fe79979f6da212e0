"""docs/results.md from the tables the pipeline wrote (``marginmine docs-results``, ``make docs-results``).

Every number on the page is a copy of a file the workflow wrote: the demo's tables
(``results/demo/...``, :data:`DEMO`) and the published scorers' suite's (``results/demo/published/``,
:data:`PUBLISHED`). Each section is the file's Markdown (its title becomes the section's heading, its
own notes stay under the table; the ledger, a JSON file, is drawn as the report draws it) under a
stamp line: the file, its modification time (UTC), the machine it came from as the pipeline recorded
it, and the repository's commit at render time. A missing file of the demo is an error; a missing
suite is a line saying which command writes it. The same texts fill the marked blocks of hand-written
pages (:mod:`marginmine.report.blocks`): ``key-result`` (the comparison's clean-mix test rows),
``demo-<key>`` and ``published-<key>`` (a section without its heading).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from marginmine.errors import InputError
from marginmine.io.markup import md_table
from marginmine.report.blocks import utc_text, written_utc
from marginmine.timecap import caps_lines, caps_under

DEMO_HINT = "make demo writes the demo's tables; then run make docs-results"
PUBLISHED_HINT = "`make published` writes them, then `make docs-results` renders them here"


@dataclass(frozen=True)
class Table:
    """One rendered file: ``path`` below its results directory; ``machine``: where the machine it came
    from is recorded - ``runs:<tsv>`` (the NMT systems' train and decode machines), ``translators``
    (the translators' bleu.json, below the experiment's results) or ``run`` (the make invocation's row
    of the part's wall_times.tsv: the table itself records none)."""

    key: str
    path: str
    title: str
    about: str
    machine: str = "run"


DEMO = (
    Table("comparison", "comparison.md", "BLEU and chrF by selection method",
          "BLEU and chrF of the NMT systems trained on each selection: mean and sd over training seeds, and the "
          "two-level paired bootstrap against the headline method (for both metrics). Written by the workflow rule "
          "compare_methods.", "runs:comparison_runs.tsv"),
    Table("ledger", "preprocess/ledger.json", "Preprocessing ledger",
          "What preprocessing removed, by step and reason and by source length; every removed pair is counted "
          "once, by the first step that rejects it. Written by the workflow rule preprocess_ledger (JSON; "
          "drawn here as the HTML report draws it)."),
    Table("intrinsic", "encoders/intrinsic.md", "Encoder intrinsic evaluation",
          "Each encoder's error rate on the intrinsic sets, a trained encoder's random-init twin beside it. "
          "Written by the workflow rule encoder_report."),
    Table("bucc", "mining/bucc.md", "BUCC-style mining",
          "Bitext mining from the newstest pools: precision, recall and F1 on the test split, thresholds from "
          "the train split. Written by the workflow rule eval_mining."),
    Table("quality", "filtering/quality.md", "Filtering quality",
          "Each scorer's ROC-AUC and precision at top-N on human-labelled ParaCrawl pairs and on the demo "
          "corpus' own labels. Written by the workflow rule eval_filter."),
    Table("composition", "select/composition.md", "Selection composition",
          "What each selection is made of, by clean origin and noise kind, from the corpus' labels. Written by "
          "the workflow rule selection_composition."),
    Table("clean-share", "select/clean_share.md", "Estimated clean share by N and threshold",
          "Each scorer's estimated noise share and the estimated clean share of its top N, above its thresholds "
          "and at 90% / 50%, from the noise baseline (docs/choosing-n.md). Written by the workflow rule "
          "clean_share."),
    Table("clean-share-check", "filtering/clean_share_check.md", "Estimated vs labelled clean share",
          "The estimate beside the labelled clean share and the labelled share of translations, on the "
          "ParaCrawl human labels and the demo corpus' labels. Written by the workflow rule eval_filter."),
    Table("baseline-groups", "filtering/baseline_groups.md", "Labelled groups against the noise baseline",
          "Why the estimate is off where it is: each labelled group's median score, share below the "
          "baseline's median, ROC-AUC against the baseline and share of each top N. Written by the workflow "
          "rule eval_filter."),
    Table("audit", "audit/estimate.md", "The labelled audit", "Precision of the audited scorer's top N with 95% "
          "intervals from a labelled sample (docs/choosing-n.md). Written by the workflow rule audit_estimate."),
    Table("wall-times", "wall_times.md", "Wall time",
          "The wall time of each `make demo` invocation (scripts/wall_time.sh)."),
)
#: written with comparison.md and read for the key result and the stamps
DEMO_EXTRA = ("comparison.tsv", "comparison_runs.tsv", "wall_times.tsv")

PUBLISHED = (
    Table("summary", "summary.md", "The suite's summary",
          "One row per system of the suite, joined from the tables below. Written by the workflow rule "
          "published_summary.", "runs:comparison_runs.tsv"),
    Table("comparison", "comparison.md", "BLEU and chrF by selection method",
          "BLEU and chrF of the suite's NMT systems beside the demo's baselines. Written by the workflow rule "
          "published_compare.", "runs:comparison_runs.tsv"),
    Table("intrinsic", "intrinsic.md", "Encoder intrinsic evaluation",
          "The suite's encoders (the ladder, hard negatives) on the intrinsic sets. Written by the workflow rule "
          "published_encoder_report."),
    Table("bucc", "bucc.md", "BUCC-style mining", "The suite's scorers. Written by the workflow rule "
          "published_eval_mining."),
    Table("quality", "quality.md", "Filtering quality", "The suite's scorers. Written by the workflow rule "
          "published_eval_filter."),
    Table("composition", "composition.md", "Selection composition", "The suite's selections. Written by the "
          "workflow rule published_composition."),
    Table("shortcut", "shortcut.md", "Shortcut check of the fitted scorers",
          "Each fitted scorer on the clean-mix test pairs of each origin and on its kept-out positives, against "
          "the same pairs re-paired, beside cosine. Written by the workflow rule published_shortcut."),
    Table("claims", "claims.md", "The papers' claims beside ours",
          "Each seed paper's headline comparison and the same comparison in this run's tables. Written by the "
          "workflow rule published_claims."),
    Table("votes", "votes.md", "Translate-then-vote", "The translators, the candidate sets on the intrinsic sets "
          "and the voted-set sizes. Written by the workflow rule published_vote_report.", "translators"),
    Table("wall-times", "wall_times.md", "Wall time",
          "The wall time of each part of `make published` (scripts/wall_time.sh)."),
)


def display(path: str | Path) -> str:
    """A path as the page names it: relative to the working directory where it lies below it."""
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return p.as_posix()
    return p.as_posix()


# --- where a table's machine is recorded ------------------------------------------------------------


def _joined(machines: list[str]) -> str:
    return ("machine: " if len(machines) == 1 else "machines: ") + "; ".join(machines)


def runs_machines(path: Path) -> list[str]:
    """The train and decode machines of a comparison's runs TSV, in order of appearance."""
    from marginmine.report.summary import read_table

    rows = read_table(path, ["train_machine", "decode_machine"])
    return list(dict.fromkeys(m for r in rows for m in (r["train_machine"], r["decode_machine"]) if m))


def translator_machines(results: Path) -> list[str]:
    """The train and decode machines of the translators' bleu.json (below ``results/translate/``)."""
    import json

    files = sorted(results.glob("translate/*/bleu.json"))
    machines: list[str] = []
    for f in files:
        try:
            meta = json.loads(f.read_text(encoding="utf-8")).get("meta") or {}
        except (OSError, ValueError, AttributeError) as exc:
            raise InputError(str(f), f"not a marginmine evaluate report ({exc})",
                             hint="rerun the evaluate_translator rule that wrote it") from exc
        machines += [m for m in (meta.get("train_machine"), meta.get("machine")) if m]
    return list(dict.fromkeys(machines))


def _utc(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def run_machine(wall_times: Path | None, written: Path) -> str:
    """The machine of the make invocation whose row of ``wall_times`` spans the file's modification
    time; all of the part's machines when none does; ``not recorded`` without the file."""
    from marginmine.report.wall_times import read_rows

    if wall_times is None or not wall_times.is_file():
        return "machine: not recorded (the table records none and no wall_times.tsv names the run's)"
    rows = read_rows(wall_times)
    mtime = datetime.fromtimestamp(written.stat().st_mtime, tz=timezone.utc)
    for r in rows:
        start, end = _utc(r["started"]), _utc(r["ended"])
        if start and end and start.timestamp() - 1 <= mtime.timestamp() <= end.timestamp() + 1:
            return (f"machine: {r['machine']} (the make invocation that wrote it: `{display(wall_times)}`; "
                    "the table records none)")
    machines = list(dict.fromkeys(r["machine"] for r in rows if r["machine"]))
    if not machines:
        return f"machine: not recorded (`{display(wall_times)}` has no rows)"
    return f"{_joined(machines)} (the run's, `{display(wall_times)}`; the table records none)"


def machine_text(table: Table, path: Path, base: Path, results: Path, wall_times: Path | None) -> str:
    if table.machine.startswith("runs:"):
        runs = base / table.machine.removeprefix("runs:")
        machines = runs_machines(runs) if runs.is_file() else []
        if machines:
            return f"{_joined(machines)} (where its NMT systems were trained and decoded: `{display(runs)}`)"
    elif table.machine == "translators":
        machines = translator_machines(results)
        if machines:
            return (f"{_joined(machines)} (where the translators were trained and decoded: "
                    f"`{display(results / 'translate')}/*/bleu.json`)")
    return run_machine(wall_times, path)


def stamp(path: Path, machine: str, commit: str) -> str:
    return f"Rendered from `{display(path)}` (written {utc_text(written_utc(path))}) · {machine} · commit {commit}"


# --- the sections ---------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,4}) ")


def embed(text: str) -> tuple[str | None, list[str]]:
    """(the file's ``# title`` or None, its other lines with every heading two levels deeper)."""
    lines = text.rstrip("\n").split("\n")
    title = None
    if lines and lines[0].startswith("# "):
        title, lines = lines[0][2:].strip(), lines[1:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    return title, [_HEADING.sub(lambda m: m.group(1) + "## ", line) for line in lines]


def ledger_lines(path: Path) -> list[str]:
    """The ledger as the HTML report shows it: the totals, the step table and the length buckets."""
    from marginmine.report.ledger import (
        LEDGER_STEP_HEADER,
        ledger_bucket_rows,
        ledger_step_rows,
        ledger_view,
        read_ledger,
    )
    from marginmine.report.tables import fmt_int, fmt_pct

    view = ledger_view(read_ledger(path))
    share = view.kept / view.pairs_in if view.pairs_in else 0.0
    header, rows = ledger_bucket_rows(view)
    return [f"{fmt_int(view.pairs_in)} pairs in, {fmt_int(view.kept)} kept ({fmt_pct(share)}).", "",
            "#### By step and reason", "", *md_table(LEDGER_STEP_HEADER, ledger_step_rows(view)), "",
            "#### By source length (words)", "", *md_table(header, rows)]


@dataclass(frozen=True)
class Section:
    key: str
    heading: str
    body: list[str]

    def text(self, level: int = 3) -> str:
        return "\n".join(["#" * level + " " + self.heading, "", *self.body]) + "\n"


def section(table: Table, base: Path, results: Path, wall_times: Path | None, commit: str) -> Section:
    path = base / table.path
    if table.path.endswith(".json"):
        title, content = None, ledger_lines(path)
    else:
        try:
            title, content = embed(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(str(path), f"cannot be read ({exc})", hint="rerun the rule that wrote it") from exc
    machine = machine_text(table, path, base, results, wall_times)
    return Section(table.key, title or table.title, [table.about, "", stamp(path, machine, commit), "", *content])


def missing_demo(results: Path) -> list[Path]:
    return [results / f for f in [t.path for t in DEMO] + list(DEMO_EXTRA) if not (results / f).is_file()]


def key_result(results: Path, commit: str) -> str:
    """The comparison's clean-mix test rows (``test``): each method's BLEU and chrF mean ± sd over seeds,
    each metric's difference [interval] and p against the headline method, any time-cap warning, a stamp.
    A comparison.tsv written before chrF is refused naming its missing columns (rerun compare_methods)."""
    from marginmine.report.summary import read_table

    path = results / "comparison.tsv"
    rows = [r for r in read_table(path, ["test_set", "method", "N", "n_seeds", "seeds", "bleu_mean", "bleu_sd",
                                         "versus", "diff", "ci_low", "ci_high", "p_value", "chrf_mean", "chrf_sd",
                                         "chrf_diff", "chrf_low", "chrf_high", "chrf_p", "note"])
            if r["test_set"] == "test"]
    if not rows:
        raise InputError(str(path), "holds no row of the test set 'test'", hint="rerun the compare_methods rule")
    headline = next((r["versus"] for r in rows if r["versus"]), "")
    notes: list[str] = []
    out = []
    def cells(mean: str, sd: str, diff: str, low: str, high: str, p: str, bold: bool) -> list[str]:
        text = f"{mean} ± {sd}" if sd else mean
        vs = f"{float(diff):+.2f} [{float(low):+.2f}, {float(high):+.2f}]" if diff else ""
        return [f"**{text}**" if bold else text, vs, p]

    for r in rows:
        bleu = cells(*(r[c] for c in ("bleu_mean", "bleu_sd", "diff", "ci_low", "ci_high", "p_value")), not r["versus"])
        chrf = cells(*(r[c] for c in ("chrf_mean", "chrf_sd", "chrf_diff", "chrf_low", "chrf_high", "chrf_p")),
                     not r["versus"])
        if r["note"]:
            if r["note"] not in notes:
                notes.append(r["note"])
            bleu[2] += f" ({notes.index(r['note']) + 1})"
        out.append([r["method"], r["N"], r["seeds"].replace(",", ", "), *bleu, *chrf])
    machine = machine_text(DEMO[0], path, results, results, results / "wall_times.tsv")
    lines = [f"Clean-mix test set, sacreBLEU's BLEU and chrF: each selection method's mean ± sd over training "
             f"seeds; against **{headline}** the difference [interval] and p of the two-level paired bootstrap, "
             f"for each metric (`{display(results / 'comparison.md')}` states its settings and signatures).", "",
             *md_table(["method", "N", "training seeds", "test BLEU", f"vs {headline}", "p", "test chrF",
                        f"chrF vs {headline}", "chrF p"], out)]
    lines += ["", *(f"{i}. {n}" for i, n in enumerate(notes, 1))] if notes else []
    lines += [*caps_lines(caps_under([results])), "", stamp(path, machine, commit)]
    return "\n".join(lines) + "\n"


def demo_time(results: Path, commit: str) -> str:
    """One line for a README: the demo's wall time (the sum of its ``make demo`` invocations, as
    ``marginmine wall-times`` sums them), the machine and whether it finished, under its stamp."""
    from marginmine.report.wall_times import part_totals, read_rows

    tsv = results / "wall_times.tsv"
    parts = part_totals(read_rows(tsv))
    if not parts:
        return (f"Wall time not recorded: `{display(tsv)}` has no rows "
                "(scripts/wall_time.sh writes one per `make demo`).\n")
    seconds = sum(p.seconds for p in parts)
    machines = list(dict.fromkeys(m for p in parts for m in p.machines))
    runs = sum(len(p.exits) for p in parts)
    done = "finished" if all(p.done for p in parts) else "**not finished** (its last invocation failed)"
    where = machines[0] if len(machines) == 1 else "**mixed machines:** " + "; ".join(machines)
    line = (f"**{seconds / 60:.1f} minutes** of wall time on {where}, {done}, "
            f"{runs} invocation{'s' if runs != 1 else ''} summed (`{display(results / 'wall_times.md')}`).")
    return line + "\n\n" + stamp(tsv, _joined(machines), commit) + "\n"


# --- the page ---------------------------------------------------------------------------------------

INTRO = ("<!-- Generated by `make docs-results` (marginmine docs-results) from the files the pipeline wrote. "
         "Do not edit by hand. -->\n" """\
# Results

Read the demo's results and the published scorers' suite's here. Every table is a copy of a file the
pipeline wrote; none is typed by hand. To regenerate the page: `make demo` (and `make published` for
the suite), then `make docs-results`. What each table measures and how to read it:
[evaluation](evaluation.md); every output file and its format: [outputs](outputs.md).

Each table carries a stamp: the file it was rendered from and when that file was written (its
modification time, UTC); the machine (CPU model, cores, widest vector ISA) as the pipeline recorded
it - the NMT systems' train and decode machines where the table holds BLEU, otherwise the machine of
the `make` invocation that wrote it (from its `wall_times.tsv`); and the repository's commit when
the page was rendered (`+dirty`: tracked files differed from that commit).
""")


@dataclass(frozen=True)
class Rendered:
    """The page, and the texts of the blocks a hand-written page can mark (name -> text)."""

    page: str
    blocks: dict[str, str]


def _note(what: str) -> str:
    return f"{what}: `make published` writes the suite's tables, then `make docs-results` renders them here."


def render(results: str | Path, published: str | Path | None = None, commit: str = "not recorded") -> Rendered:
    """docs/results.md and the block texts from ``results`` (the demo's directory) and ``published``
    (default ``<results>/published``). A missing file of the demo is an InputError naming it."""
    results = Path(results)
    published = Path(published) if published is not None else results / "published"
    if not results.is_dir():
        raise InputError(display(results), "no such directory", hint=DEMO_HINT)
    missing = missing_demo(results)
    if missing:
        more = f" (nor {', '.join(display(m) for m in missing[1:])})" if len(missing) > 1 else ""
        raise InputError(display(missing[0]), f"not found{more}", hint=DEMO_HINT)
    demo = [section(t, results, results, results / "wall_times.tsv", commit) for t in DEMO]
    blocks = {"key-result": key_result(results, commit), "demo-time": demo_time(results, commit)}
    blocks.update({f"demo-{s.key}": "\n".join(s.body) + "\n" for s in demo})
    parts = [INTRO, f"## The demo (`{display(results)}`)\n",
             "The demo experiment (config/demo.yaml), as `make demo` wrote it.\n", *(s.text() for s in demo),
             f"## The published scorers' suite (`{display(published)}`)\n",
             "The published scorers beside the demo's baselines (config/demo.yaml `published:`), as "
             "`make published` wrote them; what each method is: [published scorers](published-scorers.md).\n"]
    if not published.is_dir():
        note = _note(f"`{display(published)}` does not exist")
        parts.append(note + "\n")
        blocks.update({f"published-{t.key}": note + "\n" for t in PUBLISHED})
    else:
        present = [t for t in PUBLISHED if (published / t.path).is_file()]
        absent = [t for t in PUBLISHED if t not in present]
        suite = [section(t, published, results, published / "wall_times.tsv", commit) for t in present]
        if absent:
            note = _note("Not written: " + ", ".join(f"`{display(published / t.path)}`" for t in absent))
            parts.append(note + "\n")
            blocks.update({f"published-{t.key}": _note(f"`{display(published / t.path)}` not written")
                           + "\n" for t in absent})
        parts += [s.text() for s in suite]
        blocks.update({f"published-{s.key}": "\n".join(s.body) + "\n" for s in suite})
    return Rendered("\n".join(parts), blocks)


def _read_page(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot be read ({exc.strerror or exc})", hint="give an existing page") from exc
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"is not UTF-8 text ({exc.reason})") from exc


def write_docs(results: str | Path, output: str | Path, published: str | Path | None = None,
               readme: str | Path | None = None, pages: Sequence[str | Path] = (),
               repo: str | Path = ".") -> list[Path]:
    """Render the page to ``output`` and fill the blocks of ``readme`` (it must mark ``key-result``)
    and of each of ``pages``; every page is checked before any file is written. Returns the files
    whose content changed (an unchanged file is not rewritten)."""
    from marginmine.io.safe import write_text
    from marginmine.report.blocks import commit_stamp, replace_blocks

    targets = [Path(output), *([Path(readme)] if readme else []), *map(Path, pages)]
    rendered = render(results, published, commit_stamp(repo, targets))
    texts = {Path(output): rendered.page}
    for page, required in [*([(Path(readme), ("key-result",))] if readme else []), *((Path(p), ()) for p in pages)]:
        texts[page] = replace_blocks(_read_page(page), rendered.blocks, page, required)
    changed = []
    for path, text in texts.items():
        if not path.is_file() or path.read_bytes() != text.encode("utf-8"):
            write_text(path, text)
            changed.append(path)
    return changed
