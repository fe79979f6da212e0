"""BLEU over training seeds: mean/sd, the two-level paired bootstrap, its refusals and the seed table.

Hypotheses are made from real references (newstest2014 German) by dropping words with a seeded
RNG, so the direction and rough size of every difference is known by construction.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from marginmine.errors import InputError, MarginmineError
from marginmine.nmt.significance import (
    SEED_TABLE_HEADER,
    SeedRun,
    SignificanceSettings,
    bleu_from_stats,
    file_stats,
    seed_bootstrap,
    seed_bootstrap_stats,
    seed_comparison,
    seed_table_tsv,
    sentence_stats,
    summarize_seeds,
    validate_seeds,
)


def drop_words(lines: list[str], q: float, seed: int) -> list[str]:
    """Each word dropped with probability ``q`` (seeded)."""
    rng = np.random.default_rng(seed)
    return [" ".join(w for w in line.split() if rng.random() >= q) for line in lines]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def news(real_data: Path) -> list[str]:
    lines = (real_data / "wmt-newstest-ende" / "newstest2014.de").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3003, "newstest2014.de should have 3003 lines"
    return lines


@pytest.fixture(scope="module")
def big(news: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """2,000 sentences, 3 seeds x 2 methods as files, and their statistics (computed once)."""
    d = tmp_path_factory.mktemp("big")
    refs = news[:2000]
    ref = write(d / "ref.de", refs)
    files = {m: {s: write(d / f"{m}.{s}.de", drop_words(refs, q, 100 * i + s)) for s in (1, 2, 3)}
             for i, (m, q) in enumerate((("a", 0.20), ("b", 0.25)))}
    stats = {m: np.stack([file_stats(f[s], ref) for s in (1, 2, 3)]) for m, f in files.items()}
    return {"refs": refs, "ref": ref, "files": files, "stats": stats}


# --- the sufficient statistics ------------------------------------------------------------------

def test_bleu_from_summed_stats_equals_corpus_bleu_on_real_sentences(big: dict, news: list[str]) -> None:
    refs = big["refs"]
    shuffled = list(refs)
    np.random.default_rng(7).shuffle(shuffled)  # a wrong sentence on nearly every line: low, non-zero BLEU
    cases = {"shuffled": shuffled, "dropped": big["ref"].parent.joinpath("a.1.de").read_text().splitlines(),
             "other_lines": news[1000:3000]}
    for name, hyps in cases.items():
        want = sacrebleu.corpus_bleu(hyps, [refs]).score
        got = float(bleu_from_stats(sentence_stats(hyps, refs).sum(axis=0)))
        assert abs(got - want) < 1e-6, name
        assert 0 < want < 100
    assert float(bleu_from_stats(sentence_stats(refs, refs).sum(axis=0))) == pytest.approx(100.0, abs=1e-9)


@pytest.mark.parametrize("stats", [
    [10, 12, 8, 5, 3, 1, 10, 9, 8, 7],   # shorter than the reference: brevity penalty
    [12, 10, 8, 5, 0, 0, 12, 11, 10, 9],  # no 3- and 4-gram matches: 'exp' smoothing halves twice
    [9, 9, 4, 0, 1, 0, 9, 8, 7, 6],      # a zero order between non-zero ones
    [0, 5, 0, 0, 0, 0, 0, 0, 0, 0],      # empty hypothesis
    [3, 3, 2, 1, 0, 0, 3, 2, 1, 0],      # no 4-grams at all: sacreBLEU gives 0
    [7, 7, 0, 0, 0, 0, 7, 6, 5, 4],      # nothing matches
])
def test_bleu_from_stats_matches_sacrebleu_compute_bleu_on_edge_cases(stats: list[int]) -> None:
    want = BLEU.compute_bleu(stats[2:6], stats[6:10], stats[0], stats[1], smooth_method="exp").score
    assert float(bleu_from_stats(np.array(stats))) == pytest.approx(want, abs=1e-9)


# --- the summary over seeds ---------------------------------------------------------------------

def test_summary_mean_and_sample_sd_are_the_hand_computed_values() -> None:
    s = summarize_seeds({3: 17.0, 1: 10.0, 2: 12.0})
    assert s.mean == pytest.approx(13.0) and s.sd == pytest.approx(math.sqrt((9 + 1 + 16) / 2))
    assert s.n_seeds == 3 and s.seeds == (1, 2, 3)
    one = summarize_seeds({5: 4.25})
    assert one.mean == 4.25 and one.sd is None and one.n_seeds == 1
    with pytest.raises(MarginmineError, match="no seeds"):
        summarize_seeds({})


# --- the test on hand-made cases ----------------------------------------------------------------

def test_identical_systems_give_p_one_and_an_interval_around_zero(big: dict) -> None:
    r = seed_bootstrap_stats(big["stats"]["a"], big["stats"]["a"])
    assert r.diff == 0.0 and r.bleu_a == r.bleu_b and r.p_value == 1.0
    assert r.low < 0 < r.high
    assert (r.n_seeds_a, r.n_seeds_b, r.sentences, r.resamples) == (3, 3, 2000, 1000)
    assert r.levels == "seeds+sentences"


def test_a_system_better_on_every_sentence_and_seed_is_significant(news: list[str]) -> None:
    refs = news[:400]
    a = {s: drop_words(refs, 0.1, s) for s in (1, 2, 3)}
    # B = A of the same seed with its first remaining word dropped as well: never better on any sentence
    b = {s: [" ".join(h.split()[1:]) for h in a[s]] for s in (1, 2, 3)}
    sa = np.stack([sentence_stats(a[s], refs) for s in (1, 2, 3)])
    sb = np.stack([sentence_stats(b[s], refs) for s in (1, 2, 3)])
    assert (sa[:, :, 2:6] >= sb[:, :, 2:6]).all() and (sa[:, :, 2:6] > sb[:, :, 2:6]).any(axis=2).mean() > 0.9
    r = seed_bootstrap_stats(sa, sb)
    assert r.p_value < 0.01 and r.low > 0 and r.diff > 3
    assert r.low <= r.diff <= r.high


def test_one_bad_seed_is_significant_only_when_seed_variance_is_ignored(news: list[str]) -> None:
    refs = news[:500]
    # A: two good seeds and one bad; B: three middling ones. A's mean is ~3 BLEU higher.
    sa = np.stack([sentence_stats(drop_words(refs, q, s), refs) for s, q in enumerate((0.1, 0.1, 0.45))])
    sb = np.stack([sentence_stats(drop_words(refs, 0.22, 10 + s), refs) for s in range(3)])
    sentences_only = seed_bootstrap_stats(sa, sb, SignificanceSettings(resample_seeds=False))
    two_level = seed_bootstrap_stats(sa, sb)
    assert 2 < two_level.diff < 4 and sentences_only.diff == two_level.diff
    assert sentences_only.p_value < 0.01 and sentences_only.low > 0 and sentences_only.levels == "sentences"
    assert two_level.p_value > 0.2 and two_level.low < 0 < two_level.high


def test_two_and_one_seeds_are_flagged_and_the_correction_widens_the_interval(big: dict) -> None:
    a, b = big["stats"]["a"][:2], big["stats"]["b"][:2]
    corrected = seed_bootstrap_stats(a, b)
    plain = seed_bootstrap_stats(a, b, SignificanceSettings(seed_correction=False))
    assert corrected.diff == plain.diff
    assert corrected.high - corrected.low > plain.high - plain.low
    assert "one degree of freedom" in corrected.note
    single = seed_bootstrap_stats(a, b[:1])
    assert "method B has one seed" in single.note and single.n_seeds_b == 1
    assert seed_bootstrap_stats(big["stats"]["a"], big["stats"]["b"]).note == ""


def test_same_seed_same_result_other_seed_other_draws(big: dict) -> None:
    a, b = big["stats"]["a"], big["stats"]["b"]
    first = seed_bootstrap_stats(a, b, SignificanceSettings(seed=3))
    assert seed_bootstrap_stats(a, b, SignificanceSettings(seed=3)) == first
    other = seed_bootstrap_stats(a, b, SignificanceSettings(seed=4))
    assert other.diff == first.diff and (other.low, other.high) != (first.low, first.high)


def test_two_thousand_sentences_three_seeds_two_methods_in_well_under_ten_seconds(big: dict) -> None:
    t0 = time.perf_counter()
    r = seed_bootstrap_stats(big["stats"]["a"], big["stats"]["b"], SignificanceSettings(resamples=1000))
    seconds = time.perf_counter() - t0
    assert seconds < 10, f"{seconds:.2f} s"
    assert r.sentences == 2000 and r.resamples == 1000 and r.diff > 0  # a drops fewer words than b


# --- refusals -----------------------------------------------------------------------------------

def test_a_missing_hypothesis_file_is_refused_by_name(big: dict, tmp_path: Path) -> None:
    gone = tmp_path / "b.2.de"
    with pytest.raises(InputError, match="hypothesis file is missing") as exc:
        seed_bootstrap(big["files"]["a"], {1: big["files"]["b"][1], 2: gone}, big["ref"])
    assert exc.value.path == str(gone)


@pytest.mark.parametrize("n_lines", [1999, 2001, 0])
def test_a_short_or_long_hypothesis_file_is_refused_with_both_counts(big: dict, tmp_path: Path,
                                                                      n_lines: int) -> None:
    lines = (big["files"]["b"][3].read_text().splitlines() * 2)[:n_lines]
    bad = write(tmp_path / "cut.de", lines)
    with pytest.raises(InputError) as exc:
        seed_bootstrap(big["files"]["a"], {1: big["files"]["b"][1], 3: bad}, big["ref"])
    msg = str(exc.value)
    assert msg.startswith(str(bad)) and f"has {n_lines} lines" in msg
    assert f"the reference {big['ref']} has 2000" in msg


def test_a_missing_or_empty_reference_is_refused(big: dict, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="reference file is missing"):
        seed_bootstrap(big["files"]["a"], big["files"]["b"], tmp_path / "nope.de")
    with pytest.raises(InputError, match="reference is empty"):
        seed_bootstrap(big["files"]["a"], big["files"]["b"], write(tmp_path / "empty.de", []))


def test_methods_without_seeds_are_refused(big: dict) -> None:
    with pytest.raises(MarginmineError, match="method B has no seeds"):
        seed_bootstrap(big["files"]["a"], {}, big["ref"])
    with pytest.raises(MarginmineError, match="method A has no seeds"):
        seed_bootstrap_stats(big["stats"]["a"][:0], big["stats"]["b"])
    with pytest.raises(MarginmineError, match="different test sets"):
        seed_bootstrap_stats(big["stats"]["a"], big["stats"]["b"][:, :1999])


@pytest.mark.parametrize(("seeds", "message"), [
    ([], "is empty"),
    ([1, 2, 1], r"repeats seed\(s\) \[1\]"),
    ([1, 2.5], "must be integers"),
    ([True], "must be integers"),
])
def test_bad_seed_lists_are_refused(seeds: list, message: str) -> None:
    with pytest.raises(MarginmineError, match=message):
        validate_seeds(seeds)


def test_seed_lists_that_are_fine_pass_through() -> None:
    assert validate_seeds([3, 1, 2]) == (3, 1, 2) and validate_seeds([7]) == (7,)


@pytest.mark.parametrize("kwargs", [{"resamples": 10}, {"confidence": 1.0}, {"confidence": 0.2}])
def test_settings_are_validated(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        SignificanceSettings(**kwargs)


# --- the seed table for marginmine compare ------------------------------------------------------

@pytest.fixture(scope="module")
def table_runs(news: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """ratio (headline, 3 seeds), cosine (2), random (1) at 20k on two test sets; cosine also at 5k."""
    d = tmp_path_factory.mktemp("table")
    tests = {"news_a": news[:300], "news_b": news[2000:2250]}
    refs = {t: write(d / f"{t}.ref", lines) for t, lines in tests.items()}
    plan = [("ratio", "20k", (1, 2, 3), 0.15), ("cosine", "20k", (1, 2), 0.25), ("random", "20k", (1,), 0.5),
            ("cosine", "5k", (1, 2), 0.3)]
    runs, texts = [], {}
    for t, lines in tests.items():
        for i, (method, n, seeds, q) in enumerate(plan):
            for s in seeds:
                hyp = write(d / f"{method}.{n}.{s}.{t}.hyp", drop_words(lines, q, 1000 * i + 10 * s + len(t)))
                runs.append(SeedRun(method, n, s, t, hyp, refs[t]))
                texts[(t, method, n, s)] = hyp.read_text().splitlines()
    return {"runs": runs, "tests": tests, "texts": texts}


def test_seed_table_means_sds_and_tests_against_the_headline(table_runs: dict) -> None:
    rows = seed_comparison(list(reversed(table_runs["runs"])), "ratio")
    keys = [(r.test_set, r.n, r.method) for r in rows]
    assert keys == [("news_a", "5k", "cosine"), ("news_a", "20k", "ratio"), ("news_a", "20k", "cosine"),
                    ("news_a", "20k", "random"), ("news_b", "5k", "cosine"), ("news_b", "20k", "ratio"),
                    ("news_b", "20k", "cosine"), ("news_b", "20k", "random")]
    texts, tests = table_runs["texts"], table_runs["tests"]
    for r in rows:
        bleu = {s: sacrebleu.corpus_bleu(texts[(r.test_set, r.method, r.n, s)], [tests[r.test_set]]).score
                for s in r.summary.seeds}
        want = summarize_seeds(bleu)
        assert r.summary.seeds == want.seeds and r.summary.mean == pytest.approx(want.mean, abs=1e-6)
        assert (r.summary.sd is None) == (want.sd is None)
        assert r.summary.sd is None or r.summary.sd == pytest.approx(want.sd, abs=1e-6)
        if r.method == "ratio" or r.n == "5k":  # the headline itself; no headline run at 5k
            assert r.versus is None and r.test is None
            continue
        assert r.versus == "ratio" and r.test is not None
        assert r.test.bleu_a == pytest.approx(r.summary.mean) and r.test.diff < 0  # ratio drops fewest words
        assert r.test.p_value < 0.01 and r.test.high < 0
    random_a = rows[3].test
    assert random_a is not None and "method A has one seed" in random_a.note and random_a.n_seeds_b == 3
    # the table's test is the pairwise test on the same files
    by = {(r.method, r.seed): r.hyp for r in table_runs["runs"] if r.test_set == "news_a" and r.n == "20k"}
    direct = seed_bootstrap({s: by[("cosine", s)] for s in (1, 2)}, {s: by[("ratio", s)] for s in (1, 2, 3)},
                            table_runs["runs"][0].ref)
    assert rows[2].test == direct


def test_seed_table_tsv(table_runs: dict) -> None:
    rows = seed_comparison(table_runs["runs"], "ratio")
    lines = [x.split("\t") for x in seed_table_tsv(rows).splitlines()]
    assert tuple(lines[0]) == SEED_TABLE_HEADER and len(lines) == 1 + len(rows)
    cells = [dict(zip(SEED_TABLE_HEADER, x)) for x in lines[1:]]
    head = cells[1]
    assert (head["method"], head["n_seeds"], head["seeds"]) == ("ratio", "3", "1,2,3")
    assert head["versus"] == head["p_value"] == head["diff"] == ""
    assert head["bleu_mean"] == f"{rows[1].summary.mean:.2f}"
    assert head["bleu_sd"] == f"{rows[1].summary.sd:.2f}"
    rnd = cells[3]
    assert rnd["method"] == "random" and rnd["bleu_sd"] == "" and rnd["versus"] == "ratio"
    assert rows[3].test is not None and "one seed" in rnd["note"]
    assert float(rnd["p_value"]) == pytest.approx(rows[3].test.p_value, abs=1e-4)
    assert float(rnd["ci_low"]) <= float(rnd["diff"]) <= float(rnd["ci_high"])


def test_seed_table_refusals(table_runs: dict, tmp_path: Path) -> None:
    runs = table_runs["runs"]
    with pytest.raises(MarginmineError, match="no runs"):
        seed_comparison([], "ratio")
    with pytest.raises(MarginmineError, match="headline method 'laser' has no runs"):
        seed_comparison(runs, "laser")
    twice = SeedRun("cosine", "20k", 2, "news_a", tmp_path / "again.hyp", runs[0].ref)
    with pytest.raises(MarginmineError, match="cosine.20k seed 2 on news_a is given twice"):
        seed_comparison([*runs, twice], "ratio")
    other_ref = write(tmp_path / "other.ref", table_runs["tests"]["news_a"])
    with pytest.raises(InputError, match="must be scored against the same reference") as exc:
        seed_comparison([*runs, SeedRun("cosine", "20k", 9, "news_a", runs[0].hyp, other_ref)], "ratio")
    assert exc.value.path == str(other_ref)
    short = write(tmp_path / "short.hyp", table_runs["tests"]["news_b"][:249])
    with pytest.raises(InputError, match="has 249 lines but the reference .*news_b.ref has 250"):
        seed_comparison([*runs, SeedRun("random", "20k", 2, "news_b", short, runs[-1].ref)], "ratio")
    with pytest.raises(InputError, match="hypothesis file is missing"):
        seed_comparison([*runs, SeedRun("random", "20k", 2, "news_b", tmp_path / "gone.hyp", runs[-1].ref)],
                        "ratio")
