"""The claims table (marginmine.report.claims): ours read from the pipeline's tables, never typed;
the verdict follows the measured direction and the comparison's p; a table or row the run has not
written is "not measured", naming it; every listed claim reads a table the suite writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from marginmine.report.claims import Claim, Measure, judge, write_claims


def _comparison(d: Path, cosine: str, p: str) -> None:
    (d / "comparison.tsv").write_text(
        "test_set\tmethod\tN\tbleu_mean\tversus\tdiff\tp_value\tchrf_mean\tchrf_p\n"
        "test\tratio\t20k\t6.01\t\t\t\t24.70\t\n"
        f"test\tcosine\t20k\t{cosine}\tratio\t1.34\t{p}\t23.41\t0.1259\n", encoding="utf-8")


def _claim(**kw) -> Claim:  # noqa: ANN003
    m = Measure("comparison.tsv", "bleu_mean", {"test_set": "test", "method": "ratio"},
                {"test_set": "test", "method": "cosine"})
    base = dict(paper="A&S 2019", key="ratio-vs-cosine", claim="ratio filters better than cosine",
                paper_value="31.2 vs 30.0 BLEU", paper_where="Table 4", paper_setting="ParaCrawl en-de",
                our_setting="demo", measure=m, labels=("ratio", "cosine"))
    base.update(kw)
    return Claim(**base)


@pytest.mark.parametrize("cosine,p,verdict", [("7.35", "0.0010", "contradicts"), ("5.00", "0.0200", "agrees"),
                                              ("5.90", "0.4000", "agrees, not significant")])
def test_the_verdict_follows_the_measured_direction_and_p(tmp_path: Path, cosine: str, p: str, verdict: str) -> None:
    _comparison(tmp_path, cosine, p)
    row = judge(_claim(), tmp_path)
    assert row["verdict"] == verdict
    assert row["ours"] == f"ratio 6.01 vs cosine {float(cosine):.2f} (p = {float(p):.3f}, seed-aware paired bootstrap)"


def test_chrf_takes_the_chrf_p_and_lower_is_better_inverts(tmp_path: Path) -> None:
    _comparison(tmp_path, "7.35", "0.0010")
    m = Measure("comparison.tsv", "chrf_mean", {"method": "ratio"}, {"method": "cosine"})
    assert judge(_claim(measure=m), tmp_path)["verdict"] == "agrees, not significant"  # 24.70 > 23.41, p 0.126
    low = Measure("comparison.tsv", "chrf_mean", {"method": "ratio"}, {"method": "cosine"}, better="lower")
    assert judge(_claim(measure=low), tmp_path)["verdict"] == "contradicts, not significant"


def test_missing_files_and_rows_are_not_measured_and_named(tmp_path: Path) -> None:
    row = judge(_claim(), tmp_path)
    assert row["verdict"] == "not measured" and "comparison.tsv not written" in row["ours"]
    _comparison(tmp_path, "7.35", "0.0010")
    m = Measure("comparison.tsv", "bleu_mean", {"method": "ratio"}, {"method": "mlp-60"})
    row = judge(_claim(measure=m), tmp_path)
    assert row["verdict"] == "not measured" and "method=mlp-60" in row["ours"]


def test_not_comparable_keeps_our_direction_and_says_why(tmp_path: Path) -> None:
    _comparison(tmp_path, "7.35", "0.0010")
    row = judge(_claim(not_comparable="the paper's system is 100x larger"), tmp_path)
    assert row["verdict"] == "not comparable (ours: the other way)" and "100x" in row["why"]
    _comparison(tmp_path, "5.90", "0.4000")
    row = judge(_claim(not_comparable="the paper's system is 100x larger"), tmp_path)
    assert row["verdict"] == "not comparable (ours: the same way, not significant)"


def test_only_the_tables_the_run_built_are_read(tmp_path: Path) -> None:
    """A table an earlier run left (here a versus/ comparison no longer configured) gives no number or p."""
    (tmp_path / "comparison.tsv").write_text(
        "test_set\tmethod\tN\tbleu_mean\tversus\tp_value\ntest\tmlp-60\t20k\t5.0\tratio\t0.01\n"
        "test\tcosine\t20k\t7.0\tratio\t0.01\n")
    (tmp_path / "versus" / "cosine").mkdir(parents=True)
    (tmp_path / "versus" / "cosine" / "comparison.tsv").write_text(
        "test_set\tmethod\tN\tbleu_mean\tversus\tp_value\ntest\tmlp-60\t20k\t5.0\tcosine\t0.2000\n")
    m = Measure("comparison.tsv", "bleu_mean", {"test_set": "test", "method": "mlp-60"},
                {"test_set": "test", "method": "cosine"})
    built = frozenset({(tmp_path / "comparison.tsv").resolve()})
    ours = judge(_claim(measure=m, labels=("mlp", "cosine")), tmp_path, tables=built)["ours"]
    assert ours == "mlp 5.00 vs cosine 7.00 (no significance test)"
    assert judge(_claim(measure=m, labels=("mlp", "cosine")), tmp_path)["ours"].endswith(
        "(p = 0.200, seed-aware paired bootstrap)")
    row = judge(_claim(measure=m), tmp_path, tables=frozenset())
    assert row["verdict"] == "not measured" and "comparison.tsv not written" in row["ours"]


def test_clean_share_sums_the_clean_groups(tmp_path: Path) -> None:
    (tmp_path / "composition.tsv").write_text(
        "method\tN\tgroup\tpairs\tshare\nmlp-60\t20k\tclean:a\t1\t0.3\nmlp-60\t20k\tclean:b\t1\t0.2\n"
        "mlp-60\t20k\tduplicate\t1\t0.5\nrandom\t20k\tclean:a\t1\t0.6\nrandom\t20k\tduplicate\t1\t0.4\n")
    m = Measure("composition.tsv", "clean_share", {"method": "mlp-60"}, {"method": "random"}, digits=3)
    row = judge(_claim(measure=m, labels=("mlp-60", "random")), tmp_path)
    assert row["ours"] == "mlp-60 0.500 vs random 0.600 (no significance test)" and row["verdict"] == "contradicts"


def test_the_tables_are_written(tmp_path: Path) -> None:
    _comparison(tmp_path, "7.35", "0.0010")
    rows = write_claims([_claim()], tmp_path, tmp_path / "c.tsv", tmp_path / "c.md", "claims")
    assert rows[0]["verdict"] == "contradicts"
    assert (tmp_path / "c.tsv").read_text().splitlines()[1].split("\t")[-2] == "contradicts"
    assert "| A&S 2019 | ratio filters better than cosine |" in (tmp_path / "c.md").read_text()


def test_p_comes_from_a_comparison_against_either_method(tmp_path: Path) -> None:
    """mlp-60 vs cosine has no p in the table tested against ratio; versus/cosine/comparison.tsv has it."""
    (tmp_path / "comparison.tsv").write_text(
        "test_set\tmethod\tN\tbleu_mean\tversus\tp_value\nx\tratio\t20k\t6.0\t\t\n"
        "test\tmlp-60\t20k\t5.0\tratio\t0.01\ntest\tcosine\t20k\t7.0\tratio\t0.01\n"
        "test\tmlp-60\t1k\t1.0\tratio\t0.01\n")
    m = Measure("comparison.tsv", "bleu_mean", {"test_set": "test", "method": "mlp-60", "N": "{N}"},
                {"test_set": "test", "method": "cosine", "N": "{N}"})
    row = judge(_claim(measure=m, labels=("mlp", "cosine")), tmp_path, "20k")
    assert row["ours"] == "mlp 5.00 vs cosine 7.00 (no significance test)" and row["verdict"] == "contradicts"
    (tmp_path / "versus" / "cosine").mkdir(parents=True)
    (tmp_path / "versus" / "cosine" / "comparison.tsv").write_text(
        "test_set\tmethod\tN\tbleu_mean\tversus\tp_value\ntest\tcosine\t20k\t7.0\t\t\n"
        "test\tmlp-60\t20k\t5.0\tcosine\t0.2000\n")
    row = judge(_claim(measure=m, labels=("mlp", "cosine")), tmp_path, "20k")
    assert row["ours"] == "mlp 5.00 vs cosine 7.00 (p = 0.200, seed-aware paired bootstrap)"
    assert row["verdict"] == "contradicts, not significant"


def test_a_selector_matching_two_rows_is_an_error_and_n_must_be_given(tmp_path: Path) -> None:
    from marginmine.errors import InputError, MarginmineError

    (tmp_path / "comparison.tsv").write_text(
        "test_set\tmethod\tN\tbleu_mean\ntest\tratio\t20k\t6.0\ntest\tratio\t1k\t2.0\ntest\tcosine\t20k\t7.0\n")
    with pytest.raises(InputError, match="2 rows match method=ratio"):
        judge(_claim(measure=Measure("comparison.tsv", "bleu_mean", {"method": "ratio"}, {"method": "cosine"})),
              tmp_path)
    with pytest.raises(MarginmineError, match="give the size"):
        judge(_claim(measure=Measure("comparison.tsv", "bleu_mean", {"method": "ratio", "N": "{N}"},
                                     {"method": "cosine", "N": "{N}"})), tmp_path)


def test_every_claim_names_a_table_the_suite_writes_and_a_verdict_rule() -> None:
    """The suite's writers: comparison (and versus/<ref>/), intrinsic, bucc, quality, shortcut."""
    from marginmine.report.claim_list import CLAIMS

    assert len({c.key for c in CLAIMS}) == len(CLAIMS) >= 20
    measured = [c for c in CLAIMS if c.measure is not None]
    assert {c.measure.file for c in measured} <= {"comparison.tsv", "intrinsic.tsv", "bucc.tsv", "quality.tsv",
                                                  "shortcut.tsv", "composition.tsv"}
    assert {c.measure.better for c in measured} <= {"higher", "lower", "same"}
    assert all(c.not_measured for c in CLAIMS if c.measure is None)  # what it would need, said
    assert {c.paper.split(" (")[0] for c in CLAIMS} == {"Artetxe & Schwenk 2019", "Yang et al. 2019", "Guo et al. 2018",
                                                         "Kim et al. 2019", "Jones & Wijaya 2021"}


