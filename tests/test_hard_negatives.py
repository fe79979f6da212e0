"""Hard negatives (issue 13): the loss over K + K*M columns by hand, and the miner on real
sentences - never the gold nor a text-identical sentence, never a duplicate, always the gold's language."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from marginmine.encoders.base import EncoderError
from marginmine.encoders.dual_model import hard_negative_loss, in_batch_loss
from marginmine.encoders.hard_negatives import Negatives, check_settings, mine, random_negatives, resolve_spec


def test_loss_over_batch_and_appended_columns_by_hand():
    src = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    neg = torch.tensor([[0.6, 0.8], [0.8, 0.6]])
    m, s = 0.5, 1.0
    # row 0: logits [1 - m, 0 | 0.6, 0.8]; row 1: [0, 1 - m | 0.8, 0.6] - the same loss
    want = -math.log(math.exp(0.5) / (math.exp(0.5) + 1 + math.exp(0.6) + math.exp(0.8)))
    assert float(hard_negative_loss(src, src.clone(), neg, s, m, directions=1)) == pytest.approx(want, abs=1e-6)
    # backward term in-batch: -log(e^0.5 / (e^0.5 + 1))
    back = -math.log(math.exp(0.5) / (math.exp(0.5) + 1))
    assert float(hard_negative_loss(src, src.clone(), neg, s, m)) == pytest.approx((want + back) / 2, abs=1e-6)
    # no negatives: exactly the in-batch loss
    empty = torch.zeros((0, 2))
    for d in (1, 2):
        assert float(hard_negative_loss(src, src, empty, 20.0, 0.3, d)) == pytest.approx(
            float(in_batch_loss(src, src, 20.0, 0.3, d)), abs=1e-6)


@pytest.fixture(scope="module")
def rows(real_data):
    """Two directions (de-en, fr-en) of real Tatoeba pairs, as the trainer numbers rows (each
    direction: its source rows, then its target rows); one English target repeated on purpose."""
    de = (real_data / "laser-tatoeba-v1/tatoeba.deu-eng.deu").read_text(encoding="utf-8").splitlines()[:120]
    en1 = (real_data / "laser-tatoeba-v1/tatoeba.deu-eng.eng").read_text(encoding="utf-8").splitlines()[:120]
    fr = (real_data / "laser-tatoeba-v1/tatoeba.fra-eng.fra").read_text(encoding="utf-8").splitlines()[:80]
    en2 = (real_data / "laser-tatoeba-v1/tatoeba.fra-eng.eng").read_text(encoding="utf-8").splitlines()[:80]
    en1[7] = en1[3]  # a text-identical target: must never be pair 7's (or 3's) negative
    texts = de + en1 + fr + en2
    langs = ["de"] * 120 + ["en"] * 120 + ["fr"] * 80 + ["en"] * 80
    left = np.r_[np.arange(0, 120), np.arange(240, 320)]
    right = np.r_[np.arange(120, 240), np.arange(320, 400)]
    # embeddings of a perfect model: both sides of a pair share a vector, so the gold ranks first
    rng = np.random.default_rng(0)
    base = rng.normal(size=(200, 16))
    emb = np.zeros((400, 16), np.float32)
    emb[left], emb[right] = base, base + 0.05 * rng.normal(size=(200, 16))
    emb[right[3]] = emb[left[7]]  # pair 7's gold text, in the pool as row right[3]: its nearest candidate
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return emb, texts, langs, left, right


def test_miner_never_returns_gold_identical_or_duplicates_and_keeps_languages(rows):
    emb, texts, langs, left, right = rows
    neg = mine(emb, texts, langs, left, right, 5, data_fingerprint="d", miner_sha256="m", block=64)
    assert neg.for_right.shape == neg.for_left.shape == (200, 5)
    for gold_rows, found in ((right, neg.for_right), (left, neg.for_left)):
        for i, g in enumerate(gold_rows):
            cands = [int(c) for c in found[i]]
            assert len({texts[c] for c in cands}) == 5                      # no duplicate
            assert all(texts[c] != texts[g] for c in cands)                 # never the gold's text
            assert all(langs[c] == langs[g] for c in cands)                 # the side's language
    assert neg.stats["skipped_gold"] > 0 and neg.stats["skipped_identical"] >= 1
    # hard: the first negative is closer to the query than a random pool sentence, on average
    sim_hard = np.einsum("ij,ij->i", emb[left], emb[neg.for_right[:, 0]]).mean()
    ctrl = random_negatives(texts, langs, left, right, 5, seed=1, data_fingerprint="d")
    sim_rand = np.einsum("ij,ij->i", emb[left], emb[ctrl.for_right[:, 0]]).mean()
    assert sim_hard > sim_rand + 0.2
    assert all(langs[c] == langs[g] and texts[c] != texts[g] for g, row in zip(right, ctrl.for_right) for c in row)


def test_only_the_shares_pairs_are_mined_and_as_if_all_were(rows):
    """Mining a subset of the pairs gives those pairs exactly what mining every pair gives them, and
    -1 to the others (their negatives would never be used); so does the random control's subset."""
    from marginmine.encoders.hard_negatives import share_mask, subset_digest

    emb, texts, langs, left, right = rows
    only = np.flatnonzero(share_mask(len(left), 0.3, seed=7))
    assert 30 < len(only) < 90 and np.array_equal(only, np.flatnonzero(share_mask(len(left), 0.3, seed=7)))
    full = mine(emb, texts, langs, left, right, 3, data_fingerprint="d", miner_sha256="m", block=64)
    part = mine(emb, texts, langs, left, right, 3, data_fingerprint="d", miner_sha256="m", block=64, only=only)
    rest = np.setdiff1d(np.arange(len(left)), only)
    for a, b in ((full.for_right, part.for_right), (full.for_left, part.for_left)):
        np.testing.assert_array_equal(a[only], b[only])
        assert (b[rest] == -1).all() and (b[only] >= 0).all()
    assert part.stats["mined_pairs"] == len(only) and part.subset_sha256 == subset_digest(only) != ""
    ctrl = random_negatives(texts, langs, left, right, 3, seed=1, data_fingerprint="d", only=only)
    assert (ctrl.for_right[rest] == -1).all() and (ctrl.for_right[only] >= 0).all()
    assert all(texts[c] != texts[right[i]] and langs[c] == langs[right[i]] for i in only for c in ctrl.for_right[i])


