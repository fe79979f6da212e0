"""Figures and tables for the Snakemake report (``snakemake --report``): reading the inputs and
writing every figure and table (:func:`write_report_figures`); the pure parts live in
:mod:`.ledger`, :mod:`.histograms`, :mod:`.benchmarks` and :mod:`.tables`."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from marginmine.errors import InputError
from marginmine.io.safe import atomic_path, write_text
from marginmine.io.text import open_text_out
from marginmine.report.benchmarks import (
    BenchmarkRun,
    benchmark_html,
    benchmark_job_rows,
    parse_benchmark_tsv,
    rule_of,
    summarise_benchmarks,
)
from marginmine.report.histograms import (
    SELECTION_HEADER,
    Selection,
    histogram_figure,
    histogram_panels,
    parse_selection,
    selection_rows,
)
from marginmine.report.ledger import ledger_figure, ledger_html, ledger_view, read_ledger
from marginmine.report.tables import TABLE_TITLES, parse_tsv, pyplot, tables_html

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
                         title: str = "", caps: Sequence[str] = ()) -> ReportOutputs:
    """Read the workflow's results, write every figure and table; returns the paths written."""
    out = ReportOutputs.in_dir(outdir)
    Path(outdir).mkdir(parents=True, exist_ok=True)
    prefix = f"{title}: " if title else ""

    view = ledger_view(read_ledger(ledger_json))
    fig = ledger_figure(view)
    with atomic_path(out.ledger_png) as tmp:
        fig.savefig(tmp, format="png")
    pyplot().close(fig)
    write_text(out.ledger_html, ledger_html(view, f"{prefix}preprocessing ledger"))

    selections = [read_selection(p) for p in selection_files]
    fig = histogram_figure(histogram_panels(selections, methods), f"{prefix}score distributions and selections")
    with atomic_path(out.histograms_png) as tmp:
        fig.savefig(tmp, format="png")
    pyplot().close(fig)

    sections: list[tuple[str, Sequence[str], Sequence[Sequence[str]]]] = []
    if selections:
        sections.append(("Selections: threshold and pairs kept per method and size", SELECTION_HEADER,
                         selection_rows(selections)))
    for t in tables:
        header, rows = parse_tsv(_read_text(t))
        sections.append((TABLE_TITLES.get(Path(t).name, str(t)), header, rows))
    write_text(out.tables_html, tables_html(sections, f"{prefix}result tables", caps))

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
