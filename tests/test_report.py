"""The report's figures and tables (marginmine.report.figures) on small generated inputs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from marginmine import report
from marginmine.cli.main import main
from marginmine.errors import InputError
from marginmine.preprocess.ledger import Ledger

BENCH_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def small_ledger() -> Ledger:
    """10 pairs: 1 read defect, 2 duplicates, 3 wrong language (2 src, 1 tgt), 4 kept."""
    led = Ledger()
    led.declare(["read", "dedup", "test_overlap", "langid"])
    led.add_removed("read", "empty", "0-2")
    led.add_removed("dedup", "duplicate", "3-5")
    led.add_removed("dedup", "duplicate", "6-10")
    led.add_removed("langid", "wrong_lang_src", "3-5")
    led.add_removed("langid", "wrong_lang_src", "3-5")
    led.add_removed("langid", "wrong_lang_tgt", "6-10")
    for bucket in ("3-5", "3-5", "6-10", "6-10"):
        led.add_kept(bucket)
    return led


def ledger_json(tmp_path: Path) -> Path:
    small_ledger().write(tmp_path / "ledger.json")
    return tmp_path / "ledger.json"


def selection(method: str, threshold: float | None, selected: int, total: int = 100) -> dict:
    return {"method": method, "requested": None if threshold is None else selected, "threshold": threshold,
            "selected": selected, "total": total,
            "histogram": {"counts": [10, 30, 40, 20], "edges": [0.0, 0.5, 1.0, 1.5, 2.0]}}


def bench(seconds: float, cpu: float, rss: float) -> str:
    return BENCH_HEADER + f"{seconds}\t0:00:{int(seconds):02d}\t{rss}\t0\t0\t0\t0\t0\t50\t{cpu}\n"


# --- ledger ---------------------------------------------------------------------------------------


def test_ledger_view_has_steps_and_buckets(tmp_path: Path) -> None:
    view = report.ledger_view(report.read_ledger(ledger_json(tmp_path)))
    assert [s.step for s in view.steps] == ["read", "dedup", "test_overlap", "langid"]
    steps = {s.step: s for s in view.steps}
    assert (steps["read"].pairs_in, steps["read"].kept, steps["read"].reasons) == (10, 9, {"empty": 1})
    assert steps["test_overlap"].removed == 0 and steps["test_overlap"].reasons == {}
    assert steps["langid"].reasons == {"wrong_lang_src": 2, "wrong_lang_tgt": 1}
    assert (view.pairs_in, view.kept) == (10, 4)
    buckets = {b.bucket: b for b in view.buckets}
    assert (buckets["3-5"].pairs_in, buckets["3-5"].kept) == (5, 2)
    assert buckets["3-5"].removed_by_step == {"dedup": 1, "langid": 2}
    assert buckets["3-5"].kept_share == pytest.approx(0.4)
    # every pair of a bucket is kept or removed by exactly one step
    for b in view.buckets:
        assert b.kept + sum(b.removed_by_step.values()) == b.pairs_in


def test_ledger_tables_and_html(tmp_path: Path) -> None:
    view = report.ledger_view(small_ledger())
    rows = report.ledger_step_rows(view)
    langid = rows.index(["langid", "", "7", "3", "42.9%", "30.0%", "4"])
    assert rows[langid + 1] == ["", "wrong_lang_src", "", "2", "28.6%", "20.0%", ""]  # largest reason first
    assert rows[-1] == ["total", "", "10", "6", "60.0%", "60.0%", "4"]
    header, brows = report.ledger_bucket_rows(view)
    assert header[-4:] == ["read", "dedup", "test_overlap", "langid"]
    assert ["3-5", "5", "2", "40.0%", "0", "1", "0", "2"] in brows
    page = report.ledger_html(view, "demo <ledger>")
    assert "demo &lt;ledger&gt;" in page and "wrong_lang_tgt" in page and "<script" not in page and "http" not in page


def test_ledger_figure_has_both_panels(tmp_path: Path) -> None:
    view = report.ledger_view(small_ledger())
    fig = report.ledger_figure(view)
    assert len(fig.axes) == 2
    ticks = sorted(zip(fig.axes[0].get_yticks(), (t.get_text() for t in fig.axes[0].get_yticklabels())))
    assert [name for _, name in ticks] == ["langid", "test_overlap", "dedup", "read"]  # first step on top
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["0-2", "3-5", "6-10"]


def test_not_a_ledger_is_named(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"steps": []}')
    with pytest.raises(InputError, match="x.json: is not a marginmine ledger JSON"):
        report.read_ledger(tmp_path / "x.json")
    with pytest.raises(InputError, match="missing.json: cannot read"):
        report.read_ledger(tmp_path / "missing.json")


# --- score histograms ----------------------------------------------------------------------------


def test_histogram_panels_group_methods_and_order_thresholds() -> None:
    sels = [report.parse_selection(selection("ratio", 1.2, 10), "10"),
            report.parse_selection(selection("unfiltered", None, 100), "10"),
            report.parse_selection(selection("ratio", 0.9, 40), "40"),
            report.parse_selection(selection("cosine", 0.8, 10), "10")]
    panels = report.histogram_panels(sels, order=["ratio", "cosine"])
    assert [p.method for p in panels] == ["ratio", "cosine", "unfiltered"]  # configured order, then by name
    ratio = panels[0]
    assert ratio.thresholds == [("10", 1.2, 10), ("40", 0.9, 40)]
    assert ratio.counts == [10, 30, 40, 20] and ratio.centres == [0.25, 0.75, 1.25, 1.75] and ratio.total == 100
    assert panels[2].thresholds == [("10", None, 100)]


def test_histogram_figure_marks_thresholds() -> None:
    panels = report.histogram_panels([report.parse_selection(selection("ratio", 1.2, 10), "10"),
                                      report.parse_selection(selection("ratio", 0.9, 40), "40"),
                                      report.parse_selection(selection("unfiltered", None, 100), "10"),
                                      report.parse_selection(selection("cosine", 0.7, 10), "10")])
    fig = report.histogram_figure(panels, "demo")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 3  # one panel per method; the fourth grid cell is hidden
    by_title = {ax.get_title().split(":")[0]: ax for ax in visible}
    # threshold lines are vertical: both x values equal the threshold
    vlines = lambda ax: sorted(ln.get_xdata()[0] for ln in ax.get_lines())  # noqa: E731
    assert vlines(by_title["ratio"]) == [0.9, 1.2]
    assert vlines(by_title["cosine"]) == [0.7]
    assert vlines(by_title["unfiltered"]) == []
    assert "top 40" in " ".join(t.get_text() for t in by_title["ratio"].get_legend().get_texts())


def test_bad_selection_report_is_named() -> None:
    bad = selection("ratio", 1.0, 1)
    bad["histogram"]["edges"] = [0.0, 1.0]
    with pytest.raises(InputError, match="sel.json.*4 counts but 2 edges"):
        report.parse_selection(bad, "1", "sel.json")
    with pytest.raises(InputError, match="sel.json"):
        report.parse_selection({"method": "ratio"}, "1", "sel.json")


# --- benchmarks and throughput -------------------------------------------------------------------


def test_rule_of_benchmark_paths() -> None:
    assert report.rule_of("preprocess/shard0003") == ("preprocess_shard", "0003")
    assert report.rule_of("select/ratio.20k") == ("select_top", "ratio.20k")
    assert report.rule_of("nmt/ratio.20k.train") == ("train_nmt", "ratio.20k")
    assert report.rule_of("filter_eval") == ("eval_filter", "")
    assert report.rule_of("split_corpus") == ("split_corpus", "")
    assert report.rule_of("newstage/x/y") == ("newstage", "x/y")  # unknown: first directory


def test_benchmark_tsv_parses_and_averages_repeats() -> None:
    run = report.parse_benchmark_tsv(bench(10.0, 18.0, 200.0), "score_shard", "0000")
    assert (run.seconds, run.cpu_seconds, run.max_rss_mb) == (10.0, 18.0, 200.0)
    two = BENCH_HEADER + "4\t0:00:04\t100\t0\t0\t0\t0\t0\t1\t3\n" + "6\t0:00:06\tNA\t0\t0\t0\t0\t0\t1\tNA\n"
    run = report.parse_benchmark_tsv(two, "r", "")
    assert (run.seconds, run.cpu_seconds, run.max_rss_mb) == (5.0, 3.0, 100.0)
    with pytest.raises(InputError, match="b.tsv"):
        report.parse_benchmark_tsv("s\th:m:s\n", "r", "", "b.tsv")


def fake_work(tmp_path: Path) -> tuple[Path, Path]:
    """work/<exp> with two shards (ledgers + kept files) and a benchmark directory."""
    work = tmp_path / "work"
    (work / "preprocess" / "ledger").mkdir(parents=True)
    (work / "preprocess" / "kept").mkdir(parents=True)
    (work / "preprocess" / "split").mkdir(parents=True)
    (work / "preprocess" / "split" / "ledger.json").write_text(json.dumps({"pairs_in": 500, "kept": 400}))
    for shard, (n_in, kept) in {"0000": (200, 150), "0001": (200, 50)}.items():
        (work / "preprocess" / "ledger" / f"shard{shard}.json").write_text(json.dumps({"pairs_in": n_in, "kept": kept}))
        with gzip.open(work / "preprocess" / "kept" / f"shard{shard}.tsv.gz", "wt") as fh:
            fh.writelines(f"en {i}\tde {i}\n" for i in range(kept))
    # a kept shard whose ledger is missing: its lines are counted
    with gzip.open(work / "preprocess" / "kept" / "shard0002.tsv.gz", "wt") as fh:
        fh.writelines(f"en {i}\tde {i}\n" for i in range(30))
    b = work / "benchmarks"
    files = {
        "split_corpus": bench(5.0, 5.0, 60), "preprocess/shard0000": bench(4.0, 7.0, 180),
        "preprocess/shard0001": bench(6.0, 9.0, 190), "score/shard0000": bench(3.0, 5.0, 400),
        "score/shard0001": bench(1.0, 2.0, 380), "score/shard0002": bench(0.5, 1.0, 300),
        "select/ratio.10": bench(2.0, 1.0, 40), "train_encoder/results/x/encoder": bench(100.0, 190.0, 1700),
    }
    for rel, text in files.items():
        (b / f"{rel}.tsv").parent.mkdir(parents=True, exist_ok=True)
        (b / f"{rel}.tsv").write_text(text)
    return work, b


def test_throughput_from_ledgers_kept_lines_and_selections(tmp_path: Path) -> None:
    work, bdir = fake_work(tmp_path)
    sels = [report.parse_selection(selection("ratio", 1.0, 10, total=230), "10")]
    items = report.item_counts(work, sels)
    assert items[("split_corpus", "")] == 500
    assert items[("preprocess_shard", "0000")] == 200 and items[("score_shard", "0001")] == 50
    assert items[("embed_shard", "0002")] == items[("score_shard", "0002")] == 30  # counted lines
    assert items[("select_top", "ratio.10")] == 230

    summary = {s.rule: s for s in report.summarise_benchmarks(report.read_benchmarks(bdir), items)}
    assert list(summary) == ["split_corpus", "preprocess_shard", "train_encoder", "score_shard", "select_top"]
    pre = summary["preprocess_shard"]
    assert (pre.jobs, pre.wall_s, pre.max_job_s, pre.cpu_s, pre.max_rss_mb) == (2, 10.0, 6.0, 16.0, 190.0)
    assert pre.items == 400 and pre.items_per_s == pytest.approx(40.0) and pre.unit == "pairs in"
    assert summary["score_shard"].items == 230 and summary["score_shard"].items_per_s == pytest.approx(230 / 4.5)
    assert summary["select_top"].items_per_s == pytest.approx(115.0)
    enc = summary["train_encoder"]
    assert enc.items is None and enc.items_per_s is None and enc.unit == ""  # not knowable: left empty

    rows = report.benchmark_rows(list(summary.values()))
    assert rows[1] == ["preprocess_shard", "2", "0:00:10", "10.0", "6.0", "16.0", "190", "400", "40", "pairs in"]
    assert rows[2][7:9] == ["", ""]
    assert rows[-1][:4] == ["total", "8", "0:02:02", "121.5"]
    jobs = report.benchmark_job_rows(report.read_benchmarks(bdir), items)
    assert ["score_shard", "0001", "1.0", "2.0", "380", "50", "50"] in jobs
    assert "train_encoder" in report.benchmark_html(list(summary.values()), jobs)


def test_missing_benchmark_dir_gives_an_empty_table(tmp_path: Path) -> None:
    assert report.read_benchmarks(tmp_path / "nowhere") == []
    assert report.summarise_benchmarks([], {}) == []


def test_html_table_escapes_and_aligns() -> None:
    page = report.html_table(["a", "b"], [["<x>", "1,234"], ["y", "12.5%"]], caption="c&d")
    assert "&lt;x&gt;" in page and "c&amp;d" in page
    assert page.count('class="num"') == 2
    assert report.html_table(["job"], [["0001"]], text_columns={0}).count('class="num"') == 0


# --- the whole command ---------------------------------------------------------------------------


def test_report_figures_command_writes_every_output(tmp_path: Path) -> None:
    work, _ = fake_work(tmp_path)
    results = tmp_path / "results"
    (results / "select").mkdir(parents=True)
    (results / "preprocess").mkdir()
    small_ledger().write(results / "preprocess" / "ledger.json")
    for method, t in (("ratio", 1.2), ("cosine", 0.8), ("random", 0.5), ("unfiltered", None)):
        (results / "select" / f"{method}.10.json").write_text(json.dumps(selection(method, t, 10)))
    (results / "mining").mkdir()
    (results / "mining" / "bucc.tsv").write_text("margin\tf1\nratio\t0.5\n")
    out = tmp_path / "out"
    assert main(["-q", "report-figures", "--results", str(results), "--work", str(work), "--outdir", str(out),
                 "--methods", "ratio", "cosine", "--title", "t"]) == 0
    written = report.ReportOutputs.in_dir(out)
    for path in vars(written).values():
        assert path.stat().st_size > 0, path
    assert written.ledger_png.read_bytes()[:4] == b"\x89PNG" and written.histograms_png.read_bytes()[:4] == b"\x89PNG"
    tables = written.tables_html.read_text()
    assert "Mining benchmark" in tables and "ratio" in tables and "Selections" in tables
    tsv = written.benchmarks_tsv.read_text().splitlines()
    assert tsv[0].startswith("rule\tjobs\twall_s") and any(r.startswith("preprocess_shard\t2\t") for r in tsv)


def test_report_figures_without_a_ledger_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report-figures", "--work", str(tmp_path), "--outdir", str(tmp_path / "o")]) == 2
    assert "--ledger" in capsys.readouterr().err
    assert main(["report-figures", "--ledger", str(tmp_path / "none.tsv"), "--work", str(tmp_path),
                 "--outdir", str(tmp_path / "o")]) == 2
    assert "none.tsv" in capsys.readouterr().err
