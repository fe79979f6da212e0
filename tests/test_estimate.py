"""The run's cost estimate at plan time (marginmine.workflow.estimate): its rates are the ones the
benchmarks measured, every stage of a plan is counted or said to be not estimated, and a job whose
estimate exceeds its runtime limit is refused with the key to change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from marginmine.errors import MarginmineError
from marginmine.workflow import estimate
from test_workflow_plan import REPO, config, plan


def scale_rate(rule: str) -> float:
    """CPU microseconds per pair of ``rule`` in the 5M `make scale` run (bench/RESULTS.md's cost curve:
    the last column group is the 5M run's 'wall s / CPU s / peak RSS MiB / CPU us per pair')."""
    text = (REPO / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| {re.escape(rule)} \|(.*)$", text, re.M)
    assert row, rule
    scale = row.group(1).split("|")[2]
    return float(scale.split("/")[3])


def test_the_rates_are_the_benchmarks_measurements() -> None:
    assert estimate.SPLIT_US_PER_PAIR == scale_rate("split_corpus")
    assert estimate.PREPROCESS_US_PER_PAIR == scale_rate("preprocess/shard0000")
    assert estimate.SELECT_US_PER_PAIR == max(scale_rate(f"select/{m}.{n}") for m in ("ratio", "cosine", "random")
                                              for n in ("10%", "30%"))
    results = (REPO / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    assert "| dan | 1,831,436 | 159 / 118 | 11,485 |" in results and estimate.EMBED_SENTENCES_PER_S["dual"] == 11_485
    assert "| use | 1,831,436 | 1819 / 3049 | 1,007 |" in results
    assert estimate.EMBED_SENTENCES_PER_S["use-multilingual"] == 1_007
    assert "| LASER-style (paper: 512/512/2048) | 1024 | 345 |" in results
    assert estimate.EMBED_SENTENCES_PER_S["laser"] == 345


def test_every_stage_is_counted_or_said_not_estimated(real_data: Path, tmp_path: Path) -> None:
    for name in ("corpus.tsv.gz", "dev.en", "dev.de", "test.en", "test.de"):  # the template's files
        (tmp_path / name).write_bytes(b"")
    p = plan("config/own-corpus.yaml", real_data,
             lambda c: (c.update(data_dir=str(tmp_path)), c["encoder"].update(default="usem")))
    lines = [n for n in p.notes if n.startswith("cost estimate")]
    stages = [re.match(r"cost estimate, ([^:]+):", n).group(1) for n in lines]
    assert stages == ["split", "preprocess", "embed usem", "score usem", "select", "train encoders", "train NMT",
                      "total"]
    # 5M pairs on 2 cores: USE embeds 10M sentences at 1,007/s; four NMT systems of at most 600 minutes
    assert "cost estimate, embed usem: 5.52 CPU-hours in 1 job(s) (1,007 sentences/s on 2 cores)" in lines
    assert "cost estimate, train NMT: at most 80 CPU-hours in 4 job(s) (600 minutes each, the cap)" in lines
    total = float(re.search(r"total: ([\d.,]+) CPU-hours", lines[-1]).group(1).replace(",", ""))
    counted = sum(float(re.search(r": (?:at most )?([\d.,e+]+) CPU-hours", n).group(1).replace(",", ""))
                  for n in lines[:-1])
    assert total == pytest.approx(counted, rel=0.01)
    # a job without a cap among capped ones: the stage is not estimated (not the others' cap for it)
    assert estimate.capped_stage("train encoders", 2, [30, None], 2, False).hours is None
    assert estimate.capped_stage("train encoders", 2, [30, 60], 2, False).hours == 3.0
    # a kind with no measured rate is said so, not guessed, and left out of the total
    assert estimate.embed_stage("st", "sentence-transformers", 1000, 1, "cuda").hours is None
    assert estimate.embed_stage("dan", "dual", 1000, 1, "cuda").describe() == (
        "embed dan: not estimated (no GPU rate measured for kind dual)")


@pytest.mark.parametrize("change,message", [
    (lambda c: (c["corpus"].update(expected_pairs=500_000_000), c["preprocess"].update(shard_size=500_000_000)),
     "preprocess.runtime_min: 10 minutes, but a shard's preprocessing (500,000,000 raw pairs, 1 workers) is "
     "estimated at 1,641 minutes on a 2-core AMD EPYC (AVX2); a cluster would kill the job at its limit: raise it "
     "(to about 3,283, the estimate x 2) or make the job smaller"),  # config/test.yaml: job_threads 1
    (lambda c: (c["corpus"].update(expected_pairs=50_000_000), c["preprocess"].update(shard_size=50_000_000,
                                                                                         runtime_min=600),
                c["encoder"].update(embed_runtime_min=60)),
     "encoder.embed_runtime_min: 60 minutes, but embedding a shard with dan (100,000,000 sentences at 11,485/s) "
     "is estimated at 145 minutes"),
    (lambda c: (c["corpus"].update(expected_pairs=20_000_000), c["preprocess"].update(shard_size=20_000_000,
                                                                                         runtime_min=600),
                c["scoring"].update(runtime_min=1)),
     "scoring.runtime_min: 1 minutes, but scoring a shard with dan on 2 cores is estimated at"),
    (lambda c: (c["corpus"].update(expected_pairs=20_000_000), c["preprocess"].update(shard_size=20_000_000,
                                                                                         runtime_min=600),
                c["scoring"].update(runtime_min=1, index="flat", device="cuda", batch_size=5_000_000)),
     "scoring.runtime_min: 1 minutes, but scoring a shard with dan on one GPU (exact kNN) is estimated at"),
])
def test_a_job_estimated_above_its_runtime_limit_is_refused(change, message: str, real_data: Path) -> None:
    with pytest.raises(MarginmineError, match=re.escape(message)):
        plan("config/test.yaml", real_data, change)


def test_the_split_gets_a_limit_from_its_estimate(real_data: Path) -> None:
    small = plan("config/test.yaml", real_data)
    assert small.split_runtime == 16  # 8,000 raw pairs: seconds, + 15 minutes (at least preprocess.runtime_min)
    assert estimate.split_runtime(4_590_000_000, 1440) == 5961   # the paper's 4.59 billion raw pairs


def test_the_benchmarks_cost_table_is_what_the_plans_estimate_now(real_data: Path) -> None:
    """bench/RESULTS.md's table (bench/bench_estimate.py): the demo, the own-corpus template with each
    encoder kind at 1M and 5M pairs, the paper's run - planned again here, it must be the same; the
    README quotes three of its totals."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_estimate", REPO / "bench" / "bench_estimate.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.runs(real_data)
    table = bench.render(rows)
    text = (REPO / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    shown = text.split("<!-- bench_estimate begin -->\n")[1].split("<!-- bench_estimate end -->")[0]
    assert shown == table, "bench/RESULTS.md's cost table is stale: run bench/bench_estimate.py and paste it"
    assert len(rows) == 1 + 4 * 2 + 1
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    totals = {r["run"] + (f" {r['pairs']:,}" if "own corpus" in r["run"] else ""):
              re.search(r"total: ([\d.,e+]+) CPU-hours(?: and ([\d.,e+]+) GPU-hours)?", r["lines"][-1]).groups()
              for r in rows}
    demo, own, paper = (totals["the demo (config/demo.yaml)"], totals["own corpus, use-multilingual (usem) 5,000,000"],
                        totals["the paper (config.yaml)"])
    assert f"the demo at most {demo[0]} CPU-hours" in readme
    kinds = {"use-multilingual (usem)": "the multilingual USE", "dual (dan)": "a DAN",
             "laser-pretrained (laser2)": "LASER2", "sentence-transformers (labse)": "LaBSE"}
    for kind, words in kinds.items():  # each encoder kind at 1M and 5M pairs
        one, five = (totals[f"own corpus, {kind} {n:,}"][0] for n in (1_000_000, 5_000_000))
        assert f"{words} {one} / {five}" in readme, (kind, one, five)
    assert f"the paper's run {paper[0]} CPU-hours and {paper[1]} GPU-hours" in readme
    cluster = " ".join((REPO / "docs" / "cluster.md").read_text(encoding="utf-8").split())
    paper_lines = rows[-1]["lines"]
    for stage, words in (("split", "the split {} CPU-hours"), ("preprocess", "preprocessing {} CPU-hours"),
                         ("embed laser", "embedding {}"), ("score laser", "exact scoring {} GPU-hours")):
        hours = next(re.search(r": ([\d.,]+) [CG]PU-hours", n).group(1) for n in paper_lines
                     if n.startswith(f"cost estimate, {stage}:"))
        assert words.format(hours) in cluster, (stage, hours)
    own_corpus = " ".join((REPO / "docs" / "own-corpus.md").read_text(encoding="utf-8").split())
    assert f"the template at 5M pairs: {own[0]} CPU-hours with the multilingual USE" in own_corpus
    assert f"{estimate.split_runtime(4_590_000_000, 1440):,} minutes" in cluster


def test_an_uncapped_training_is_named_with_the_key_that_bounds_it(real_data: Path) -> None:
    from marginmine.workflow import Plan

    lines: list[str] = []
    cfg = config("config/test.yaml", real_data, lambda c: c["nmt"].pop("max_minutes", None))
    Plan.from_config(cfg, environ={}, note=lines.append)
    assert "cost estimate, train NMT: not estimated (no max_minutes: the steps or epochs decide; a cluster job gets " \
        "3 days unless nmt.max_minutes is set)" in lines, lines
