"""Wall time, CPU time, peak memory and throughput per rule from Snakemake's ``benchmark:`` files."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from marginmine.errors import InputError
from marginmine.io.markup import html_page
from marginmine.report.tables import fmt_hms, fmt_int, html_table

# --- benchmarks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkRun:
    rule: str
    job: str
    seconds: float
    cpu_seconds: float | None
    max_rss_mb: float | None


#: benchmark file (relative to the benchmark directory, without .tsv) -> rule and job label
RULE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"preprocess/shard(?P<job>\d+)", "preprocess_shard"),
    (r"embed/(?:[^/]+/)?shard(?P<job>\d+)", "embed_shard"),  # embed/<encoder>/shardNNNN
    (r"score/(?:[^/]+/)?shard(?P<job>\d+)", "score_shard"),
    (r"select/(?P<job>.+)", "select_top"),
    (r"train_encoder/(?P<job>.+)", "train_encoder"),
    (r"eval_encoder/(?P<job>.+)", "eval_encoder"),
    (r"mining_eval/data", "mining_benchmark_data"),
    (r"mining_eval/eval", "eval_mining"),
    (r"filter_eval", "eval_filter"),
    (r"nmt/(?P<job>.+)\.train", "train_nmt"),
    (r"nmt/(?P<job>.+)\.evaluate", "evaluate_nmt"),
    (r"nmt/bleu_(?P<job>.+)", "headline_bleu"),
    (r"nmt/comparison", "compare_methods"),
)

#: pipeline order of the rules in the table (unknown rules follow, by name)
RULE_ORDER = (
    "download", "extract_member", "fetch_sacrebleu", "demo_corpus", "split_corpus", "preprocess_shard",
    "preprocess_ledger", "check_overlap", "tatoeba_share", "encoder_data", "train_encoder", "eval_encoder",
    "encoder_report", "embed_shard", "score_shard", "select_top", "mining_benchmark_data", "eval_mining",
    "eval_filter", "train_nmt", "evaluate_nmt", "headline_bleu", "compare_methods", "report_figures",
)

#: rules whose item count is known, and the unit counted
ITEM_UNITS = {
    "split_corpus": "pairs read",
    "preprocess_shard": "pairs in",
    "embed_shard": "pairs (both sides)",
    "score_shard": "pairs",
    "select_top": "pairs scanned",
}


def rule_of(relpath: str) -> tuple[str, str]:
    """``(rule, job)`` of a benchmark file path relative to the benchmark directory (no ``.tsv``).
    Unknown paths: a top-level file names its rule; otherwise the first directory does."""
    for pattern, rule in RULE_PATTERNS:
        m = re.fullmatch(pattern, relpath)
        if m:
            return rule, m.groupdict().get("job") or ""
    head, _, rest = relpath.partition("/")
    return head, rest


def parse_benchmark_tsv(text: str, rule: str, job: str, source: str = "benchmark") -> BenchmarkRun:
    """A Snakemake benchmark TSV (``s, h:m:s, max_rss, ..., cpu_time``); repeated runs are averaged
    (wall and CPU time) and their peak memory maximised."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise InputError(source, "is not a Snakemake benchmark file (no data row)")
    header = lines[0].split("\t")
    if "s" not in header:
        raise InputError(source, "is not a Snakemake benchmark file (no 's' column)")
    rows = [dict(zip(header, ln.split("\t"))) for ln in lines[1:]]

    def col(name: str) -> list[float]:
        out = []
        for r in rows:
            try:
                out.append(float(r[name]))
            except (KeyError, ValueError):  # "NA" when psutil could not measure
                pass
        return out

    secs = col("s")
    if not secs:
        raise InputError(source, "has no wall time in column 's'")
    cpu, rss = col("cpu_time"), col("max_rss")
    return BenchmarkRun(rule, job, sum(secs) / len(secs), sum(cpu) / len(cpu) if cpu else None,
                        max(rss) if rss else None)


@dataclass(frozen=True)
class RuleSummary:
    rule: str
    jobs: int
    wall_s: float
    max_job_s: float
    cpu_s: float | None
    max_rss_mb: float | None
    items: int | None = None
    item_wall_s: float = 0.0  # wall time of the jobs whose items are known
    unit: str = ""

    @property
    def items_per_s(self) -> float | None:
        return self.items / self.item_wall_s if self.items is not None and self.item_wall_s > 0 else None