def test_a_retrieval_error_gap_of_two_sentences_is_not_significant(tmp_path: Path) -> None:
    """Guo et al.'s row as the audit found it: 7.90 vs 7.70 % of 1,000 sentences is two sentences;
    McNemar on the items calls it not significant; forty sentences apart is significant."""
    from marginmine.io.items import items_path, write_items

    def tables(wrong_a: set[int], wrong_b: set[int]) -> None:
        (tmp_path / "intrinsic.tsv").write_text(
            "encoder\tset\tmargin\tpairs\terr_src2tgt\terr_tgt2src\terr_avg\n"
            f"dan-hn\tt\tcosine\t1000\t0\t{len(wrong_a) / 10:.2f}\t0\n"
            f"dan\tt\tcosine\t1000\t0\t{len(wrong_b) / 10:.2f}\t0\n")
        write_items(items_path(tmp_path / "intrinsic.tsv"), ("encoder", "set", "margin", "direction", "item", "wrong"),
                    [(e, "t", "cosine", "tgt2src", i, int(i in w)) for e, w in (("dan-hn", wrong_a), ("dan", wrong_b))
                     for i in range(1000)])

    m = Measure("intrinsic.tsv", "err_tgt2src", {"encoder": "dan-hn", "set": "t", "margin": "cosine"},
                {"encoder": "dan", "set": "t", "margin": "cosine"}, better="lower")
    tables(set(range(79)), set(range(2, 79)) | {900})  # 79 vs 78 errors; discordant: 2 vs 1 sentence
    row = judge(_claim(measure=m, labels=("hard", "random")), tmp_path)
    assert row["ours"] == "hard 7.90 vs random 7.80 (p = 1.000, McNemar)"
    assert row["verdict"] == "contradicts, not significant"
    tables(set(range(40)), set(range(80)))  # 40 vs 80 errors, the same 40 plus 40 more
    row = judge(_claim(measure=m, labels=("hard", "random")), tmp_path)
    assert row["verdict"] == "agrees" and row["ours"] == "hard 4.00 vs random 8.00 (p < 0.001, McNemar)"
    # write_claims reads each sidecar once for every claim that tests from it: the same rows
    rows = write_claims([_claim(measure=m, labels=("hard", "random"))] * 2, tmp_path, tmp_path / "c.tsv",
                        tmp_path / "c.md", "claims")
    assert [r["ours"] for r in rows] == ["hard 4.00 vs random 8.00 (p < 0.001, McNemar)"] * 2


