"""The noise baseline written beside a score file (marginmine.scoring.files.score_file ``baseline=``):
the score file does not change with it, it is seeded and resumes with the scores, and it holds no
pair of the corpus."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from doubles import TrigramEncoder
from marginmine.cli.main import main
from marginmine.errors import InputError
from marginmine.evaluate.filtereval import read_paracrawl_eval
from marginmine.scoring import make_kind
from marginmine.scoring.files import EncoderEmbeddings, ScoreSettings, read_scores, score_file
from marginmine.scoring.metrics import roc_auc


def settings_of(batch: int) -> ScoreSettings:
    return ScoreSettings((("ratio", make_kind("ratio", {"k": 4})), ("cosine", make_kind("cosine"))), batch)


@pytest.fixture(scope="module")
def pairs(paracrawl_tsv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 2,000 human-labelled ParaCrawl pairs as a src/tgt TSV, plus 10 lines repeating its first pair."""
    out = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    rows = [ln.split("\t") for ln in paracrawl_tsv.read_text(encoding="utf-8").splitlines()]
    out.write_text("".join(f"{c[2]}\t{c[3]}\n" for c in rows + [rows[0]] * 10), encoding="utf-8")
    return out


def emb() -> EncoderEmbeddings:
    return EncoderEmbeddings(TrigramEncoder(), "en", "de")


def test_baseline_beside_unchanged_scores_seeded_and_free_of_corpus_pairs(pairs: Path, paracrawl_tsv: Path,
                                                                             tmp_path: Path) -> None:
    plain, scored, noise = tmp_path / "plain.tsv.gz", tmp_path / "s.tsv.gz", tmp_path / "noise.tsv.gz"
    assert score_file([str(pairs)], plain, emb(), settings_of(700)) == 2010
    assert score_file([str(pairs)], scored, emb(), settings_of(700), baseline=noise, baseline_seed=3) == 2010
    assert scored.read_bytes() == plain.read_bytes()  # the score file does not change with a baseline
    lines = gzip.open(noise, "rt").read().splitlines()
    assert lines[0] == "ratio\tcosine"
    # 2,010 re-paired lines less those that land on another copy of the repeated pair (at most 10)
    assert 2000 <= len(lines) - 1 <= 2010
    same = tmp_path / "same.tsv"  # one pair three times and another: re-paired lines are original pairs or not
    same.write_text("a b c\td e f\n" * 3 + "x y z\tu v w\n", encoding="utf-8")
    score_file([str(same)], tmp_path / "same.scores.tsv", emb(), settings_of(4), baseline=tmp_path / "same.noise.tsv")
    rows = (tmp_path / "same.noise.tsv").read_text().splitlines()
    # a single cycle through 4 lines sends exactly one copy of (abc, def) to (x y z)'s target, and x y z to
    # a def: 2 new pairs, the other 2 lines are (abc, def) again and left out
    assert len(rows) == 1 + 2
    again = tmp_path / "again.tsv.gz"
    score_file([str(pairs)], tmp_path / "s2.tsv.gz", emb(), settings_of(700), baseline=again, baseline_seed=3)
    assert again.read_bytes() == noise.read_bytes()
    other = tmp_path / "other.tsv.gz"
    score_file([str(pairs)], tmp_path / "s3.tsv.gz", emb(), settings_of(700), baseline=other, baseline_seed=4)
    assert other.read_bytes() != noise.read_bytes()
    # real data: the human-labelled valid pairs score above the baseline, the baseline is no better than
    # the pairs labelled wrong (misaligned, not a translation) and lies below the corpus overall
    data = read_paracrawl_eval(paracrawl_tsv)
    ratio, base = read_scores(scored, "ratio")[:2000], read_scores(noise, "ratio")
    both = np.concatenate([ratio[data.positive], base])
    assert roc_auc(both, np.arange(len(both)) < data.positive.sum()) > 0.8
    worse = np.concatenate([base, ratio[~data.positive]])
    assert roc_auc(worse, np.arange(len(worse)) < len(base)) < 0.5


def test_baseline_resumes_with_the_scores_after_a_kill(pairs: Path, tmp_path: Path) -> None:
    ref, ref_noise = tmp_path / "ref.tsv", tmp_path / "ref.noise.tsv"
    score_file([str(pairs)], ref, emb(), settings_of(500), baseline=ref_noise)
    out, noise = tmp_path / "out.tsv", tmp_path / "noise.tsv"
    killed = TrigramEncoder(fail_after=5)  # 2 encode calls per batch: dies in the third batch
    with pytest.raises(KeyboardInterrupt):
        score_file([str(pairs)], out, EncoderEmbeddings(killed, "en", "de"), settings_of(500), baseline=noise)
    assert not noise.exists() and (tmp_path / "noise.tsv.part").exists()
    counting = TrigramEncoder()
    score_file([str(pairs)], out, EncoderEmbeddings(counting, "en", "de"), settings_of(500), baseline=noise)
    assert counting.calls == 6  # batches 3, 4 and the last (10 lines) only
    assert out.read_bytes() == ref.read_bytes() and noise.read_bytes() == ref_noise.read_bytes()
    # a baseline .part shorter than the state promises: scored again from the start, same bytes
    with pytest.raises(KeyboardInterrupt):
        score_file([str(pairs)], out.with_name("o2.tsv"), EncoderEmbeddings(TrigramEncoder(fail_after=5), "en", "de"),
                   settings_of(500), baseline=tmp_path / "n2.tsv")
    part = tmp_path / "n2.tsv.part"
    part.write_bytes(part.read_bytes()[:-7])
    score_file([str(pairs)], out.with_name("o2.tsv"), emb(), settings_of(500), baseline=tmp_path / "n2.tsv")
    assert (tmp_path / "n2.tsv").read_bytes() == ref_noise.read_bytes()