def test_capped_pools_are_seeded_samples_and_negatives_come_only_from_them(rows):
    """``pool``: each language's pool is a seeded sample of at most that many distinct sentences;
    every negative (hard and random) is drawn from it, still never the gold's text; a pool the
    cap does not reach is the whole pool, so its negatives are what mining without a cap gives."""
    from marginmine.encoders.hard_negatives import pools

    emb, texts, langs, left, right = rows
    full = pools(texts, langs)
    capped = pools(texts, langs, cap=50, seed=3)
    assert {lang: len(r) for lang, r in capped.items()} == {"de": 50, "en": 50, "fr": 50}
    assert all(np.isin(capped[lang], full[lang]).all() for lang in full)  # distinct texts' first rows
    assert all(np.array_equal(capped[k], pools(texts, langs, cap=50, seed=3)[k]) for k in capped)
    assert not np.array_equal(capped["en"], pools(texts, langs, cap=50, seed=4)["en"])
    neg = mine(emb, texts, langs, left, right, 3, data_fingerprint="d", miner_sha256="m", pool_cap=50, seed=3)
    ctrl = random_negatives(texts, langs, left, right, 3, seed=3, data_fingerprint="d", pool_cap=50)
    for found, gold_rows in ((neg.for_right, right), (neg.for_left, left), (ctrl.for_right, right)):
        for i, g in enumerate(gold_rows):
            assert all(int(c) in capped[langs[g]] and texts[c] != texts[g] for c in found[i]), i
    assert neg.pool == ctrl.pool == 50 and neg.stats["skipped_gold"] > 0
    # the German pool has 120 sentences: a cap of 120 leaves it whole, so German golds get what an
    # uncapped miner gives
    whole = mine(emb, texts, langs, left, right, 3, data_fingerprint="d", miner_sha256="m", pool_cap=120,
                 seed=3)
    plain = mine(emb, texts, langs, left, right, 3, data_fingerprint="d", miner_sha256="m")
    de = np.flatnonzero(np.asarray(langs)[left] == "de")
    np.testing.assert_array_equal(whole.for_left[de], plain.for_left[de])
    with pytest.raises(EncoderError, match="hard_negatives.pool"):
        resolve_spec({"count": 5, "miner": "m", "pool": 5})
    with pytest.raises(EncoderError, match="hard_negatives.pool"):
        resolve_spec({"count": 5, "miner": "m", "pool": "all"})


