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
from marginmine.scoring import make_kind
from marginmine.scoring.files import EncoderEmbeddings, ScoreSettings, read_scores, score_file
from marginmine.scoring.filtereval import read_paracrawl_eval, roc_auc


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
