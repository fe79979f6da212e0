"""The noise baseline (a batch re-paired at random, scored against the same neighbourhoods:
marginmine.scoring.kinds.Batch.repaired) and the clean-share estimate made from it
(marginmine.evaluate.cleanshare), on a mixture of known share and on real ParaCrawl pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from doubles import TrigramEncoder
from marginmine.evaluate.cleanshare import clean_share, largest_n_at, noise_share
from marginmine.evaluate.filtereval import read_paracrawl_eval
from marginmine.scoring import parse_scorers
from marginmine.scoring.files import EncoderEmbeddings, ScoreSettings, make_batch, score_kinds
from marginmine.scoring.kinds import repairing
from marginmine.scoring.metrics import roc_auc
from marginmine.search import knn as knn_mod


def test_repairing_is_one_seeded_cycle_through_every_pair() -> None:
    for n in (2, 3, 10, 997):
        perm = repairing(n, 5)
        assert sorted(perm.tolist()) == list(range(n)) and not np.any(perm == np.arange(n))
        i, seen = 0, 0
        while True:  # one cycle: following perm from 0 visits every index before coming back
            i, seen = int(perm[i]), seen + 1
            if i == 0:
                break
        assert seen == n
        assert np.array_equal(repairing(n, 5), perm)
    assert not np.array_equal(repairing(997, 5), repairing(997, 6))
    assert repairing(1, 5).tolist() == [0]


@pytest.fixture(scope="module")
def paracrawl(paracrawl_tsv: Path):
    """The 2,000 human-labelled ParaCrawl v3 en-de pairs as one batch, scored by ratio and cosine
    over character trigram embeddings."""
    data = read_paracrawl_eval(paracrawl_tsv)
    settings = ScoreSettings(tuple(parse_scorers({"ratio": {"kind": "ratio"}, "cos": {"kind": "cosine"}}).items()))
    batch = make_batch(data.src, data.tgt, 0, EncoderEmbeddings(TrigramEncoder(), "en", "de"), settings)
    return data, batch, settings, score_kinds(batch, settings)


def test_the_re_paired_batch_is_scored_against_the_same_neighbourhoods(paracrawl, monkeypatch) -> None:
    data, batch, settings, real = paracrawl
    searches = []
    monkeypatch.setattr(knn_mod, "knn", lambda *a, **kw: searches.append(a) or pytest.fail("a new kNN search"))
    noise_batch = batch.repaired(1)
    noise = score_kinds(noise_batch, settings)
    assert not searches
    perm = repairing(len(batch), 1)
    assert np.array_equal(noise_batch.gy, batch.gy[perm]) and noise_batch.tgt == [data.tgt[i] for i in perm]
    cos = np.einsum("ij,ij->i", batch.xu[batch.gx].astype(np.float64), batch.yu[batch.gy[perm]].astype(np.float64))
    nb = (batch.side_mean("src", 4)[batch.gx].astype(np.float64)
          + batch.side_mean("tgt", 4)[batch.gy[perm]].astype(np.float64)) / 2
    assert np.allclose(noise["cos"], cos, atol=1e-6) and np.allclose(noise["ratio"], cos / nb, atol=1e-5)
    # the batch itself is untouched, and the same seed gives the same bytes
    assert np.array_equal(score_kinds(batch, settings)["ratio"], real["ratio"])
    assert score_kinds(batch.repaired(1), settings)["ratio"].tobytes() == noise["ratio"].tobytes()


def test_the_baseline_lies_below_valid_pairs_and_misses_noise_that_is_not_random(paracrawl) -> None:
    """Real pairs: the human-labelled valid ParaCrawl pairs score above their batch re-paired
    (ROC-AUC > 0.8 even with trigram embeddings). The invalid pairs of this set are not random:
    they score like the valid ones here (AUC of the labels ~0.5), so the baseline does not see
    them and the estimated clean share is too high - the bias cleanshare's docstring states."""
    data, batch, settings, real = paracrawl
    noise = score_kinds(batch.repaired(1), settings)
    valid = data.positive
    for name in ("ratio", "cos"):
        auc = roc_auc(np.r_[real[name][valid], noise[name]],
                      np.r_[np.ones(valid.sum(), bool), np.zeros(len(valid), bool)])
        assert auc > 0.8, (name, auc)
    n = int(valid.sum())
    labelled = valid[np.argsort(-real["ratio"], kind="stable")[:n]].mean()
    (estimated,) = clean_share(real["ratio"], noise["ratio"], [n]).shares
    assert estimated > labelled + 0.2, (estimated, labelled)


