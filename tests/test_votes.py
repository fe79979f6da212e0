"""Translate-then-vote (../shared/seeds/003, Sec. 4.2.2-4.2.3): strict and pairwise voting on hand-made
sets, the mutual-best search against brute force, the vote kind on real news pairs through the
scoring contract, the mining rows, and the errors (a translation that is not line-aligned, a
translator of the wrong direction, votes without translations)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from doubles import TrigramEncoder
from marginmine.errors import InputError, MarginmineError
from marginmine.scoring import make_kind
from marginmine.scoring.files import ArrayEmbeddings, EncoderEmbeddings, ScoreSettings, score_batch, score_file
from marginmine.scoring.metrics import roc_auc
from marginmine.scoring.votes import found_sets, mined_sets, mutual_best, rule_pairs, vote, vote_pairs, voted_score

NEWS = "wmt-newstest-ende"


def test_strict_and_pairwise_on_hand_made_sets() -> None:
    orig = {(0, 0), (1, 1), (2, 5)}
    forward = {(0, 0), (1, 2), (2, 5), (3, 3)}
    backward = {(0, 0), (1, 1), (3, 3), (4, 4)}
    assert vote_pairs([orig, forward, backward], 3) == {(0, 0)}
    # pairwise = (orig & forward) | (orig & backward) | (forward & backward)
    assert vote_pairs([orig, forward, backward], 2) == {(0, 0), (1, 1), (2, 5), (3, 3)}
    sets = {"orig": orig, "forward": forward, "backward": backward}
    assert rule_pairs(sets, "strict") == {(0, 0)}
    assert rule_pairs(sets, "forward") == forward
    found = np.array([[1, 1, 1], [1, 0, 1], [0, 1, 0], [0, 0, 0]], bool)
    assert vote(found, "strict").tolist() == [True, False, False, False]
    assert vote(found, "pairwise").tolist() == [True, True, False, False]
    assert vote(found, "backward").tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="unknown vote rule"):
        vote(found, "majority")


def test_voted_pairs_come_first_each_part_in_ratio_order() -> None:
    voted = np.array([False, True, False, True])
    ratio = np.array([50.0, 0.2, -3.0, 1.5])
    s = voted_score(voted, ratio)
    assert list(np.argsort(-s)) == [3, 1, 0, 2]
    assert ((s[voted] > 1) & (s[voted] < 3)).all() and ((s[~voted] > -1) & (s[~voted] < 1)).all()


def _ratio_brute(x: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    sim = x.astype(np.float64) @ y.astype(np.float64).T
    kx = np.sort(sim, axis=1)[:, -k:].mean(axis=1)
    ky = np.sort(sim, axis=0)[-k:, :].mean(axis=0)
    return sim / ((kx[:, None] + ky[None, :]) / 2)


def test_mutual_best_is_the_brute_force_intersection() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 16)).astype(np.float32)
    y = np.concatenate([x[:25] + 0.4 * rng.normal(size=(25, 16)), rng.normal(size=(30, 16))]).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    k = 4
    # the margin ranks each query's k nearest neighbours (LASER's candidates); brute force over them
    sim = x.astype(np.float64) @ y.astype(np.float64).T
    ratio = _ratio_brute(x, y, k)
    fwd = [max(np.argsort(-sim[i])[:k], key=lambda j: ratio[i, j]) for i in range(len(x))]
    bwd = [max(np.argsort(-sim[:, j])[:k], key=lambda i: ratio[i, j]) for j in range(len(y))]
    expected = [int(fwd[i]) if bwd[fwd[i]] == i else -1 for i in range(len(x))]
    got = mutual_best(x, y, k).tolist()
    assert got == expected
    assert sum(g == i for i, g in enumerate(got[:25])) >= 20  # the noisy copies find their originals


def _news(real_data: Path, n: int) -> tuple[list[str], list[str]]:
    en = (real_data / NEWS / "newstest2018.en").read_text(encoding="utf-8").splitlines()[:n]
    de = (real_data / NEWS / "newstest2018.de").read_text(encoding="utf-8").splitlines()[:n]
    return en, de


def _corpus(real_data: Path) -> tuple[list[str], list[str], np.ndarray, list[str], list[str]]:
    """600 real newstest2018 pairs, the last 200 misaligned (targets rotated among them), and an
    oracle translator: each sentence's translation is its reference (what a perfect translator
    would write), so the test is of the voting, not of a translator."""
    en, de = _news(real_data, 600)
    tgt = de[:400] + de[401:600] + [de[400]]
    clean = np.r_[np.ones(400, bool), np.zeros(200, bool)]
    src_translated = list(de)  # en_i -> de_i
    tgt_translated = en[:400] + en[401:600] + [en[400]]  # the target of line i is de_j -> en_j
    return en, tgt, clean, src_translated, tgt_translated


def test_votes_separate_aligned_from_misaligned_real_pairs(real_data: Path) -> None:
    en, de, clean, src_t, tgt_t = _corpus(real_data)
    enc = TrigramEncoder()
    emb = EncoderEmbeddings(enc, "en", "de", dtype="float32", translated=(src_t, tgt_t))  # type: ignore[arg-type]
    kinds = tuple((r, make_kind("vote", {"rule": r})) for r in ("orig", "forward", "backward", "strict", "pairwise"))
    settings = ScoreSettings((*kinds, ("ratio", make_kind("ratio"))), batch_size=len(en))
    scores = score_batch(en, de, 0, emb, settings)
    voted = {r: scores[r] > 1 for r, _ in kinds}
    # trigrams barely match across languages: the original search finds few pairs; the translated
    # searches compare German with German and English with English and find the aligned ones
    assert voted["forward"][clean].mean() > 0.9 and voted["backward"][clean].mean() > 0.9
    assert voted["forward"][~clean].mean() < 0.05 and voted["backward"][~clean].mean() < 0.05
    assert voted["orig"][clean].mean() < voted["forward"][clean].mean()
    for r in ("orig", "forward", "backward"):  # strict is in every set, pairwise in two of them
        assert not (voted["strict"] & ~voted[r]).any()
    assert (voted["pairwise"] == (np.stack([voted[r] for r in ("orig", "forward", "backward")]).sum(0) >= 2)).all()
    assert roc_auc(scores["pairwise"], clean) > roc_auc(scores["ratio"], clean) + 0.05
    assert roc_auc(scores["pairwise"], clean) > 0.95


def test_vote_score_files_split_byte_identically_and_refuse_unaligned_translations(real_data: Path,
                                                                                     tmp_path: Path) -> None:
    en, de, _, src_t, tgt_t = _corpus(real_data)
    enc = TrigramEncoder()
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in zip(en, de)), encoding="utf-8")
    arrays = {}
    for name, texts, lang in (("src", en, "en"), ("tgt", de, "de"), ("src_t", src_t, "de"), ("tgt_t", tgt_t, "en")):
        arrays[name] = tmp_path / f"{name}.npy"
        np.save(arrays[name], enc.encode(texts, lang).astype(np.float16))
    settings = ScoreSettings((("vote-pairwise", make_kind("vote", {"rule": "pairwise"})),), batch_size=300)
    emb = ArrayEmbeddings.load(arrays["src"], arrays["tgt"], arrays["src_t"], arrays["tgt_t"])
    score_file([str(tsv)], tmp_path / "all.tsv.gz", emb, settings)
    parts = []
    for half, lo in (("a", 0), ("b", 300)):
        p = tmp_path / f"{half}.tsv"
        p.write_text("".join(f"{a}\t{b}\n" for a, b in zip(en[lo:lo + 300], de[lo:lo + 300])), encoding="utf-8")
        paths = []
        for name in ("src", "tgt", "src_t", "tgt_t"):
            paths.append(tmp_path / f"{half}.{name}.npy")
            np.save(paths[-1], np.load(arrays[name])[lo:lo + 300])
        score_file([str(p)], tmp_path / f"{half}.tsv.gz", ArrayEmbeddings.load(*paths), settings)
        parts.append(gzip.open(tmp_path / f"{half}.tsv.gz", "rt").read().split("\n", 1)[1])
    assert gzip.open(tmp_path / "all.tsv.gz", "rt").read().split("\n", 1)[1] == "".join(parts)
    short = tmp_path / "short.npy"
    np.save(short, np.load(arrays["src_t"])[:-1])  # a translation with one line too few
    with pytest.raises(InputError, match="short.npy.*differs"):
        ArrayEmbeddings.load(arrays["src"], arrays["tgt"], short, arrays["tgt_t"])
    with pytest.raises(MarginmineError, match="--src-translated and --tgt-translated"):
        score_file([str(tsv)], tmp_path / "none.tsv.gz", ArrayEmbeddings.load(arrays["src"], arrays["tgt"]), settings)


def test_found_sets_refuse_translations_of_another_shape() -> None:
    x = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match="do not match"):
        found_sets(x, x, x[:2], x, np.arange(3), np.arange(3), 2)


def test_mining_sets_recover_news_pairs_hidden_among_others(real_data: Path) -> None:
    en, de = _news(real_data, 300)
    enc = TrigramEncoder()
    # pools: 300 sources, 300 targets in another order, translated by the oracle
    order = np.random.default_rng(1).permutation(300)
    tgt = [de[i] for i in order]
    gold = {(int(i), int(j)) for j, i in enumerate(order)}
    x, y = enc.encode(en, "en"), enc.encode(tgt, "de")
    xt, yt = enc.encode(de, "de"), enc.encode([en[i] for i in order], "en")
    sets = mined_sets(x, y, xt, yt, 4)
    for rule in ("forward", "backward", "pairwise"):
        kept = rule_pairs(sets, rule)
        assert len(kept & gold) / len(gold) > 0.95, rule
    assert rule_pairs(sets, "strict") <= rule_pairs(sets, "pairwise")
    assert len(sets["orig"] & gold) < len(sets["forward"] & gold)


def test_translator_data_in_both_directions_and_its_seeded_sample(real_data: Path, tmp_path: Path) -> None:
    """The translators' pairs: every en-de pair of the encoder data (either column order there, other
    language pairs left out) in the asked direction; with max_pairs the same seeded rows for both
    directions, in file order, and the report says how many were available."""
    import json

    from marginmine.nmt.translators import translator_pairs

    en = (real_data / NEWS / "newstest2016.en").read_text(encoding="utf-8").splitlines()[:30]
    de = (real_data / NEWS / "newstest2016.de").read_text(encoding="utf-8").splitlines()[:30]
    for name, lines in (("a.en", en[:20]), ("a.de", de[:20]), ("b.de", de[20:]), ("b.en", en[20:]),
                        ("c.en", en[:5]), ("c.fr", de[:5])):
        (tmp_path / name).write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps([{"name": "a", "src_lang": "en", "tgt_lang": "de", "src": "a.en", "tgt": "a.de"},
                                    {"name": "b", "src_lang": "de", "tgt_lang": "en", "src": "b.de", "tgt": "b.en"},
                                    {"name": "c", "src_lang": "en", "tgt_lang": "fr", "src": "c.en", "tgt": "c.fr"}]))

    def rows(path: Path) -> list[list[str]]:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return [line.rstrip("\n").split("\t") for line in fh]

    r = translator_pairs(manifest, "en", "de", tmp_path / "all.tsv.gz", tmp_path / "all.json")
    assert rows(tmp_path / "all.tsv.gz") == [[a, b] for a, b in zip(en, de)]
    assert r["pairs"] == r["available"] == 30 and r["sample"] is None and r["sources"] == {"a": 20, "b": 10}
    fwd = translator_pairs(manifest, "en", "de", tmp_path / "fwd.tsv.gz", max_pairs=12, seed=5)
    bwd = translator_pairs(manifest, "de", "en", tmp_path / "bwd.tsv.gz", max_pairs=12, seed=5)
    f, b = rows(tmp_path / "fwd.tsv.gz"), rows(tmp_path / "bwd.tsv.gz")
    assert len(f) == 12 and b == [[t, s] for s, t in f] and bwd["pairs"] == 12  # the same rows, columns swapped
    order = [[a, b] for a, b in zip(en, de)]
    picked = [order.index(p) for p in f]
    assert picked == sorted(picked) and len(set(picked)) == 12  # file order, no repeats
    assert fwd["pairs"] == 12 and fwd["available"] == 30 and fwd["sample"]["max_pairs"] == 12
    assert sum(fwd["sample"]["kept"].values()) == 12 and fwd["sources"] == {"a": 20, "b": 10}
    other = translator_pairs(manifest, "en", "de", tmp_path / "other.tsv.gz", max_pairs=12, seed=6)
    assert rows(tmp_path / "other.tsv.gz") != f and other["pairs"] == 12  # another seed, another sample
    assert translator_pairs(manifest, "en", "de", tmp_path / "big.tsv.gz", max_pairs=99)["sample"] is None
    with pytest.raises(InputError, match="lists no en-es pairs"):
        translator_pairs(manifest, "en", "es", tmp_path / "x.tsv.gz")
    with pytest.raises(MarginmineError, match="max_pairs must be >= 0"):  # the CLI's one-line error
        translator_pairs(manifest, "en", "de", tmp_path / "x.tsv.gz", max_pairs=-1)


def test_translator_data_seed_defaults_to_the_workflow_seed() -> None:
    """One home per default: the sample's seed without --seed is marginmine.defaults.SEED (the
    schema's top-level seed), in the CLI and in translator_pairs alike."""
    import inspect

    from marginmine.cli.main import build_parser
    from marginmine.defaults import SEED
    from marginmine.nmt.translators import translator_pairs

    args = build_parser().parse_args(["translator-data", "--encoder-data", "m.json", "--src-lang", "en",
                                      "--tgt-lang", "de", "--output", "o.tsv"])
    assert args.seed == SEED == inspect.signature(translator_pairs).parameters["seed"].default


def test_a_re_paired_batch_reuses_the_vote_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The noise baseline of a vote scorer: the re-paired batch's vote sets are found_sets of the
    re-paired rows, and the three mutual-best searches run once for both batches."""
    from marginmine.scoring import votes as votes_mod
    from marginmine.scoring.kinds import Batch, repairing

    rng = np.random.default_rng(3)
    unit = lambda a: (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    x = unit(rng.normal(size=(40, 16)))
    y = unit(x + 0.3 * rng.normal(size=x.shape))
    tx, ty = unit(x + 0.2 * rng.normal(size=x.shape)), unit(y + 0.2 * rng.normal(size=y.shape))
    g = np.arange(40)
    calls = []
    real = votes_mod.mutual_best
    monkeypatch.setattr(votes_mod, "mutual_best", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    batch = Batch([str(i) for i in g], [str(i) for i in g], x, y, g, g.copy(),
                  translated=lambda side: tx if side == "src" else ty)
    own = batch.vote_sets(4)
    noise = batch.repaired(7).vote_sets(4)
    assert len(calls) == 3 and own.any()
    assert np.array_equal(noise, found_sets(x, y, tx, ty, g, g[repairing(40, 7)], 4))
    assert noise.sum() < own.sum()
