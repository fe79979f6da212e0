"""Filtering-mode scoring files, selection, mining, the BUCC-style benchmark and filter AUC."""

from __future__ import annotations

import gzip
import hashlib
import itertools
from pathlib import Path

import numpy as np
import pytest

from doubles import TrigramEncoder
from marginmine.cli.main import main
from marginmine.errors import InputError, MarginmineError
from marginmine.evaluate.bucc import build_benchmark, evaluate_split_pair, read_split
from marginmine.evaluate.filtereval import read_paracrawl_eval
from marginmine.io.sizes import parse_count
from marginmine.preprocess.pipeline import PreprocessSettings
from marginmine.scoring import make_kind
from marginmine.scoring.files import (
    EncoderEmbeddings,
    ScoreSettings,
    iter_pairs,
    read_score_names,
    read_scores,
    score_file,
)
from marginmine.scoring.metrics import precision_at, roc_auc
from marginmine.scoring.mining import Sentences, check_pairs, embed_unique, mine_arrays
from marginmine.scoring.selection import Source, optimal_threshold, prf_at, select


def settings_of(kinds: tuple[str, ...] = ("ratio", "cosine"), k: int = 4, batch: int = 5_000_000) -> ScoreSettings:
    return ScoreSettings(tuple((n, make_kind(n, {"k": k} if n in ("ratio", "distance") else {})) for n in kinds), batch)