def test_negatives_are_tied_to_data_and_miner(rows, tmp_path):
    emb, texts, langs, left, right = rows
    neg = mine(emb, texts, langs, left, right, 2, data_fingerprint="d", miner_sha256="m")
    neg.save(tmp_path / "neg.npz")
    again = Negatives.load(tmp_path / "neg.npz", "d", "m")
    np.testing.assert_array_equal(again.for_left, neg.for_left)
    with pytest.raises(EncoderError, match="other training data"):
        Negatives.load(tmp_path / "neg.npz", "other", "m")
    with pytest.raises(EncoderError, match="another encoder"):
        Negatives.load(tmp_path / "neg.npz", "d", "other")


def test_settings_and_small_pools_are_refused(rows):
    emb, texts, langs, left, right = rows
    for count, share in ((0, 0.2), (2, 0.0), (2, 1.5)):
        with pytest.raises(EncoderError, match="hard_negatives"):
            check_settings(count, share)
    with pytest.raises(EncoderError, match="language 'fr' has 80 distinct"):
        mine(emb, texts, langs, left, right, 80, data_fingerprint="d", miner_sha256="m")


def test_training_with_mined_negatives(tmp_path, real_data):
    """A tiny DAN mines, a second trains with its negatives (K + K*M columns for the chosen share):
    the negatives file is written once and reused, differs from the augmented-random control, and
    a checkpoint mined by another model or with other settings is refused."""
    import json

    from marginmine.encoders import dual
    from marginmine.encoders.base import ParallelData
    from test_dual_encoder import TINY, _lines

    d = real_data / "tatoeba-manythings-deu-eng-2018"
    (tmp_path / "t.de").write_text("\n".join(_lines(d / "train.nooverlap.de")[::350][:400]) + "\n", encoding="utf-8")
    (tmp_path / "t.en").write_text("\n".join(_lines(d / "train.nooverlap.en")[::350][:400]) + "\n", encoding="utf-8")
    data = [ParallelData("de", "en", tmp_path / "t.de", tmp_path / "t.en")]
    miner = dual.train(data, tmp_path / "miner", TINY, seed=7)
    spec = {"count": 3, "share": 0.5, "miner": str(miner)}
    hard = dual.train(data, tmp_path / "hard", {**TINY, "max_steps": 6, "hard_negatives": spec}, seed=7)
    neg = np.load(hard / "negatives.npz")
    assert neg["for_right"].shape == (400, 3) and neg["for_left"].shape == (400, 3)
    meta = json.loads(str(neg["meta"]))
    assert meta["kind"] == "hard" and meta["stats"]["skipped_gold"] > 0
    from marginmine.encoders.hard_negatives import share_mask

    share = share_mask(400, 0.5, 7)  # only the pairs that train with negatives are mined
    assert (neg["for_right"][share] >= 0).all() and (neg["for_right"][~share] == -1).all()
    assert meta["stats"]["mined_pairs"] == share.sum() < 400
    rand = dual.train(data, tmp_path / "rand",
                      {**TINY, "max_steps": 6, "hard_negatives": {"count": 3, "share": 0.5, "kind": "random"}}, seed=7)
    plain = dual.train(data, tmp_path / "plain", {**TINY, "max_steps": 6}, seed=7)
    models = {p: (p / "model.pt").read_bytes() for p in (hard, rand, plain)}
    assert len(set(models.values())) == 3  # the negatives change the updates
    info = json.loads((hard / "encoder.json").read_text())["info"]
    assert info["params"]["hard_negatives"] == {"count": 3, "share": 0.5, "kind": "hard", "miner": str(miner)}
    # resumed with more steps: the same negatives file is loaded, not mined again
    before = (hard / "negatives.npz").stat().st_mtime_ns
    dual.train(data, tmp_path / "hard", {**TINY, "max_steps": 8, "hard_negatives": spec}, seed=7)
    assert (hard / "negatives.npz").stat().st_mtime_ns == before
    # another share: other pairs train with negatives, so they are mined again
    wider = dual.train(data, tmp_path / "wider", {**TINY, "max_steps": 6, "hard_negatives": {**spec, "share": 0.8}},
                       seed=7)
    assert json.loads(str(np.load(wider / "negatives.npz")["meta"]))["stats"]["mined_pairs"] > share.sum()
    # a pool cap: the negatives come from the seeded sample, and the cap is a setting of the model
    from marginmine.encoders.hard_negatives import pools

    capped = dual.train(data, tmp_path / "capped",
                        {**TINY, "max_steps": 6, "hard_negatives": {**spec, "pool": 100}}, seed=7)
    meta = json.loads(str(np.load(capped / "negatives.npz")["meta"]))
    assert meta["pool"] == 100 and meta["stats"]["mined_pairs"] == share.sum()
    assert (capped / "model.pt").read_bytes() != models[hard]
    with pytest.raises(EncoderError, match="other settings"):
        dual.train(data, tmp_path / "hard", {**TINY, "max_steps": 8, "hard_negatives": {**spec, "pool": 100}},
                   seed=7)
    texts = [t for f in ("t.de", "t.en") for t in (tmp_path / f).read_text(encoding="utf-8").splitlines()]
    langs = ["de"] * 400 + ["en"] * 400
    sample = pools(texts, langs, cap=100, seed=7)
    got = np.load(capped / "negatives.npz")
    assert np.isin(got["for_right"][share], sample["en"]).all()
    assert np.isin(got["for_left"][share], sample["de"]).all()
    # ... and they are what the miner finds with every sentence embedded: the rows it embeds for the
    # capped pools (the sample and the share's own pairs) are all it reads
    from marginmine.encoders.base import load_encoder

    enc = load_encoder(str(miner))
    full = np.concatenate([enc.encode(texts[:400], "de"), enc.encode(texts[400:], "en")]).astype(np.float32)
    want = mine(full, texts, langs, np.arange(400), np.arange(400, 800), 3, data_fingerprint="d",
                miner_sha256="m", only=np.flatnonzero(share), pool_cap=100, seed=7)
    np.testing.assert_array_equal(got["for_right"], want.for_right)
    np.testing.assert_array_equal(got["for_left"], want.for_left)
    other = dual.train(data, tmp_path / "miner2", TINY, seed=8)
    with pytest.raises(EncoderError, match="other settings"):
        dual.train(data, tmp_path / "hard", {**TINY, "max_steps": 8, "hard_negatives": {**spec, "miner": str(other)}},
                   seed=7)
    with pytest.raises(EncoderError, match="hard_negatives.miner"):
        dual.train(data, tmp_path / "x", {**TINY, "hard_negatives": {"count": 3}}, seed=7)