def summarise_benchmarks(runs: Iterable[BenchmarkRun], items: Mapping[tuple[str, str], int]) -> list[RuleSummary]:
    """One row per rule, in pipeline order. Throughput = items of the jobs whose count is known /
    those jobs' summed wall time; rules without known counts get none."""
    by_rule: dict[str, list[BenchmarkRun]] = {}
    for r in runs:
        by_rule.setdefault(r.rule, []).append(r)
    rank = {r: i for i, r in enumerate(RULE_ORDER)}
    out = []
    for rule in sorted(by_rule, key=lambda r: (rank.get(r, len(rank)), r)):
        rs = by_rule[rule]
        known = [r for r in rs if (r.rule, r.job) in items]
        cpus = [r.cpu_seconds for r in rs if r.cpu_seconds is not None]
        rsss = [r.max_rss_mb for r in rs if r.max_rss_mb is not None]
        out.append(RuleSummary(
            rule, len(rs), sum(r.seconds for r in rs), max(r.seconds for r in rs), sum(cpus) if cpus else None,
            max(rsss) if rsss else None, sum(items[(r.rule, r.job)] for r in known) if known else None,
            sum(r.seconds for r in known), ITEM_UNITS.get(rule, "items") if known else ""))
    return out


BENCHMARK_HEADER = ["rule", "jobs", "wall time", "wall s", "longest job s", "CPU s", "peak RSS MB", "items",
                    "items/s", "unit"]


def benchmark_rows(summary: Sequence[RuleSummary]) -> list[list[str]]:
    rows = [[s.rule, str(s.jobs), fmt_hms(s.wall_s), f"{s.wall_s:.1f}", f"{s.max_job_s:.1f}",
             "" if s.cpu_s is None else f"{s.cpu_s:.1f}", "" if s.max_rss_mb is None else f"{s.max_rss_mb:.0f}",
             "" if s.items is None else fmt_int(s.items),
             "" if s.items_per_s is None else f"{s.items_per_s:,.0f}", s.unit] for s in summary]
    total = sum(s.wall_s for s in summary)
    rows.append(["total", str(sum(s.jobs for s in summary)), fmt_hms(total), f"{total:.1f}", "", "", "", "", "", ""])
    return rows


def benchmark_job_rows(runs: Iterable[BenchmarkRun], items: Mapping[tuple[str, str], int]) -> list[list[str]]:
    rank = {r: i for i, r in enumerate(RULE_ORDER)}
    out = []
    for r in sorted(runs, key=lambda r: (rank.get(r.rule, len(rank)), r.rule, r.job)):
        n = items.get((r.rule, r.job))
        out.append([r.rule, r.job, f"{r.seconds:.1f}", "" if r.cpu_seconds is None else f"{r.cpu_seconds:.1f}",
                    "" if r.max_rss_mb is None else f"{r.max_rss_mb:.0f}", "" if n is None else fmt_int(n),
                    "" if n is None or r.seconds <= 0 else f"{n / r.seconds:,.0f}"])
    return out


BENCHMARK_JOB_HEADER = ["rule", "job", "wall s", "CPU s", "peak RSS MB", "items", "items/s"]


def benchmark_html(summary: Sequence[RuleSummary], job_rows: Sequence[Sequence[str]], title: str = "") -> str:
    note = ("Wall time is summed over a rule's jobs (jobs may have run in parallel). Throughput is items "
            "per second of wall time, where the item count is known: pairs read (split_corpus), pairs in "
            "(preprocess_shard), kept pairs of the shard (embed_shard: both sides; score_shard), pairs "
            "scanned (select_top).")
    body = (f"<p>{html.escape(note)}</p>"
            + html_table(BENCHMARK_HEADER, benchmark_rows(summary), caption="Per rule",
                         strong_rows={len(summary)})
            + html_table(BENCHMARK_JOB_HEADER, job_rows, caption="Per job", text_columns={1}))
    return html_page(title or "Wall time and throughput per rule", body)


