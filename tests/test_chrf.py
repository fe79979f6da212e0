"""chrF beside BLEU (issue 33, part 4): sacreBLEU's chrF (CHRF() defaults) as per-sentence sufficient
statistics, equal to sacreBLEU's corpus chrF and to its command line; the two-level bootstrap tests chrF
with the same code (and draws) as BLEU; evaluate's reports carry chrF, and the comparison computes it from
the hypothesis files, so reports written before chrF need no re-decoding."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import CHRF

from conftest import data_dir
from marginmine.errors import MarginmineError
from marginmine.nmt.metrics import BLEU_METRIC, CHRF_COLUMNS, CHRF_METRIC, chrf_from_stats, chrf_sentence_stats
from marginmine.nmt.significance import (
    SeedRun,
    SignificanceSettings,
    seed_bootstrap,
    seed_bootstrap_stats,
    seed_comparison,
)

SACREBLEU = Path(sys.executable).parent / "sacrebleu"


def refs_de() -> list[str]:
    return [x for x in (data_dir() / "wmt-newstest-ende/newstest2013.de").read_text(encoding="utf-8").splitlines()
            if x.strip()]


def damaged(refs: list[str], drop: float, seed: int) -> list[str]:
    """Each reference with a share ``drop`` of its words removed, and one in ten with two words swapped."""
    rng = random.Random(seed)
    out = []
    for r in refs:
        words = [w for w in r.split() if rng.random() >= drop]
        if len(words) > 2 and rng.random() < 0.1:
            i = rng.randrange(len(words) - 1)
            words[i], words[i + 1] = words[i + 1], words[i]
        out.append(" ".join(words))
    return out


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def news() -> list[str]:
    return refs_de()[:1500]


def test_chrf_of_one_system_equals_the_sacrebleu_command_line(news: list[str], tmp_path: Path) -> None:
    from marginmine.nmt.evaluate import score_bleu

    ref = write(tmp_path / "ref.de", news)
    hyp = write(tmp_path / "hyp.de", damaged(news, 0.2, 1))
    cli = subprocess.run([str(SACREBLEU), str(ref), "-i", str(hyp), "-m", "chrf", "-b", "-w", "4"],
                         capture_output=True, text=True, check=True)
    signature = json.loads(subprocess.run([str(SACREBLEU), str(ref), "-i", str(hyp), "-m", "chrf"],
                                          capture_output=True, text=True, check=True).stdout)["signature"]
    stats = chrf_sentence_stats(hyp.read_text(encoding="utf-8").splitlines(), news)
    ours = float(chrf_from_stats(stats.sum(axis=0)))
    assert 30 < ours < 95 and f"{ours:.4f}" == cli.stdout.strip()
    report = score_bleu(hyp, ref, lang="de")  # what evaluate writes into bleu.json
    assert f"{report['chrf']:.4f}" == cli.stdout.strip()
    assert report["chrf_signature"] == signature == CHRF_METRIC.signature()
    assert "nc:6|nw:0" in signature


def test_corpus_chrf_from_summed_sentence_stats_equals_sacrebleu(news: list[str]) -> None:
    hyps = damaged(news, 0.3, 2)
    hyps[:5] = ["", "", "x", news[3].upper(), news[4] + " " + news[4]]  # empty, one character, case, repeats
    stats = chrf_sentence_stats(hyps, news)
    assert stats.shape == (len(news), CHRF_COLUMNS) and stats.dtype == np.int64
    assert float(chrf_from_stats(stats.sum(axis=0))) == pytest.approx(sacrebleu.corpus_chrf(hyps, [news]).score,
                                                                     abs=1e-6)
    for i in [*range(8), *range(100, len(news), 97)]:  # and sentence by sentence
        assert float(chrf_from_stats(stats[i])) == pytest.approx(sacrebleu.sentence_chrf(hyps[i], [news[i]]).score,
                                                                 abs=1e-6), i
    # vectorised over leading axes: 3 seeds x 2 halves
    halves = np.stack([np.stack([stats[:700].sum(0), stats[700:].sum(0)])] * 3)
    want = [sacrebleu.corpus_chrf(hyps[:700], [news[:700]]).score,
            sacrebleu.corpus_chrf(hyps[700:], [news[700:]]).score]
    assert np.allclose(chrf_from_stats(halves), [want] * 3, atol=1e-6)


@pytest.mark.parametrize("hyps,refs", [([""], ["Ein Satz."]), (["Ein Satz."], [""]), ([""], [""]),
                                       (["a"], ["a"]), (["ab"], ["ba"]), (["Haus"], ["Maus"])])
def test_chrf_edge_cases_equal_sacrebleu(hyps: list[str], refs: list[str]) -> None:
    got = float(chrf_from_stats(chrf_sentence_stats(hyps, refs).sum(axis=0)))
    assert got == pytest.approx(CHRF().corpus_score(hyps, [refs]).score, abs=1e-9)


def seeds_of(news: list[str], drop: float, first_seed: int, n: int = 3) -> np.ndarray:
    return np.stack([chrf_sentence_stats(damaged(news, drop, first_seed + s), news) for s in range(n)])


def test_chrf_bootstrap_finds_a_clearly_better_system_and_not_an_identical_one(news: list[str]) -> None:
    settings = SignificanceSettings(resamples=500)
    good, bad = seeds_of(news, 0.10, 10), seeds_of(news, 0.25, 20)
    r = seed_bootstrap_stats(good, bad, settings, CHRF_METRIC)
    assert r.metric == "chrF" and r.diff > 3 and r.p_value < 0.01 and 0 < r.low < r.diff < r.high
    assert r.score_a == pytest.approx(np.mean([sacrebleu.corpus_chrf(damaged(news, 0.10, 10 + s), [news]).score
                                               for s in range(3)]), abs=1e-6)
    with pytest.raises(AttributeError, match="chrF test has no BLEU"):
        r.bleu_a  # noqa: B018 - a chrF result does not pass for a BLEU one
    same = seed_bootstrap_stats(good, good, settings, CHRF_METRIC)
    assert same.diff == 0.0 and same.p_value == 1.0 and same.low <= 0 <= same.high
    with pytest.raises(MarginmineError, match="chrF statistics must be seeds x sentences x 18"):
        seed_bootstrap_stats(good[..., :10], bad[..., :10], settings, CHRF_METRIC)


def test_the_files_api_tests_chrf_and_bleu_stays_the_default(news: list[str], tmp_path: Path) -> None:
    ref = write(tmp_path / "ref.de", news[:400])
    a = {s: write(tmp_path / f"a{s}.de", damaged(news[:400], 0.1, s)) for s in (1, 2)}
    b = {s: write(tmp_path / f"b{s}.de", damaged(news[:400], 0.4, 10 + s)) for s in (1, 2)}
    settings = SignificanceSettings(resamples=200)
    chrf = seed_bootstrap(a, b, ref, settings, CHRF_METRIC)
    bleu = seed_bootstrap(a, b, ref, settings)
    assert chrf.metric == "chrF" and bleu.metric == "BLEU" and bleu.bleu_a == bleu.score_a
    assert chrf.p_value < 0.01 and bleu.p_value < 0.01 and chrf.note == bleu.note


def test_seed_table_has_chrf_beside_bleu_and_adding_chrf_leaves_bleu_alone(news: list[str], tmp_path: Path) -> None:
    refs = news[:600]
    ref = write(tmp_path / "ref.de", refs)
    runs, drops = [], {"ratio": 0.1, "cosine": 0.15, "random": 0.5}
    for method, drop in drops.items():
        for s in ((1,) if method == "random" else (1, 2)):
            hyp = write(tmp_path / f"{method}{s}.de", damaged(refs, drop, 100 * s + len(method)))
            runs.append(SeedRun(method, "20k", s, "test", hyp, ref))
    settings = SignificanceSettings(resamples=300)
    parts = {"test": {"a": list(range(0, 600, 2)), "b": list(range(1, 600, 2))}}
    rows = seed_comparison(runs, "ratio", settings, parts)
    bleu_only = seed_comparison(runs, "ratio", settings, parts, chrf=False)
    # BLEU's summary and test are the same numbers with or without chrF beside them (same draws)
    assert [(r.summary, r.test) for r in rows] == [(r.summary, r.test) for r in bleu_only]
    assert all(r.chrf is None and r.chrf_test is None for r in bleu_only)
    for r in rows:
        lines = slice(None) if "/" not in r.test_set else slice(0 if r.test_set.endswith("a") else 1, None, 2)
        per_seed = [sacrebleu.corpus_chrf(Path(x.hyp).read_text().splitlines()[lines], [refs[lines]]).score
                    for x in runs if x.method == r.method]
        assert r.chrf.mean == pytest.approx(np.mean(per_seed), abs=1e-6) and r.chrf.seeds == r.summary.seeds
        if r.method == "ratio":
            assert r.chrf_test is None and r.test is None
        else:
            assert r.chrf_test.metric == "chrF" and r.chrf_test.score_a == pytest.approx(r.chrf.mean)
            assert r.chrf_test.note == r.test.note and r.chrf_test.sentences == r.test.sentences
    rnd = next(r for r in rows if r.method == "random" and r.test_set == "test")
    assert rnd.chrf_test.diff < -10 and rnd.chrf_test.p_value < 0.01 and rnd.chrf_test.high < 0


def test_signatures_are_sacrebleus() -> None:
    assert BLEU_METRIC.signature().startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert CHRF_METRIC.signature().startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")


def test_bleu_report_keeps_its_first_line_and_adds_chrf(news: list[str], tmp_path: Path) -> None:
    from marginmine.nmt.evaluate import score_bleu, write_bleu_report

    ref = write(tmp_path / "ref.de", news[:200])
    hyp = write(tmp_path / "hyp.de", damaged(news[:200], 0.2, 3))
    test = score_bleu(hyp, ref, lang="de")
    old = {k: v for k, v in test.items() if not k.startswith("chrf")}  # a set scored before chrF
    out = tmp_path / "bleu.txt"
    sidecar = write_bleu_report(out, test, None, {"news": old}, {"seed": 1})
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"{test['bleu']:.2f}"  # the test sacreBLEU alone, as before
    chrf_lines = [x for x in lines if x.startswith("  chrF ")]
    assert chrf_lines == [f"  chrF {test['chrf']:.2f}  chrF signature: {CHRF_METRIC.signature()}"]
    data = json.loads(sidecar.read_text())
    assert data["chrf"] == round(test["chrf"], 2) and data["test"]["chrf_signature"] == CHRF_METRIC.signature()
    assert data["test"]["chrf"] == pytest.approx(sacrebleu.corpus_chrf(damaged(news[:200], 0.2, 3), [news[:200]]).score)
    assert "chrf" not in data["extra"]["news"]


def test_compare_and_headline_compute_chrf_from_reports_written_before_chrf(tmp_path: Path) -> None:
    """fake_run writes bleu.json as evaluate did before chrF (no chrf key): the tables still get chrF,
    computed from the hypothesis files the reports name, and BLEU is read as before."""
    from marginmine.cli.main import main
    from marginmine.nmt.comparison import headline_text, read_run
    from marginmine.nmt.significance import SEED_TABLE_HEADER
    from test_comparison import REFS, fake_run

    files = [fake_run(tmp_path, "ratio", "20k", 1, 0.10), fake_run(tmp_path, "ratio", "20k", 2, 0.12),
             fake_run(tmp_path, "random", "20k", 1, 0.60)]
    assert all("chrf" not in json.loads(f.read_text())["test"] for f in files)
    runs = [read_run(f) for f in files]
    assert all(s.chrf is None for r in runs for s in r.sets.values())
    out = tmp_path / "cmp"
    assert main(["compare", "--inputs", *map(str, files), "--headline", "ratio", "--tsv", f"{out}.tsv", "--md",
                 f"{out}.md", "--resamples", "200"]) == 0
    lines = (tmp_path / "cmp.tsv").read_text().splitlines()
    assert lines[0].split("\t") == list(SEED_TABLE_HEADER)
    assert SEED_TABLE_HEADER[:12] == ("test_set", "method", "N", "n_seeds", "seeds", "bleu_mean", "bleu_sd", "versus",
                                      "diff", "ci_low", "ci_high", "p_value")  # BLEU's columns keep their names
    rows = {(r["test_set"], r["method"]): r for r in (dict(zip(SEED_TABLE_HEADER, x.split("\t"))) for x in lines[1:])}
    hyp = lambda r: Path(r.sets["test"].hyp).read_text(encoding="utf-8").splitlines()  # noqa: E731
    chrf = {(r.method, r.seed): sacrebleu.corpus_chrf(hyp(r), [REFS]).score for r in runs}
    head, rnd = rows[("test", "ratio")], rows[("test", "random")]
    assert head["chrf_mean"] == f"{(chrf[('ratio', 1)] + chrf[('ratio', 2)]) / 2:.2f}" and head["chrf_diff"] == ""
    assert head["chrf_sd"] == f"{abs(chrf[('ratio', 1)] - chrf[('ratio', 2)]) / 2 ** 0.5:.2f}"
    assert rnd["chrf_mean"] == f"{chrf[('random', 1)]:.2f}" and rnd["chrf_sd"] == ""
    assert float(rnd["chrf_diff"]) < -10 and float(rnd["chrf_high"]) < 0 and float(rnd["chrf_p"]) < 0.01
    assert rnd["bleu_mean"] == f"{runs[2].sets['test'].bleu:.2f}"
    md = (tmp_path / "cmp.md").read_text()
    assert f"Signatures: BLEU `{BLEU_METRIC.signature()}`, chrF `{CHRF_METRIC.signature()}`." in md
    assert "| method | N | seeds | BLEU mean ± sd | per seed (BLEU / chrF) | vs ratio [CI] | p | chrF mean ± sd " \
           "| chrF vs ratio [CI] | chrF p |" in md
    # per seed: BLEU, and chrF where the report has it (these reports predate chrF: BLEU alone)
    assert f"| {runs[0].sets['test'].bleu:.2f}, {runs[1].sets['test'].bleu:.2f} |" in md
    assert f"| **{head['bleu_mean']} ± {head['bleu_sd']}** |" in md
    assert f"**{head['chrf_mean']} ± {head['chrf_sd']}**" in md
    assert (f"| {float(rnd['chrf_diff']):+.2f} [{float(rnd['chrf_low']):+.2f}, {float(rnd['chrf_high']):+.2f}] "
            f"| {float(rnd['chrf_p']):.3f} |") in md
    text = headline_text(runs[:2]).splitlines()
    assert text[0] == head["bleu_mean"]  # the first line is BLEU, as before
    assert text[4].startswith(f"  chrF {head['chrf_mean']}, sd {head['chrf_sd']}  (chrF signature: nrefs:1|")
    assert text[5] == f"  seed 1: {runs[0].sets['test'].bleu:.2f}  chrF {chrf[('ratio', 1)]:.2f}  ({files[0]})"


def _tsv(path: Path, header: list[str], *rows: list[str]) -> Path:
    path.write_text("\n".join("\t".join(x) for x in (header, *rows)) + "\n", encoding="utf-8")
    return path


def test_the_summary_shows_chrf_and_refuses_a_comparison_written_before_chrf(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from marginmine.cli.main import main
    from marginmine.nmt.significance import SEED_TABLE_HEADER

    old = _tsv(tmp_path / "old.tsv", list(SEED_TABLE_HEADER[:12]) + ["note"],
               ["test", "ratio", "20k", "2", "1,2", "6.01", "0.16", "", "", "", "", "", ""])
    new = _tsv(tmp_path / "new.tsv", list(SEED_TABLE_HEADER),
               ["test", "ratio", "20k", "2", "1,2", "6.01", "0.16", "", "", "", "", "", "24.70", "0.93", "", "", "", "",
                ""],
               ["test", "random", "20k", "1", "1", "2.19", "", "ratio", "-3.82", "-4.36", "-3.30", "0.0010", "14.43",
                "", "-10.27", "-11.57", "-8.85", "0.0030", "one seed"])
    args = ["summary", "--scorers", '{"ratio": {"kind": "ratio", "encoder": "dan"}}', "--methods", "ratio", "random",
            "--sizes", "20k", "--tsv", str(tmp_path / "s.tsv"), "--md", str(tmp_path / "s.md"), "--comparison"]
    assert main([*args, str(old)]) == 2
    err = capsys.readouterr().err
    assert f"{old}:1: no column chrf_mean, chrf_sd, chrf_p" in err and "rebuild it with the workflow" in err
    assert main([*args, str(new)]) == 0
    lines = (tmp_path / "s.tsv").read_text().splitlines()
    rows = {r["system"]: r for r in (dict(zip(lines[0].split("\t"), x.split("\t"))) for x in lines[1:])}
    assert (rows["ratio"]["test_bleu"], rows["ratio"]["test_chrf"], rows["ratio"]["chrf_sd"]) == ("6.0", "24.7", "0.9")
    assert (rows["random"]["test_chrf"], rows["random"]["chrf_p"], rows["random"]["p_value"]) == ("14.4", "0.0030",
                                                                                                  "0.0010")
    assert "test BLEU and chrF" in (tmp_path / "s.md").read_text()


def test_the_readme_key_result_refuses_a_comparison_written_before_chrf(tmp_path: Path) -> None:
    from marginmine.errors import InputError
    from marginmine.nmt.significance import SEED_TABLE_HEADER
    from marginmine.report.docsresults import key_result

    _tsv(tmp_path / "comparison.tsv", list(SEED_TABLE_HEADER[:12]) + ["note"],
         ["test", "ratio", "20k", "2", "1,2", "6.01", "0.16", "", "", "", "", "", ""])
    with pytest.raises(InputError, match="no column chrf_mean, chrf_sd, chrf_diff, chrf_low, chrf_high, chrf_p"):
        key_result(tmp_path, "abc")