def test_the_domain_claim_is_tested_from_the_shortcut_sidecar(tmp_path: Path) -> None:
    """kim-domain as listed (the shortcut check's auc_vs_positives of two MLPs, each against its own
    positives) gets a two-sample bootstrap p from the sidecar, not "no significance test"."""
    import numpy as np

    from marginmine.io.items import items_path, write_items
    from marginmine.report.claim_list import CLAIMS

    claim = next(c for c in CLAIMS if c.key == "kim-domain")
    assert claim.measure is not None
    (tmp_path / "shortcut.tsv").write_text(
        "scorer\tgroup\tauc\tauc_vs_positives\nmlp-60\tmulti30k\t0.9\t0.8\nmlp-60-news\tmulti30k\t0.5\t0.1\n")
    rng = np.random.default_rng(1)
    lines = []
    for scorer, shift in (("mlp-60", 2.0), ("mlp-60-news", -2.0)):
        true = rng.normal(shift, 1, 100)
        lines += [(scorer, "multi30k", "positives", f"t{j}", 1, v) for j, v in enumerate(true)]
        lines += [(scorer, "multi30k", "positives", f"{scorer}:p{j}", 0, v) for j, v in enumerate(rng.normal(0, 1, 80))]
    write_items(items_path(tmp_path / "shortcut.tsv"), ("scorer", "group", "against", "item", "label", "score"), lines)
    row = judge(claim, tmp_path)
    assert row["ours"] == "encoder-data positives 0.800 vs news positives 0.100 (p < 0.001, two-sample bootstrap)"
    assert row["verdict"] == "agrees"


