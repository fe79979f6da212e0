"""Subcommands ``compare`` (the BLEU table and plot of the selection methods), ``headline``,
``summary`` (one row per system of a suite), ``claims`` (the seed papers' claims beside ours),
``wall-times`` (each part's time from scripts/wall_time.sh's rows), ``docs-results``
(docs/results.md and the README's key result from the tables the pipeline wrote) and
``report-figures``: the figures and tables of the Snakemake report (ledger, score histograms,
result tables, wall time and throughput per rule). Listed in
:data:`marginmine.cli.main.COMMAND_MODULES`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from marginmine.cli import values as domain
from marginmine.cli.options import Handlers
from marginmine.defaults import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")

#: result tables rendered when --results is given and they exist (relative to the results directory)
DEFAULT_TABLES = ("encoders/intrinsic.tsv", "mining/bucc.tsv", "filtering/quality.tsv", "select/composition.tsv",
                  "select/density.tsv", "comparison.tsv", "comparison_runs.tsv")


def cmd_report_figures(args: argparse.Namespace) -> int:
    from marginmine.report.figures import write_report_figures

    results = Path(args.results) if args.results else None
    ledger = args.ledger or (results / "preprocess" / "ledger.json" if results else None)
    if ledger is None:
        raise MarginmineError("give --ledger (or --results DIR with preprocess/ledger.json)")
    selections = args.select
    if selections is None:
        selections = sorted(str(p) for p in (results / "select").glob("*.json")) if results else []
    tables = args.tables
    if tables is None:
        tables = [str(results / t) for t in DEFAULT_TABLES if (results / t).is_file()] if results else []
    work = Path(args.work)
    from marginmine.timecap import caps_under

    caps = caps_under([*(args.caps_from or []), *([results] if results else [])])
    out = write_report_figures(ledger, selections, args.benchmarks or work / "benchmarks", work, args.outdir,
                               tables=tables, methods=args.methods, title=args.title, caps=caps)
    log.info("report figures written to %s", out.ledger_png.parent)
    return 0


def _subset(text: str) -> tuple[str, str]:
    name, _, path = text.partition("=")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"expected TEST_SET=LABELS_TSV (got {text!r})")
    return name, path


def cmd_compare(args: argparse.Namespace) -> int:
    from marginmine.nmt.comparison import compare_runs, read_run, read_subsets, write_comparison
    from marginmine.nmt.significance import SignificanceSettings
    from marginmine.timecap import caps_under

    runs = [read_run(p) for p in args.inputs]
    try:
        settings = SignificanceSettings(resamples=args.resamples, seed=args.bootstrap_seed)
    except ValueError as exc:
        raise MarginmineError(f"--resamples: {exc}") from exc
    subsets = read_subsets(dict(args.subsets or []))
    rows = compare_runs(runs, args.headline, subsets, settings)
    write_comparison(rows, runs, args.headline, args.tsv, args.md, args.runs, args.png, args.title, settings,
                     caps_under(args.caps_from))
    for r in rows:
        t, c, ct = r.test, r.chrf, r.chrf_test
        log.info("%s %s %s: BLEU %.2f over %d seed(s)%s%s", r.test_set, r.method, r.n, r.summary.mean,
                 r.summary.n_seeds, "" if t is None else f", {t.diff:+.2f} vs {args.headline} (p {t.p_value:.3f})",
                 "" if c is None else f"; chrF {c.mean:.2f}" + (
                     "" if ct is None else f", {ct.diff:+.2f} vs {args.headline} (p {ct.p_value:.3f})"))
    return 0


def cmd_headline(args: argparse.Namespace) -> int:
    from marginmine.io.safe import write_text
    from marginmine.nmt.comparison import headline_text, read_run
    from marginmine.timecap import caps_under

    text = headline_text([read_run(p) for p in args.inputs], caps_under(args.caps_from))
    write_text(args.output, text)
    log.info("headline: %s", text.splitlines()[2])
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    import json

    from marginmine.report.summary import read_table, runs_machines, selected_counts, summary_rows, write_summary

    try:
        scorers = json.loads(args.scorers)
    except json.JSONDecodeError as exc:
        raise MarginmineError(f"--scorers: not JSON ({exc})") from exc
    fields, rows = summary_rows(
        scorers, args.methods, args.sizes,
        read_table(args.intrinsic, ["encoder", "set", "margin", "err_avg"]) if args.intrinsic else [],
        read_table(args.bucc, ["scorer", "retrieval", "f1"]) if args.bucc else [],
        read_table(args.quality, ["data", "scorer", "auc"]) if args.quality else [],
        read_table(args.comparison, ["test_set", "method", "N", "bleu_mean", "bleu_sd", "seeds", "p_value",
                                     "chrf_mean", "chrf_sd", "chrf_p"]),
        selected_counts(args.select))
    sources = ([p for p in (args.intrinsic, args.bucc, args.quality, args.comparison, args.runs) if p]
               + list(args.select))
    from marginmine.timecap import caps_under

    caps = caps_under(args.caps_from)
    write_summary(fields, rows, args.tsv, args.md, args.title, sources, runs_machines(args.runs) if args.runs else None,
                  caps)
    for r in rows:
        log.info("%s %s: BLEU %s, chrF %s", r["system"], r["N"], r["test_bleu"], r["test_chrf"])
    return 0


def cmd_claims(args: argparse.Namespace) -> int:
    from marginmine.errors import InputError
    from marginmine.report.claim_list import CLAIMS
    from marginmine.report.claims import write_claims

    if not Path(args.results).is_dir():
        raise InputError(args.results, "--results: no such directory", hint="the results directory of a run, "
                         "e.g. results/demo after make published")
    for r in write_claims(CLAIMS, args.results, args.tsv, args.md, args.title, args.size, args.tables,
                          small=args.small_size or None):
        log.info("%s: %s: %s", r["paper"], r["claim"], r["verdict"])
    return 0


def cmd_wall_times(args: argparse.Namespace) -> int:
    from marginmine.report.wall_times import write_summary

    for p in write_summary(args.tsv, args.md):
        log.info("%s: %d s in %d invocation(s)%s", p.part, p.seconds, len(p.exits), "" if p.done else ", not done")
    return 0


def cmd_docs_results(args: argparse.Namespace) -> int:
    from marginmine.report.docsresults import write_docs

    changed = write_docs(args.results, args.output, args.published, args.readme, args.page, args.repo)
    for path in changed:
        log.info("docs-results: wrote %s", path)
    if not changed:
        log.info("docs-results: every page was up to date")
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("compare", help="BLEU of every selection method, N and training seed: mean, sd and a "
                                       "seed-and-sentence bootstrap against the headline method (TSV, Markdown, plot)")
    p.add_argument("--inputs", nargs="+", required=True,
                   help="bleu.json files below <method>.<N>/seed<S>/ directories")
    p.add_argument("--headline", required=True, help="the method every other one is tested against")
    p.add_argument("--subsets", nargs="*", type=_subset, default=None, metavar="TEST_SET=LABELS_TSV",
                   help="score a test set also per origin (the held-out set's labels: id, origin, kind, clean)")
    p.add_argument("--resamples", type=domain.Whole(1, 10_000_000), default=BOOTSTRAP_RESAMPLES,
                   help="bootstrap rounds")
    p.add_argument("--bootstrap-seed", type=domain.SEED, default=BOOTSTRAP_SEED,
                   help="seed of the bootstrap's resampling")
    p.add_argument("--tsv", required=True,
                   help="output: per test set, method and N: BLEU mean and sd over seeds, the difference to "
                        "--headline with its confidence interval and p-value")
    p.add_argument("--md", required=True, help="output: the comparison as Markdown")
    p.add_argument("--runs", default=None, help="one row per trained system (TSV)")
    p.add_argument("--caps-from", nargs="*", default=[], metavar="DIR",
                   help="results directories whose time-cap warnings (on_time_cap: warn; encoder.json, nmt.json, "
                        "bleu.json) the output prints beside its numbers")
    p.add_argument("--png", default=None,
                   help="plot: mean dev BLEU (test where no dev) against N, one line per method, "
                        "sd as error bars")
    p.add_argument("--title", default="",
                   help="appended to the Markdown heading; the plot's title "
                        "(default: BLEU by selection method)")
    handlers["compare"] = cmd_compare

    p = sub.add_parser("headline", help="bleu_<N>.txt: the headline method's mean test BLEU over its seeds")
    p.add_argument("--inputs", nargs="+", required=True, help="the headline method's bleu.json files, one per seed")
    p.add_argument("--output", required=True,
                   help="text file: the mean test sacreBLEU on the first line, then each seed's")
    p.add_argument("--caps-from", nargs="*", default=[], metavar="DIR",
                   help="results directories whose time-cap warnings (on_time_cap: warn; encoder.json, nmt.json, "
                        "bleu.json) the output prints beside its numbers")
    handlers["headline"] = cmd_headline

    p = sub.add_parser("summary", help="one row per system of a suite: AUC, BUCC F1, intrinsic error, pairs, "
                                       "BLEU, joined from the tables the workflow wrote")
    p.add_argument("--scorers", required=True, help="the suite's scorers as JSON {name: {kind, encoder, ...}}")
    p.add_argument("--methods", nargs="*", default=[], help="trained methods (rows for those that are not scorers)")
    p.add_argument("--sizes", nargs="+", required=True, help="selection sizes N")
    p.add_argument("--intrinsic", default=None, help="encoder-report TSV")
    p.add_argument("--bucc", default=None, help="eval-mining TSV")
    p.add_argument("--quality", default=None, help="eval-filter TSV")
    p.add_argument("--comparison", required=True, help="compare TSV")
    p.add_argument("--runs", default=None, help="compare's runs TSV (--runs): the machines each system ran on")
    p.add_argument("--caps-from", nargs="*", default=[], metavar="DIR",
                   help="results directories whose time-cap warnings (on_time_cap: warn; encoder.json, nmt.json, "
                        "bleu.json) the output prints beside its numbers")
    p.add_argument("--select", nargs="*", default=[], help="select reports <method>.<N>.json")
    p.add_argument("--title", default="Summary", help="the Markdown page's heading")
    p.add_argument("--tsv", required=True, help="output: one row per system and N")
    p.add_argument("--md", required=True,
                   help="output: the same as a Markdown table, naming the files joined")
    handlers["summary"] = cmd_summary

    p = sub.add_parser("wall-times",
                       help="a part's wall time: the sum of scripts/wall_time.sh's rows per part (Markdown)")
    p.add_argument("tsv", help="the rows (part, started, ended, seconds, exit, machine)")
    p.add_argument("--md", required=True,
                   help="output: Markdown table, one row per part (invocations, seconds, machines), "
                        "and the total")
    handlers["wall-times"] = cmd_wall_times

    p = sub.add_parser("claims", help="each seed paper's headline claim beside the same comparison in a suite's "
                                      "tables: the paper's numbers, ours, agrees / contradicts / not comparable")
    p.add_argument("--results", required=True,
                   help="the suite's tables (results/<exp>/published; ../ is the experiment's)")
    p.add_argument("--size", required=True, help="the N the suite's NMT systems are trained at (e.g. 20k)")
    p.add_argument("--small-size", default=None,
                   help="published.small's N (e.g. 5k): the claims on small selections; without it (or empty) they "
                        "are not measured")
    p.add_argument("--title", default="The papers' claims beside ours", help="the Markdown table's title")
    p.add_argument("--tables", nargs="+", metavar="TSV",
                   help="read only these tables (the workflow passes those this run builds; a table an earlier "
                        "run left behind then counts as not written); default: every table found")
    p.add_argument("--tsv", required=True, help="output: a row per claim")
    p.add_argument("--md", required=True, help="output: the same as Markdown")
    handlers["claims"] = cmd_claims

    p = sub.add_parser("docs-results",
                       help="docs/results.md from the tables the pipeline wrote (each stamped with its file, date, "
                            "machine and the commit), and the rendered blocks of the README and other pages")
    p.add_argument("--results", required=True, help="the experiment's results directory (results/demo)")
    p.add_argument("--published", default=None,
                   help="the published scorers' suite's tables (default: RESULTS/published; absent: a one-line note)")
    p.add_argument("--output", required=True, help="the page to write (docs/results.md)")
    p.add_argument("--readme", default=None,
                   help="fill its block <!-- rendered: key-result begin --> ... <!-- rendered: key-result end --> "
                        "with the key result (required there); nothing outside the markers changes")
    p.add_argument("--page", action="append", default=[], metavar="MD",
                   help="a page whose marked blocks (<!-- rendered: NAME begin/end -->, NAME: key-result, "
                        "demo-<table>, published-<table>) are filled; repeatable")
    p.add_argument("--repo", default=".", help="the git repository whose commit stamps the tables (default: .)")
    handlers["docs-results"] = cmd_docs_results

    p = sub.add_parser("report-figures",
                       help="figures and tables for the Snakemake report (ledger, score histograms, benchmarks)")
    p.add_argument("--results", default=None,
                   help="results/<exp>: defaults for --ledger, --select and --tables found below it")
    p.add_argument("--work", required=True, help="work/<exp>: shard ledgers and kept shards (item counts)")
    p.add_argument("--outdir", required=True, help="ledger.png/.html, score_histograms.png, tables.html, "
                                                   "benchmarks.html/.tsv are written here")
    p.add_argument("--ledger", default=None, help="the corpus ledger JSON (results/<exp>/preprocess/ledger.json)")
    p.add_argument("--select", nargs="*", default=None, metavar="JSON",
                   help="selection reports <method>.<N>.json (default: all below --results/select)")
    p.add_argument("--tables", nargs="*", default=None, metavar="TSV",
                   help="result TSVs shown as HTML tables (default: the known ones below --results)")
    p.add_argument("--benchmarks", default=None,
                   help="Snakemake benchmark directory, read recursively (default: --work/benchmarks)")
    p.add_argument("--methods", nargs="*", default=[], help="panel order of the selection methods")
    p.add_argument("--title", default="", help="prefix of figure and page titles, e.g. the experiment")
    p.add_argument("--caps-from", nargs="*", default=[], metavar="DIR",
                   help="results directories whose time-cap warnings (on_time_cap: warn; encoder.json, nmt.json, "
                        "bleu.json) the output prints beside its numbers")
    handlers["report-figures"] = cmd_report_figures