def test_cli_baseline_and_its_errors(pairs: Path, tmp_path: Path, capsys) -> None:
    one = tmp_path / "one.tsv"
    one.write_text("a b c\td e f\n", encoding="utf-8")
    src = np.eye(1, 8, dtype=np.float32)
    np.save(tmp_path / "s.npy", src)
    np.save(tmp_path / "t.npy", src)
    args = ["score", "--input", str(one), "--src-embeddings", str(tmp_path / "s.npy"), "--tgt-embeddings",
            str(tmp_path / "t.npy"), "--scorers", "cosine", "--output", str(tmp_path / "o.tsv")]
    assert main(args + ["--baseline", str(tmp_path / "b.tsv")]) == 0
    assert (tmp_path / "b.tsv").read_text() == "cosine\n"  # a batch of one pair has no re-pairing
    with pytest.raises(InputError, match="also the score file"):
        score_file([str(one)], tmp_path / "o.tsv", None, settings_of(5), baseline=tmp_path / "o.tsv")  # type: ignore[arg-type]


def test_clean_share_over_shards_equals_the_estimate_on_the_whole(pairs: Path, tmp_path: Path, capsys) -> None:
    """Two shards' score files and baselines: marginmine clean-share's numbers are the estimator's on
    the concatenated scores (cleanshare, arrays), its curve is monotone, and its errors name the cause."""
    from marginmine.evaluate.cleanshare import ScoreCounts, clean_share, largest_n_at

    lines = pairs.read_text(encoding="utf-8").splitlines(keepends=True)
    files = {}
    for k, part in enumerate((lines[:1200], lines[1200:])):
        shard = tmp_path / f"shard{k}.tsv"
        shard.write_text("".join(part), encoding="utf-8")
        files[k] = (tmp_path / f"shard{k}.scores.tsv.gz", tmp_path / f"shard{k}.noise.tsv.gz")
        score_file([str(shard)], files[k][0], emb(), settings_of(700), baseline=files[k][1])
    out = {x: tmp_path / f"cs.{x}" for x in ("tsv", "md", "curve.tsv", "png")}
    args = ["clean-share", "--scores", str(files[0][0]), str(files[1][0]), "--baselines", str(files[0][1]),
            str(files[1][1]), "--names", "ratio", "cosine", "--sizes", "500", "1k", "--thresholds", "ratio=1.05",
            "--tsv", str(out["tsv"]), "--md", str(out["md"]), "--curve", str(out["curve.tsv"]),
            "--png", str(out["png"])]
    assert main(args) == 0
    rows = [ln.split("\t") for ln in out["tsv"].read_text().splitlines()]
    rows = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert [(r["scorer"], r["by"], r["at"]) for r in rows] == [
        ("ratio", "N", "500"), ("ratio", "N", "1k"), ("ratio", "threshold", "1.05"), ("ratio", "target", "90%"),
        ("ratio", "target", "50%"), ("cosine", "N", "500"), ("cosine", "N", "1k"), ("cosine", "target", "90%"),
        ("cosine", "target", "50%")]
    for name in ("ratio", "cosine"):
        s = np.concatenate([read_scores(files[k][0], name) for k in (0, 1)])
        b = np.concatenate([read_scores(files[k][1], name) for k in (0, 1)])
        est = clean_share(s, b, [500, 1000])
        mine = [r for r in rows if r["scorer"] == name]
        assert [float(r["est_clean_share"]) for r in mine[:2]] == pytest.approx(est.shares, abs=1e-6)
        assert float(mine[0]["noise_share"]) == pytest.approx(est.pi0, abs=1e-6)
        n90 = largest_n_at(s, b, 0.9)
        assert int(mine[-2]["kept"]) == n90 and float(mine[-2]["est_clean_share"]) >= 0.9
        # the threshold row keeps what the scores say
        assert ScoreCounts.of(s).n == 2010
    t = next(r for r in rows if r["by"] == "threshold")
    ratio = np.concatenate([read_scores(files[k][0], "ratio") for k in (0, 1)])
    assert int(t["kept"]) == int((ratio >= 1.05).sum())
    curve = [ln.split("\t") for ln in out["curve.tsv"].read_text().splitlines()[1:]]
    kept = [int(c[2]) for c in curve if c[0] == "ratio"]
    assert kept == sorted(kept, reverse=True) and kept[0] == 2010 and len(kept) > 50
    assert out["png"].stat().st_size > 10_000 and "Storey" in out["md"].read_text()
    # errors: a baseline of other columns, an unknown scorer, mismatched groups
    assert main(args[:2] + [str(files[0][0])] + ["--baselines", str(files[0][0].with_suffix(".x"))]
                + ["--tsv", str(tmp_path / "e.tsv"), "--md", str(tmp_path / "e.md")]) == 2
    assert main(["clean-share", "--scores", str(files[0][0]), "--baselines", str(files[0][1]), "--names", "bleu",
                 "--tsv", str(tmp_path / "e.tsv"), "--md", str(tmp_path / "e.md")]) == 2
    assert "no score column bleu" in capsys.readouterr().err
    assert main(["clean-share", "--scores", str(files[0][0]), "--baselines", str(files[0][1]), str(files[1][1]),
                 "--tsv", str(tmp_path / "e.tsv"), "--md", str(tmp_path / "e.md")]) == 2
    assert "2 file(s) for 1 score files" in capsys.readouterr().err
    assert main(["clean-share", "--scores", str(files[0][0]), "--baselines", str(files[0][1]),
                 "--tsv", str(files[0][1]), "--md", str(tmp_path / "e.md")]) == 2  # would overwrite its input
