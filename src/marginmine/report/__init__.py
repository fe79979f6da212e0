"""The report stage (rules/report.smk): the HTML report's figures and tables. Pure parts per
subject (:mod:`.ledger`, :mod:`.histograms`, :mod:`.benchmarks`, :mod:`.tables`); reading the
inputs and writing everything in :mod:`.figures`. The public functions are re-exported here."""

from __future__ import annotations

from marginmine.report.benchmarks import (
    benchmark_html,
    benchmark_job_rows,
    benchmark_rows,
    parse_benchmark_tsv,
    rule_of,
    summarise_benchmarks,
)
from marginmine.report.figures import ReportOutputs, item_counts, read_benchmarks, write_report_figures
from marginmine.report.histograms import histogram_figure, histogram_panels, parse_selection
from marginmine.report.ledger import (
    ledger_bucket_rows,
    ledger_figure,
    ledger_html,
    ledger_step_rows,
    ledger_view,
    read_ledger,
)
from marginmine.report.tables import html_table

__all__ = ["ReportOutputs", "benchmark_html", "benchmark_job_rows", "benchmark_rows", "histogram_figure",
           "histogram_panels", "html_table", "item_counts", "ledger_bucket_rows", "ledger_figure", "ledger_html",
           "ledger_step_rows", "ledger_view", "parse_benchmark_tsv", "parse_selection", "read_benchmarks",
           "read_ledger", "rule_of", "summarise_benchmarks", "write_report_figures"]