def test_the_estimate_recovers_a_mixture_of_known_share() -> None:
    """30% true pairs among noise whose scores are distributed as the baseline's: the noise share
    within 0.02, the clean share of the top N within 0.015 of the labelled one, and the largest N
    at 90% within 2% of the labelled one."""
    rng = np.random.default_rng(11)
    n, true_n = 20_000, 6_000
    scores = np.r_[rng.normal(1.25, 0.06, true_n), rng.normal(1.0, 0.06, n - true_n)]
    truth = np.r_[np.ones(true_n, bool), np.zeros(n - true_n, bool)]
    baseline = rng.normal(1.0, 0.06, n)
    pi0, lam = noise_share(scores, baseline)
    assert abs(pi0 - 0.7) < 0.02 and abs(lam - 1.0) < 0.01
    order = np.argsort(-scores, kind="stable")
    ns = [1_000, 3_000, 6_000, 9_000]
    est = clean_share(scores, baseline, ns)
    for n_, share in zip(ns, est.shares):
        assert abs(share - truth[order[:n_]].mean()) < 0.015, (n_, share, truth[order[:n_]].mean())
    labelled = np.cumsum(truth[order]) / np.arange(1, n + 1)
    at_90 = int(np.flatnonzero(labelled >= 0.9)[-1]) + 1
    assert abs(largest_n_at(scores, baseline, 0.9) - at_90) <= 0.02 * at_90


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="outside 1..3"):
        clean_share(np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.0]), [4])
    with pytest.raises(ValueError, match="baseline: scores must be finite"):
        noise_share(np.array([1.0]), np.array([np.nan]))
    with pytest.raises(ValueError, match="scores: a non-empty"):
        noise_share(np.array([]), np.array([1.0]))


def test_exact_values_with_ties_at_the_edges() -> None:
    """By hand: baseline 0..9 (median 4.5, half of it below); scores: four below 4.5 (noise, by
    assumption 2: pi0 = 4 / (10 x 0.5)) and six above it, two of them tied at 7."""
    baseline = np.arange(10.0)
    scores = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 7.0, 9.0, 9.5])
    pi0, lam = noise_share(scores, baseline)
    assert lam == 4.5 and pi0 == 4 / (10 * 0.5)
    est = clean_share(scores, baseline, [1, 2, 3, 4, 10])
    # N = 1: t = 9.5, no baseline score >= 9.5; N = 2: t = 9, 1 of 10; N = 3 and 4: t = 7, the two
    # tied pairs count (4 at or above), 3 of 10; N = 10: t = 0, all: 1 - 0.8 * 10 / 10
    assert est.shares == pytest.approx((1.0, 1 - 0.8 * 10 * 0.1 / 2, 1 - 0.8 * 10 * 0.3 / 4,
                                        1 - 0.8 * 10 * 0.3 / 4, 1 - 0.8))
    assert largest_n_at(scores, baseline, 0.6) == 2 and largest_n_at(scores, baseline, 1.0) == 1
    with pytest.raises(ValueError, match="target 0"):
        largest_n_at(scores, baseline, 0)


def test_repeated_sentences_can_re_pair_into_original_pairs_and_are_marked(paracrawl) -> None:
    """A batch where every pair is one of two pairs repeated: most re-paired lines are original pairs
    again, and original_pairs() says which; a one-pair batch and re-pairing twice are refused."""
    data, batch, settings, real = paracrawl
    from marginmine.scoring.kinds import Batch

    gx, gy = np.array([0, 1] * 50), np.array([0, 1] * 50)
    twice = Batch(["a", "b"] * 50, ["x", "y"] * 50, batch.xu[:2], batch.yu[:2], gx, gy)
    noise = twice.repaired(3)
    same = noise.original_pairs()
    assert np.array_equal(same, noise.gy == gx) and 0 < same.sum() < 100
    assert not batch.original_pairs().any() and not batch.repaired(1).original_pairs().any()
    with pytest.raises(ValueError, match="cannot be re-paired again"):
        noise.repaired(4)
    with pytest.raises(ValueError, match="a batch of 1 pair"):
        Batch(["a"], ["x"], batch.xu[:1], batch.yu[:1], np.array([0]), np.array([0])).repaired(1)