def test_workflow_trains_the_miner_first_and_passes_its_directory(tmp_path):
    """`{encoder: dan}` in an encoder's params: the plan trains dan first and hands its directory
    to the hard-negative DAN; an unknown name is an error naming the key."""
    import re

    from test_scorers import plan

    def change(cfg, miner="dan"):
        suite = cfg["published"]  # config/test.yaml's suite has an hn-ratio of its own; here it is the experiment's
        suite["scorers"].pop("hn-ratio")
        if "hn-ratio" in suite["methods"]:
            suite["methods"].remove("hn-ratio")
        suite["encoders"].remove("dan-hn")
        enc = cfg["encoder"]
        cfg["quick"] = False
        enc.update(extra=["dan-hn"], eval_random_init=False)
        enc["models"]["dan-hn"] = {"kind": "dual", "params": {**enc["models"]["dan"]["params"], "hard_negatives": {
            "count": 3, "share": 0.2, "miner": {"encoder": miner}}}}
        cfg["scorers"]["hn-ratio"] = {"kind": "ratio", "encoder": "dan-hn"}

    r = plan(tmp_path, "config/test.yaml", change, "scoring")
    assert r.returncode == 0, r.stderr[-2000:]
    train = [line for line in r.stdout.splitlines() if "marginmine train-encoder" in line]
    hn = next(line for line in train if "results/test/encoders/dan-hn" in line)
    assert re.search(r'"miner": "results/test/encoder"', hn), hn
    assert "marginmine embed --encoder results/test/encoders/dan-hn" in r.stdout
    r = plan(tmp_path, "config/test.yaml", lambda c: change(c, "nope"), "scoring")
    assert r.returncode != 0
    assert "encoder.models.dan-hn.params.hard_negatives.miner: unknown encoder 'nope'" in r.stdout + r.stderr
