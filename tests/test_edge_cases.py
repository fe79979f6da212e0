"""Edge cases found by reading the code (issue 17, item 4), on real data through the CLI: empty
shards, embeddings of another length, NaN/inf embeddings and scores, an overlap with a test set."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from doubles import TrigramEncoder
from marginmine.cli.main import main
from marginmine.encoders.embed import embed_file
from marginmine.errors import InputError, MarginmineError
from marginmine.scoring import make_kind
from marginmine.scoring.files import EncoderEmbeddings, ScoreSettings, read_scores, score_file
from marginmine.search.knn import first_nonfinite_row, knn


def lines_of(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return fh.read().splitlines()


def error_line(err: str, command: str) -> str:
    """The one line the CLI reports an error in (log lines may precede it)."""
    found = [ln for ln in err.splitlines() if ln.startswith(f"marginmine {command}: error:")]
    assert len(found) == 1, err
    return found[0]


@pytest.fixture(scope="module")
def pairs_250(paracrawl_tsv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """250 real ParaCrawl en-de pairs: source, target, id."""
    out = tmp_path_factory.mktemp("pc250") / "corpus.tsv"
    rows = [ln.split("\t") for ln in paracrawl_tsv.read_text(encoding="utf-8").splitlines()[:250]]
    out.write_text("".join(f"{c[2]}\t{c[3]}\tpc{i}\n" for i, c in enumerate(rows)), encoding="utf-8")
    return out


def tiny_random_encoder(pairs: Path, out: Path) -> Path:
    """A real dual encoder directory, untrained (max_steps 0: the random-init twin), in seconds."""
    from marginmine.encoders import dual
    from marginmine.encoders.base import ParallelData

    rows = [ln.split("\t") for ln in pairs.read_text(encoding="utf-8").splitlines()]
    (out.parent / "enc.en").write_text("".join(r[0] + "\n" for r in rows), encoding="utf-8")
    (out.parent / "enc.de").write_text("".join(r[1] + "\n" for r in rows), encoding="utf-8")
    params = {"vocab_size": 200, "spm_sample": 2000, "buckets": 4096, "emb_dim": 32, "hidden": 32, "dim": 16,
              "batch_size": 32, "epochs": 1, "threads": 1, "max_len": 32, "max_steps": 0}
    return dual.train([ParallelData("en", "de", out.parent / "enc.en", out.parent / "enc.de")], out, params, seed=7)


def embed_pair(tsv: Path, stem: Path, **kw) -> tuple[Path, Path]:
    src = embed_file(TrigramEncoder(), "en", tsv, stem.with_name(stem.name + ".en.npy"), column=0, **kw)
    tgt = embed_file(TrigramEncoder(), "de", tsv, stem.with_name(stem.name + ".de.npy"), column=1, **kw)
    return src, tgt


# --- 1. empty shards ------------------------------------------------------------------------


def test_empty_shards_are_valid_through_preprocess_embed_score_select(
        pairs_250: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """corpus.expected_pairs overestimated: 250 pairs dealt to 5 shards of block 100 leave shards 3
    and 4 empty. Every later step writes empty outputs for them and the ledger adds up."""
    split = tmp_path / "split"
    assert main(["split", "--input", str(pairs_250), "--shards", "5", "--block", "100",
                 "--outdir", str(split), "--rejects", str(split / "rejects.tsv.gz"),
                 "--ledger", str(split / "ledger.json")]) == 0
    shards = [split / f"shard{i:04d}.tsv.gz" for i in range(5)]
    sizes = [len(lines_of(s)) for s in shards]
    assert sizes[3:] == [0, 0] and sizes[0] == sizes[1] == 100 and 0 < sizes[2] <= 50

    # preprocess: an empty shard is refused without --allow-empty (a user's empty corpus), valid with it
    work = tmp_path / "work"
    base = ["preprocess", "--src-lang", "en", "--tgt-lang", "de", "--no-dedup"]
    capsys.readouterr()
    assert main([*base, "--input", str(shards[4]), "--output", str(work / "refused.tsv.gz"),
                 "--rejects", str(work / "refused.rej.tsv.gz"), "--ledger", str(work / "refused.json")]) == 2
    assert "corpus is empty" in error_line(capsys.readouterr().err, "preprocess")
    kept, ledgers = [], []
    for i, shard in enumerate(shards):
        kept.append(work / f"kept{i}.tsv.gz")
        ledgers.append(work / f"ledger{i}.json")
        assert main([*base, "--allow-empty", "--input", str(shard), "--output", str(kept[-1]),
                     "--rejects", str(work / f"rej{i}.tsv.gz"), "--ledger", str(ledgers[-1])]) == 0
    for i in (3, 4):
        assert lines_of(kept[i]) == [] and lines_of(work / f"rej{i}.tsv.gz") == []
        assert json.loads(ledgers[i].read_text())["pairs_in"] == 0
    assert main(["ledger", "--first", str(split / "ledger.json"), "--shards", *map(str, ledgers),
                 "--output", str(work / "ledger.json")]) == 0
    total = json.loads((work / "ledger.json").read_text())
    n_kept = [len(lines_of(k)) for k in kept]
    assert total["pairs_in"] == 250 and total["kept"] == sum(n_kept) > 0
    assert n_kept[3:] == [0, 0]

    # embed (the CLI, with an untrained tiny dual encoder): 0 rows of the encoder's width;
    # refused without --allow-empty
    encoder = tiny_random_encoder(pairs_250, tmp_path / "encoder")
    capsys.readouterr()
    assert main(["embed", "--encoder", str(encoder), "--lang", "en", "--input", str(kept[4]), "--column", "0",
                 "--output", str(work / "refused.npy")]) == 2
    assert "kept4.tsv.gz: is empty: nothing to embed" in error_line(capsys.readouterr().err, "embed")
    embs = []
    for i, k in enumerate(kept):
        embs.append((work / f"emb{i}.en.npy", work / f"emb{i}.de.npy"))
        for column, (lang, out) in enumerate(zip(("en", "de"), embs[-1])):
            assert main(["embed", "--encoder", str(encoder), "--lang", lang, "--input", str(k), "--column",
                         str(column), "--output", str(out), "--allow-empty"]) == 0
            assert np.load(out, mmap_mode="r").shape == (n_kept[i], 16)

    # score: an empty score file; refused without --allow-empty
    def score(i: int, *extra: str) -> int:
        return main(["score", "--input", str(kept[i]), "--src-embeddings", str(embs[i][0]),
                     "--tgt-embeddings", str(embs[i][1]), "--batch-size", "60", *extra,
                     "--output", str(work / f"score{i}.tsv.gz")])

    capsys.readouterr()
    assert score(4) == 2 and "is empty: nothing to score" in error_line(capsys.readouterr().err, "score")
    for i in range(5):
        assert score(i, "--allow-empty") == 0
        assert len(lines_of(work / f"score{i}.tsv.gz")) == n_kept[i] + 1  # the header names the columns

    # select over all shards, and over the empty ones alone; the overlap check reads them too
    scores = [str(work / f"score{i}.tsv.gz") for i in range(5)]
    assert main(["select", "--pairs", *map(str, kept), "--scores", *scores, "--method", "ratio",
                 "-n", "50", "--output", str(work / "sel.tsv.gz"),
                 "--report", str(work / "sel.json")]) == 0
    rep = json.loads((work / "sel.json").read_text())
    assert rep["selected"] == 50 == len(lines_of(work / "sel.tsv.gz")) and rep["total"] == sum(n_kept)
    assert main(["select", "--pairs", str(kept[3]), str(kept[4]), "--scores", *scores[3:],
                 "--method", "ratio", "-n", "50", "--output", str(work / "none.tsv.gz"),
                 "--report", str(work / "none.json")]) == 0
    assert json.loads((work / "none.json").read_text())["selected"] == 0
    assert lines_of(work / "none.tsv.gz") == []
    assert main(["select", "--pairs", *map(str, kept), "--method", "random", "-n", "20",
                 "--output", str(work / "rnd.tsv.gz")]) == 0
    assert len(lines_of(work / "rnd.tsv.gz")) == 20


# --- 2. an .npy of another length than the scored file ------------------------------------------


def test_both_sides_in_one_embed_call_equal_one_call_per_side(pairs_250: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``embed`` with a --lang, --column and --output per side (rule embed_shard: the encoder loaded
    once per shard, not per side) writes the bytes and records of one call per side; --lang,
    --column and --output that do not pair up are one error line."""
    encoder = tiny_random_encoder(pairs_250, tmp_path / "encoder")
    base = ["embed", "--encoder", str(encoder), "--input", str(pairs_250)]
    one, two = tmp_path / "one", tmp_path / "two"
    assert main([*base, "--lang", "en", "--column", "0", "--output", str(one / "x.en.npy"),
                 "--lang", "de", "--column", "1", "--output", str(one / "x.de.npy")]) == 0
    for lang, column in (("en", "0"), ("de", "1")):
        assert main([*base, "--lang", lang, "--column", column, "--output", str(two / f"x.{lang}.npy")]) == 0
    for name in ("x.en.npy", "x.de.npy", "x.en.npy.json", "x.de.npy.json"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    assert json.loads((one / "x.de.npy.json").read_text())["column"] == 1 and np.load(one / "x.de.npy").shape[0] == 250
    assert not np.array_equal(np.load(one / "x.en.npy"), np.load(one / "x.de.npy"))
    capsys.readouterr()
    assert main([*base, "--lang", "en", "--column", "0", "--output", str(tmp_path / "a.npy"),
                 "--column", "1", "--output", str(tmp_path / "b.npy")]) == 2
    assert error_line(capsys.readouterr().err, "embed") == ("marginmine embed: error: give one --lang and one "
                                                            "--column per --output (got 1 --lang, 2 --column, "
                                                            "2 --output)")
    assert main([*base, "--lang", "en", "--lang", "de", "--output", str(tmp_path / "a.npy"),
                 "--output", str(tmp_path / "b.npy")]) == 2
    assert error_line(capsys.readouterr().err, "embed") == ("marginmine embed: error: 2 --output and no --column "
                                                            "would embed the same whole lines into each: give a "
                                                            "--column per --output")
    assert not (tmp_path / "a.npy").exists()


def test_score_refuses_embeddings_with_more_or_fewer_rows_than_lines(pairs_250: Path, tmp_path: Path) -> None:
    lines = pairs_250.read_text(encoding="utf-8").splitlines(keepends=True)
    shard = tmp_path / "shard.tsv"
    shard.write_text("".join(lines[:200]), encoding="utf-8")
    longer, shorter = tmp_path / "longer.tsv", tmp_path / "shorter.tsv"
    longer.write_text("".join(lines[:201]), encoding="utf-8")
    shorter.write_text("".join(lines[:199]), encoding="utf-8")
    ok = embed_pair(shard, tmp_path / "ok")
    for other, rows in ((longer, 201), (shorter, 199)):
        src, tgt = embed_pair(other, tmp_path / other.stem)
        out = tmp_path / f"{other.stem}.scores.tsv"
        r = subprocess.run([sys.executable, "-m", "marginmine.cli.main", "score", "--input", str(shard),
                            "--src-embeddings", str(src), "--tgt-embeddings", str(tgt), "--output", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
        err = error_line(r.stderr, "score")
        assert f"{src}: has {rows} embedding rows (and {tgt} too), but {shard} has 200 lines" in err, err
        assert not out.exists()
    assert main(["score", "--input", str(shard), "--src-embeddings", str(ok[0]), "--tgt-embeddings", str(ok[1]),
                 "--output", str(tmp_path / "ok.scores.tsv")]) == 0
    assert len(lines_of(tmp_path / "ok.scores.tsv")) == 201  # the header, then one line per pair


# --- 3. NaN / inf in embeddings and scores ------------------------------------------------------


def test_nan_embedding_row_is_refused_naming_file_and_row(pairs_250: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    src, tgt = embed_pair(pairs_250, tmp_path / "e")
    arr = np.load(tgt)
    arr[[37, 120], 5] = np.nan
    bad = tmp_path / "bad.de.npy"
    np.save(bad, arr)
    capsys.readouterr()
    assert main(["score", "--input", str(pairs_250), "--src-embeddings", str(src), "--tgt-embeddings", str(bad),
                 "--output", str(tmp_path / "s.tsv")]) == 2
    err = error_line(capsys.readouterr().err, "score")
    assert f"{bad}: embedding row 37 (0-based; line 38 of the scored input) holds NaN or inf" in err, err
    arr[[37, 120], 5] = 0
    arr[3] = np.inf
    np.save(bad, arr)
    assert main(["score", "--input", str(pairs_250), "--src-embeddings", str(src), "--tgt-embeddings", str(bad),
                 "--batch-size", "100", "--output", str(tmp_path / "s.tsv")]) == 2
    assert "embedding row 3 (0-based; line 4 " in error_line(capsys.readouterr().err, "score")
    assert not (tmp_path / "s.tsv").exists()


def test_nan_from_an_encoder_is_refused_by_the_knn_search(pairs_250: Path, tmp_path: Path) -> None:
    class BrokenEncoder(TrigramEncoder):
        def encode(self, sentences, lang):  # type: ignore[no-untyped-def]
            out = super().encode(sentences, lang)
            out[len(out) // 2] = np.nan
            return out

    with pytest.raises(MarginmineError, match=r"kNN search: (query|database) row \d+ \(0-based\) holds NaN or inf"):
        score_file([str(pairs_250)], tmp_path / "s.tsv", EncoderEmbeddings(BrokenEncoder(), "en", "de"),
                   ScoreSettings((("ratio", make_kind("ratio")),)))
    x = TrigramEncoder().encode([f"sentence {i}" for i in range(50)], "en")
    x[17, 3] = np.inf
    with pytest.raises(MarginmineError, match="database row 17 "):
        knn(x[:5], x, 4)
    with pytest.raises(MarginmineError, match="query row 17 "):
        knn(x, x[20:], 4)
    assert first_nonfinite_row(np.arange(10.0)) is None and first_nonfinite_row(x) == 17


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")  # the 0/0 itself
def test_degenerate_embeddings_giving_a_nan_score_are_refused(pairs_250: Path, tmp_path: Path) -> None:
    """All-zero (finite) rows for both sides of line 7: cosine 0 over a neighbourhood of 0 is NaN."""
    src, tgt = embed_pair(pairs_250, tmp_path / "e")
    for path in (src, tgt):
        arr = np.load(path)
        arr[6] = 0
        np.save(path, arr)
    with pytest.raises(InputError, match=r"corpus.tsv:7: the ratio score of this pair is nan"):
        main(["--debug", "score", "--input", str(pairs_250), "--src-embeddings", str(src),
              "--tgt-embeddings", str(tgt), "--output", str(tmp_path / "s.tsv")])


def test_nan_or_inf_scores_are_refused_by_select_and_eval_filter(pairs_250: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    src, tgt = embed_pair(pairs_250, tmp_path / "e")
    scores = tmp_path / "scores.tsv"
    assert main(["score", "--input", str(pairs_250), "--src-embeddings", str(src), "--tgt-embeddings", str(tgt),
                 "--output", str(scores)]) == 0
    rows = scores.read_text().splitlines()
    assert rows[0] == "ratio\tcosine" and read_scores(scores, "ratio").shape == (250,)
    for bad_value, column in (("nan", "ratio"), ("inf", "cosine"), ("-inf", "ratio")):
        broken = rows.copy()
        broken[41] = "\t".join([bad_value, "0.5"] if column == "ratio" else ["1.0", bad_value])  # data line 41
        broken[200] = "nan\tnan"
        bad = tmp_path / f"bad-{bad_value}.tsv"
        bad.write_text("\n".join(broken) + "\n")
        capsys.readouterr()
        assert main(["select", "--pairs", str(pairs_250), "--scores", str(bad), "--method", column,
                     "-n", "10", "--output", str(tmp_path / "sel.tsv")]) == 2
        err = error_line(capsys.readouterr().err, "select")
        assert f"{bad}:42: column {column} holds {float(bad_value)}, not a finite score" in err, err
        assert not (tmp_path / "sel.tsv").exists()
    labels = tmp_path / "labels.tsv"
    labels.write_text("id\torigin\tkind\tclean\n" + "".join(f"pc{i}\tparacrawl\tclean\t{i % 2}\n" for i in range(250)))
    assert main(["eval-filter", "--demo-labels", str(labels), "--pairs", str(pairs_250), "--scores",
                 str(tmp_path / "bad-nan.tsv"), "--tsv", str(tmp_path / "q.tsv"), "--md", str(tmp_path / "q.md")]) == 2
    err = error_line(capsys.readouterr().err, "eval-filter")
    assert f"{tmp_path / 'bad-nan.tsv'}:42: column ratio holds nan" in err
    assert main(["eval-filter", "--demo-labels", str(labels), "--pairs", str(pairs_250), "--scores",
                 str(scores), "--tsv", str(tmp_path / "q.tsv"), "--md", str(tmp_path / "q.md"),
                 "--json", str(tmp_path / "q.json")]) == 0
    rows = json.loads((tmp_path / "q.json").read_text())
    assert rows and all(0 <= r["auc"] <= 1 for r in rows)
    partial = tmp_path / "partial.tsv"  # the sidecar lacks two of the scored pairs: named, with the first's line
    partial.write_text("id\torigin\tkind\tclean\n"
                       + "".join(f"pc{i}\tparacrawl\tclean\t1\n" for i in range(250) if i not in (17, 90)))
    capsys.readouterr()
    assert main(["eval-filter", "--demo-labels", str(partial), "--pairs", str(pairs_250), "--scores",
                 str(scores), "--tsv", str(tmp_path / "q2.tsv"), "--md", str(tmp_path / "q2.md")]) == 2
    assert f"{pairs_250}:18: 2 pair ids (e.g. 'pc17') are not in {partial}" in error_line(
        capsys.readouterr().err, "eval-filter")


# --- 6. check-overlap finds an overlap ------------------------------------------------------------


def test_check_overlap_fails_naming_the_protected_set_and_count(real_data: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Real Multi30k train pairs, clean, then with 3 newstest2013 pairs (and one German side) injected."""
    with gzip.open(real_data / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as fe, \
            gzip.open(real_data / "multi30k" / "train.de.gz", "rt", encoding="utf-8") as fd:
        base = [f"{e.rstrip()}\t{d.rstrip()}\tm30k-{i}\n" for i, (e, d) in zip(range(300), zip(fe, fd))]
    ns = real_data / "wmt-newstest-ende"
    ns_en = (ns / "newstest2013.en").read_text(encoding="utf-8").splitlines()
    ns_de = (ns / "newstest2013.de").read_text(encoding="utf-8").splitlines()
    protect = [str(ns / "newstest2013.en"), str(ns / "newstest2013.de")]
    clean = tmp_path / "clean.tsv.gz"
    with gzip.open(clean, "wt", encoding="utf-8") as fh:
        fh.writelines(base)

    def check(corpus: Path) -> tuple[int, dict, str]:
        capsys.readouterr()
        rc = main(["check-overlap", "--corpus", str(corpus), "--protect", *protect,
                   "--output", str(tmp_path / f"{corpus.name}.json")])
        return rc, json.loads((tmp_path / f"{corpus.name}.json").read_text()), capsys.readouterr().err

    rc, report, _ = check(clean)
    assert rc == 0 and report["pairs"] == 300 and report["overlapping_pairs"] == 0
    leaky = base.copy()
    for at, i in ((10, 100), (150, 200), (290, 300)):
        leaky.insert(at, f"{ns_en[i]}\t{ns_de[i]}\tleak-{i}\n")
    leaky.insert(50, f"{base[0].split(chr(9))[0]}\t{ns_de[1000]}\tleak-de\n")  # only the German side leaks
    corpus = tmp_path / "leaky.tsv.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as fh:
        fh.writelines(leaky)
    rc, report, err = check(corpus)
    assert rc == 2
    assert report["overlapping_pairs"] == 4 and report["src_hits"] == 3 and report["tgt_hits"] == 4
    assert report["by_file"] == {"wmt-newstest-ende/newstest2013.en": 3, "wmt-newstest-ende/newstest2013.de": 1}
    line = error_line(err, "check-overlap")
    assert (f"{corpus}: 4 of 304 pairs have a side in a protected dev/test set: "
            "wmt-newstest-ende/newstest2013.de (1), wmt-newstest-ende/newstest2013.en (3); "
            f"first at {corpus}:11 (leak-100)") in line, line