def sha(path: Path) -> str:
    return hashlib.sha256(gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def real_pairs(paracrawl_tsv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 2,000 real ParaCrawl en-de pairs as a src/tgt TSV."""
    out = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    lines = [ln.split("\t") for ln in paracrawl_tsv.read_text(encoding="utf-8").splitlines()]
    out.write_text("".join(f"{c[2]}\t{c[3]}\n" for c in lines), encoding="utf-8")
    return out


def test_batches_scored_in_one_job_or_as_separate_jobs_are_byte_identical(real_pairs: Path, tmp_path: Path) -> None:
    settings = settings_of(("ratio", "distance", "cosine"), 4, 700)
    emb = EncoderEmbeddings(TrigramEncoder(), "en", "de")
    whole = tmp_path / "whole.tsv.gz"
    assert score_file([str(real_pairs)], whole, emb, settings) == 2000
    lines = real_pairs.read_text(encoding="utf-8").splitlines(keepends=True)
    parts = []
    for n, start in enumerate(range(0, 2000, 700)):
        piece = tmp_path / f"piece{n}.tsv"
        piece.write_text("".join(lines[start:start + 700]), encoding="utf-8")
        parts.append(tmp_path / f"piece{n}.scores.tsv.gz")
        score_file([str(piece)], parts[-1], emb, settings)
    head = b"ratio\tdistance\tcosine\n"
    bodies = [gzip.open(p).read() for p in parts]
    assert all(b.startswith(head) for b in bodies)  # every file names its columns
    joined = head + b"".join(b[len(head):] for b in bodies)
    assert hashlib.sha256(joined).hexdigest() == sha(whole)
    # even the gzip members (the header is a member of its own)
    members = [p.read_bytes() for p in parts]
    header_member = gzip.compress(head, compresslevel=3, mtime=0)
    assert header_member + b"".join(m[len(header_member):] for m in members) == whole.read_bytes()
    again = tmp_path / "again.tsv.gz"
    score_file([str(real_pairs)], again, EncoderEmbeddings(TrigramEncoder(), "en", "de"), settings)
    assert sha(again) == sha(whole)
    rows = [ln.split("\t") for ln in gzip.open(whole, "rt").read().splitlines()]
    assert len(rows) == 2001 and all(len(r) == 3 for r in rows)
    assert read_score_names(whole) == ["ratio", "distance", "cosine"]
    ratio, cosine = read_scores(whole, "ratio"), read_scores(whole, "cosine")
    assert ratio.shape == (2000,) and not np.array_equal(ratio, cosine)
    # the batch size is part of the result: other batches, other neighbourhoods
    other = tmp_path / "other.tsv"
    score_file([str(real_pairs)], other, emb, settings_of(("ratio", "distance", "cosine"), 4, 2000))
    assert sha(other) != sha(whole)


def test_score_resumes_after_a_kill_from_the_last_batch(real_pairs: Path, tmp_path: Path) -> None:
    settings = settings_of(("ratio",), 4, 500)
    ref = tmp_path / "ref.tsv"
    score_file([str(real_pairs)], ref, EncoderEmbeddings(TrigramEncoder(), "en", "de"), settings)
    out = tmp_path / "out.tsv"
    killed = TrigramEncoder(fail_after=5)  # 2 encode calls per batch: dies in the third batch
    with pytest.raises(KeyboardInterrupt):
        score_file([str(real_pairs)], out, EncoderEmbeddings(killed, "en", "de"), settings)
    assert not out.exists() and (tmp_path / "out.tsv.part").exists()
    counting = TrigramEncoder()
    score_file([str(real_pairs)], out, EncoderEmbeddings(counting, "en", "de"), settings)
    assert counting.calls == 4  # batches 3 and 4 only
    assert out.read_bytes() == ref.read_bytes()


def test_score_input_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("a b c\tx y z\nonly one column\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.tsv:2: has 1 column"):
        list(iter_pairs([str(bad)]))
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("1\n2\n3\n")
    b.write_text("1\n2\n")
    with pytest.raises(InputError, match="a.txt: has more lines than .*b.txt"):
        list(iter_pairs([str(a), str(b)]))
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        score_file([str(empty)], tmp_path / "o.tsv", EncoderEmbeddings(TrigramEncoder(), "en", "de"), settings_of())
    assert main(["score", "--input", str(bad), "--output", str(tmp_path / "o.tsv"), "--encoder", str(tmp_path)]) == 2


def _shards(tmp_path: Path, scores: list[list[float]]) -> list[Source]:
    sources = []
    for n, sc in enumerate(scores):
        pairs, score = tmp_path / f"p{n}.tsv", tmp_path / f"s{n}.tsv"
        pairs.write_text("".join(f"src {n}-{i}\ttgt {n}-{i}\tid{n}-{i}\n" for i in range(len(sc))))
        score.write_text("ratio\tcosine\n" + "".join(f"{v:.6f}\t0.5\n" for v in sc))
        sources.append(Source(pairs, score))
    return sources


def test_top_n_over_shards_breaks_ties_by_corpus_order(tmp_path: Path) -> None:
    sources = _shards(tmp_path, [[0.1, 0.9, 0.5, 0.5], [0.5, 0.8, 0.2]])
    out = tmp_path / "top.tsv"
    rep = select(sources, out, "ratio", n=4)
    rows = [ln.split("\t") for ln in out.read_text().splitlines()]
    assert [r[2] for r in rows] == ["0.900000", "0.500000", "0.500000", "0.800000"]
    assert [r[3] for r in rows] == ["id0-1", "id0-2", "id0-3", "id1-1"]  # the third 0.5 (shard 1) is out
    assert rep.selected == 4 and rep.total == 7 and rep.threshold == 0.5
    assert sum(rep.histogram["counts"]) == 7
    select(sources, out, "ratio", n=100)
    assert len(out.read_text().splitlines()) == 7
    select(sources, out, "ratio", threshold=0.8)
    assert len(out.read_text().splitlines()) == 2


def test_random_and_unfiltered_methods(tmp_path: Path) -> None:
    sources = [Source(s.pairs, None) for s in _shards(tmp_path, [[0.0] * 50, [0.0] * 30])]
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    select(sources, a, "random", n=20, seed=7)
    select(sources, b, "random", n=20, seed=7)
    assert a.read_bytes() == b.read_bytes() and len(a.read_text().splitlines()) == 20
    select(sources, b, "random", n=20, seed=8)
    assert a.read_bytes() != b.read_bytes()
    rep = select(sources, b, "unfiltered")
    assert rep.selected == 80 and len(b.read_text().splitlines()) == 80


def test_select_refuses_score_files_of_another_length(tmp_path: Path) -> None:
    sources = _shards(tmp_path, [[0.1, 0.2, 0.3]])
    sources[0].scores.write_text("ratio\tcosine\n0.1\t0.5\n0.2\t0.5\n")  # type: ignore[union-attr]
    with pytest.raises(InputError, match="has 2 scores"):
        select(sources, tmp_path / "o.tsv", "ratio", n=1)
    assert not (tmp_path / "o.tsv").exists()
    with pytest.raises(MarginmineError, match="not a count"):
        parse_count("ten")
    assert [parse_count(t) for t in ("500", "20k", "1.5M", "10M")] == [500, 20_000, 1_500_000, 10_000_000]


def test_optimal_threshold_equals_trying_every_threshold() -> None:
    rng = np.random.default_rng(11)
    scores = np.round(rng.random(400), 2)  # many ties
    correct = rng.random(400) < scores
    n_gold = int(correct.sum()) + 25  # gold pairs no candidate found
    best = optimal_threshold(scores, correct, n_gold)
    brute = max((prf_at(scores, correct, n_gold, t) for t in np.unique(scores)), key=lambda r: (r.f1, r.threshold))
    assert best.f1 == pytest.approx(brute.f1) and best.threshold == brute.threshold
    assert prf_at(scores, correct, n_gold, best.threshold) == best
    hand = optimal_threshold(np.array([0.9, 0.8, 0.7]), np.array([True, False, True]), 2)
    assert (hand.threshold, hand.precision, hand.recall) == (0.7, 2 / 3, 1.0)


def test_roc_auc_equals_pairwise_count_and_real_shipped_scores(paracrawl_tsv: Path) -> None:
    rng = np.random.default_rng(2)
    s = np.round(rng.random(300), 1)
    y = rng.random(300) < 0.4
    pairwise = np.mean([1.0 if a > b else 0.5 if a == b else 0.0
                        for a, b in itertools.product(s[y], s[~y])])
    assert roc_auc(s, y) == pytest.approx(pairwise)
    assert precision_at(np.array([3, 2, 1.0]), np.array([True, False, True]), 2) == 0.5
    data = read_paracrawl_eval(paracrawl_tsv)
    assert len(data.src) == 2000 and int(data.positive.sum()) == 1048
    assert roc_auc(data.shipped["bicleaner"], data.positive) == pytest.approx(0.547, abs=0.001)
    assert roc_auc(data.shipped["zipporah"], data.positive) == pytest.approx(0.590, abs=0.001)


def test_mining_checks_count_every_removed_candidate(tmp_path: Path) -> None:
    src = tmp_path / "en.txt"
    tgt = tmp_path / "de.txt"
    src.write_text("The house is very small and old.\nThe house is very small and old.\n\n"
                   "Completely identical sentence here.\nI like to read books in the evening.\nShort.\n")
    tgt.write_text("Das Haus ist sehr klein und alt.\nCompletely identical sentence here.\n"
                   "Ich lese abends gern Bücher.\nKurz.\n")
    s, t = Sentences.read_file(src), Sentences.read_file(tgt)
    assert s.read == 6 and len(s.texts) == 4 and s.lines.tolist() == [1, 4, 5, 6]
    enc = TrigramEncoder()
    mined = mine_arrays(embed_unique(enc, s.texts, "en"), embed_unique(enc, t.texts, "de"), 2, "ratio", "max")
    keep, ledger = check_pairs(mined, s, t, PreprocessSettings("en", "de"), threshold=None)
    assert ledger.total_in == len(mined) == ledger.total_kept + sum(ledger.removed.values())
    reasons = {r for (_, r, _) in ledger.removed}
    kept_pairs = {(s.texts[i], t.texts[j]) for i, j in zip(mined.src[keep], mined.tgt[keep])}
    assert ("Completely identical sentence here.", "Completely identical sentence here.") not in kept_pairs
    assert "copy" in reasons or "wrong_lang_tgt" in reasons
    keep_hi, ledger_hi = check_pairs(mined, s, t, None, threshold=float(mined.score.max()) + 1)
    assert not keep_hi.any() and ledger_hi.removed[("threshold", "below_threshold", "6-10")] >= 1


@pytest.fixture(scope="module")
def bucc_dir(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    w = real_data / "wmt-newstest-ende"
    out = tmp_path_factory.mktemp("bucc")
    gold = {"train": [(str(w / "newstest2015.en"), str(w / "newstest2015.de"))],
            "test": [(str(w / "newstest2017.en"), str(w / "newstest2017.de"))]}
    mono_en = (real_data / "mono-en-wiki-web" / "wikitext2.valid+test.sentences.detok.en").read_text().splitlines()
    mono_de = (real_data / "mono-de-news" / "10kGNAD.test.sentences.de").read_text().splitlines()
    build_benchmark(gold, mono_en[:8000], mono_de[:8000], out, share=0.025, distractors=500)
    return out


def test_bucc_benchmark_hides_real_gold_pairs(real_data: Path, bucc_dir: Path) -> None:
    w = real_data / "wmt-newstest-ende"
    truth = dict(zip((w / "newstest2015.en").read_text().splitlines(),
                     (w / "newstest2015.de").read_text().splitlines()))
    sp = read_split(bucc_dir, "train")
    share = len(sp.gold) / len(sp.src)
    assert 0.02 <= share <= 0.03
    assert all(truth[sp.src[i]].strip() == sp.tgt[j] for i, j in sp.gold)
    assert len(set(sp.src)) == len(sp.src) and len(set(sp.tgt)) == len(sp.tgt)
    test = read_split(bucc_dir, "test")
    assert not set(sp.src) & set(test.src), "train and test pools are disjoint"


def test_bucc_pools_capped_by_mono_max_keep_the_first_lines_and_the_gold_share(real_data: Path, tmp_path: Path) -> None:
    """``mono_max``: the first N distinct monolingual lines per side, half per split; the gold share
    of each pool stays what ``share`` says (fewer gold pairs for the smaller pools)."""
    w = real_data / "wmt-newstest-ende"
    gold = {"train": [(str(w / "newstest2015.en"), str(w / "newstest2015.de"))],
            "test": [(str(w / "newstest2017.en"), str(w / "newstest2017.de"))]}
    mono_en = (real_data / "mono-en-wiki-web" / "wikitext2.valid+test.sentences.detok.en").read_text().splitlines()
    mono_de = (real_data / "mono-de-news" / "10kGNAD.test.sentences.de").read_text().splitlines()
    summary = build_benchmark(gold, mono_en, mono_de, tmp_path, share=0.025, distractors=500, mono_max=1000)
    assert summary["mono_lines"] == {"src": 1000, "tgt": 1000}
    first = [t for t in dict.fromkeys(mono_en) if t][:1000]  # the first distinct lines (no two the same here)
    train, test = read_split(tmp_path, "train"), read_split(tmp_path, "test")
    assert set(first[:500]) <= set(train.src) and set(first[500:]) <= set(test.src)
    assert not (set(mono_en) - set(first)) & (set(train.src) | set(test.src))  # nothing past the cap
    for sp in (train, test):
        assert 1000 <= len(sp.src) < 1100 and 0.02 <= len(sp.gold) / len(sp.src) <= 0.03
    with pytest.raises(MarginmineError, match="mono_max must be >= 0"):
        build_benchmark(gold, mono_en, mono_de, tmp_path / "x", mono_max=-1)


def perfect_embeddings(bucc_dir: Path) -> list:
    """(x, y, split) of train and test with a perfect encoder: gold pairs share one random vector."""
    data = []
    for split in ("train", "test"):
        sp = read_split(bucc_dir, split)
        rng = np.random.default_rng(0)
        x = rng.normal(size=(len(sp.src), 64))
        y = rng.normal(size=(len(sp.tgt), 64))
        for i, j in sp.gold:
            y[j] = x[i]  # gold pairs share one vector
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        data.append((x.astype(np.float32), y.astype(np.float32), sp))
    return data


def test_bucc_evaluation_with_a_perfect_encoder_scores_one(bucc_dir: Path) -> None:
    data = perfect_embeddings(bucc_dir)
    rows = evaluate_split_pair(data[0], data[1], 4, [("ratio", "ratio")], "perfect", retrievals=["max", "intersect"])
    assert all(r.train_f1 == pytest.approx(1.0) and r.precision == 1.0 and r.f1 > 0.98 for r in rows), rows


def test_cli_select_writes_report(tmp_path: Path, capsys) -> None:
    sources = _shards(tmp_path, [[0.3, 0.7], [0.9]])
    out, rep = tmp_path / "sel.tsv.gz", tmp_path / "sel.json"
    rc = main(["select", "--pairs", *(str(s.pairs) for s in sources), "--scores", *(str(s.scores) for s in sources),
               "--method", "ratio", "-n", "2", "--output", str(out), "--report", str(rep)])
    assert rc == 0
    assert [ln.split("\t")[2] for ln in gzip.open(out, "rt").read().splitlines()] == ["0.700000", "0.900000"]
    assert read_scores(sources[0].scores, "ratio").tolist() == [0.3, 0.7]  # type: ignore[arg-type]
    rc = main(["select", "--pairs", *(str(s.pairs) for s in sources), "--scores", *(str(s.scores) for s in sources),
               "--method", "cosine", "-n", "2", "--output", str(out)])
    assert rc == 0 and [ln.split("\t")[2] for ln in gzip.open(out, "rt").read().splitlines()] == ["0.500000"] * 2


def test_score_files_are_found_by_column_name_and_headerless_ones_refused(tmp_path: Path, capsys) -> None:
    sources = _shards(tmp_path, [[0.3, 0.7]])
    pairs, scores = str(sources[0].pairs), sources[0].scores
    assert scores is not None
    rc = main(["select", "--pairs", pairs, "--scores", str(scores), "--method", "distance", "-n", "1",
               "--output", str(tmp_path / "d.tsv.gz")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{scores}: has no score column 'distance' (its columns: ratio, cosine)" in err, err
    old = tmp_path / "old.tsv"
    old.write_text("0.3\t0.5\n0.7\t0.5\n")  # written before score files had a header
    rc = main(["select", "--pairs", pairs, "--scores", str(old), "--method", "ratio", "-n", "1",
               "--output", str(tmp_path / "o.tsv.gz")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{old}:1: has no header line naming its score columns" in err and "re-run" in err, err
    assert not (tmp_path / "o.tsv.gz").exists() and not (tmp_path / "d.tsv.gz").exists()


def test_eq9_and_eq10_mine_on_the_bucc_style_benchmark(bucc_dir: Path) -> None:
    """Both kinds are margin functions the mining benchmark retrieves with (every retrieval); with
    a perfect encoder they find the gold pairs."""
    data = perfect_embeddings(bucc_dir)
    rows = evaluate_split_pair(data[0], data[1], 4, [("e9", "eq9"), ("e10", "eq10")], "perfect")
    assert {(r.scorer, r.retrieval) for r in rows} == {(s, r) for s in ("e9", "e10")
                                                       for r in ("fwd", "bwd", "intersect", "max")}
    assert all(r.precision == 1.0 and r.f1 > 0.98 for r in rows), rows


def test_selection_sizes_as_shares_of_the_expected_pairs() -> None:
    from marginmine.errors import MarginmineError
    from marginmine.io.sizes import count_label, parse_count, resolve_sizes

    assert resolve_sizes(["10%", "30%", "1M"], 5_000_000) == ["500k", "1.5M", "1M"]
    assert resolve_sizes(["10%"], 12_345) == ["1235"]  # 1,234.5 rounds half up
    assert resolve_sizes(["0.2%"], 4_590_000_000) == ["9180k"]
    for n in (1, 999, 1000, 1100, 64_100, 64_400_000, 123_456_789, 10**9):
        assert parse_count(count_label(n)) == n
    assert parse_count("64.1k") == 64_100  # exact, not 64,099.99...
    assert resolve_sizes(["0.7%"], 46_500) == ["326"]  # 325.5 rounds half up, exactly
    for bad in (["0%"], ["100%"], ["x%"], ["10%", "500k"], ["500k", "0.5M"], ["500k", "500K"]):
        with pytest.raises(MarginmineError, match="selection.sizes"):
            resolve_sizes(bad, 5_000_000)