def test_a_claim_of_no_difference_holds_when_the_test_finds_none(tmp_path: Path) -> None:
    """better="same" (a margin robust to the retrieval): agrees at p >= 0.05, contradicts below; a claim
    the pipeline does not measure says what it would need."""
    _comparison(tmp_path, "5.90", "0.4000")
    same = Measure("comparison.tsv", "bleu_mean", {"test_set": "test", "method": "ratio"},
                   {"test_set": "test", "method": "cosine"}, better="same")
    assert judge(_claim(measure=same), tmp_path)["verdict"] == "agrees (no significant difference)"
    _comparison(tmp_path, "7.35", "0.0010")
    assert judge(_claim(measure=same), tmp_path)["verdict"] == "contradicts (a significant difference)"
    row = judge(_claim(measure=None, not_measured="a pool of millions of targets"), tmp_path)
    assert row["verdict"] == "not measured" and row["ours"] == "not measured: a pool of millions of targets"


def test_a_claim_at_the_small_n_reads_published_small_or_says_it_is_not_set(tmp_path: Path) -> None:
    (tmp_path / "comparison.tsv").write_text(
        "test_set\tmethod\tN\tbleu_mean\nnewstest2014\tmlp-60\t5k\t2.0\nnewstest2014\tcosine\t5k\t1.0\n"
        "newstest2014\tmlp-60\t20k\t1.0\nnewstest2014\tcosine\t20k\t3.0\n")
    m = Measure("comparison.tsv", "bleu_mean", {"test_set": "newstest2014", "method": "mlp-60", "N": "{SMALL}"},
                {"test_set": "newstest2014", "method": "cosine", "N": "{SMALL}"})
    row = judge(_claim(measure=m, labels=("mlp", "cosine")), tmp_path, "20k")
    assert row["verdict"] == "not measured" and "published.small is not set" in row["ours"]
    row = judge(_claim(measure=m, labels=("mlp", "cosine")), tmp_path, "20k", small="5k")
    assert row["ours"].startswith("mlp 2.00 vs cosine 1.00") and row["verdict"] == "agrees"
