"""The calibrated confidence score (Guo et al. 2018, Sec. 2.4.2), a fitted kind: its head by hand,
fitted on real held-out news pairs (leakage removed and counted, both file orientations), judged on
pairs it never saw, byte-identical when split, used by the mining benchmark, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from doubles import TrigramEncoder, trigram_encoder_dir
from marginmine.errors import InputError, MarginmineError
from marginmine.scoring import make_kind
from marginmine.scoring.calibrated import HEAD_ARRAYS, head_logit
from marginmine.scoring.heads import HeldOut, Positives, fit_head, load_arrays
from marginmine.scoring.metrics import roc_auc

NEWS = "wmt-newstest-ende"


def test_the_head_is_scale_times_cosine_plus_bias_from_u_and_u_squared() -> None:
    u = np.array([[0.6, 0.8], [1.0, 0.0]])
    arrays = {"scale_w1": np.array([[1.0], [0.0], [0.0], [2.0]]), "scale_b1": np.array([0.5]),
              "scale_w2": np.array([3.0]), "scale_b2": np.array(1.0),
              "bias_w1": np.array([[-1.0], [1.0], [0.0], [0.0]]), "bias_b1": np.array([0.0]),
              "bias_w2": np.array([2.0]), "bias_b2": np.array(-1.0)}
    phi = np.array([0.5, -0.25])
    # row 0: scale hidden relu(0.6 + 2*0.64 + 0.5) = 2.38 -> 3*2.38 + 1 = 8.14; bias hidden relu(0.2) -> 0.4 - 1
    # row 1: scale hidden relu(1 + 0 + 0.5) = 1.5 -> 5.5; bias hidden relu(-1) = 0 -> -1
    expected = np.array([8.14 * 0.5 + (-0.6), 5.5 * -0.25 + (-1.0)])
    np.testing.assert_allclose(head_logit(arrays, u, phi), expected, rtol=1e-12)


def _held_out(real_data: Path) -> list[HeldOut]:
    d = real_data / NEWS
    return [HeldOut("en", "de", str(d / "newstest2019-ende.en"), str(d / "newstest2019-ende.de")),
            HeldOut("de", "en", str(d / "newstest2019-deen.de"), str(d / "newstest2019-deen.en"))]


@pytest.fixture(scope="module")
def fitted(real_data: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch_module) -> Path:  # noqa: ANN001
    """A head fitted on trigram embeddings of newstest2019 (both directions), with one of its pairs
    also in the encoder's training data (removed and counted) and a protected file it does not touch."""
    out = tmp_path_factory.mktemp("head")
    protect = out.parent / "protect.de"
    protect.write_text("Ein Satz, den newstest2019 nicht hat.\n", encoding="utf-8")
    monkeypatch_module.setattr("marginmine.encoders.base.load_encoder", lambda d, device="cpu": TrigramEncoder())
    kind = make_kind("calibrated", {}, "test")
    fit_head("cal", kind, trigram_encoder_dir(out.parent), _held_out(real_data), "en", "de", out / "cal",
             protect=[protect], encoder_data=_training_data(out.parent, real_data), seed=7,
             positives=Positives("held_out"))  # the held-out pairs' own path (files positives: test_shortcut.py)
    return out / "cal"


def _training_data(base: Path, real_data: Path) -> Path:
    """An encoder-data manifest whose one pair has newstest2019-deen's first German sentence."""
    d = base / "encoder-data"
    d.mkdir(exist_ok=True)
    first_de = (real_data / NEWS / "newstest2019-deen.de").read_text(encoding="utf-8").splitlines()[0]
    (d / "t.en").write_text("An unrelated English sentence.\n", encoding="utf-8")
    (d / "t.de").write_text(first_de + "\n", encoding="utf-8")
    (d / "manifest.json").write_text(json.dumps([{"name": "t", "src_lang": "en", "tgt_lang": "de", "src": "t.en",
                                                  "tgt": "t.de", "pairs": 1}]))
    return d / "manifest.json"


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_the_fit_removes_and_counts_leaked_pairs_and_orients_both_files(fitted: Path, real_data: Path) -> None:
    manifest = json.loads((fitted / "head.json").read_text())
    sources = manifest["held_out"]["report"]["sources"]
    assert sources["held-out0"]["kept"] == 1997 and sources["held-out1"]["leakage"] == 1  # the encoder's training pair
    assert manifest["held_out"]["report"]["excluded_other_sentences"] == 2
    assert manifest["held_out"]["pairs"] == 1997 + 1999
    # the de-en file's German side is the target side: oriented en -> de like the corpus
    de = (fitted / "data" / "held-out1.de").read_text(encoding="utf-8").splitlines()
    assert de[0] == (real_data / NEWS / "newstest2019-deen.de").read_text(encoding="utf-8").splitlines()[1]
    assert manifest["fit"]["loss_last_50"] < manifest["fit"]["loss_first_50"]
    from marginmine.io.safe import sha256_file

    assert manifest["sha256"] == sha256_file(fitted / "head.npz") and set(load_arrays(fitted)) == set(HEAD_ARRAYS)


def test_the_fits_own_vs_other_check_scores_in_bounded_blocks_with_the_same_auc() -> None:
    """The check scores each source against every target a block of sources at a time (an MLP over
    1,044 x 1,044 pairs at once took 22 GB): no call sees more than the block, the AUC is the one of
    all pairs at once."""
    from marginmine.scoring.metrics import pair_auc, roc_auc

    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(23, 8)), rng.normal(size=(23, 8))
    v[:15] += 2 * u[:15]  # most sources' own target is close
    sizes = []

    def score(x, y):  # noqa: ANN001, ANN202
        sizes.append(len(x))
        return np.einsum("ij,ij->i", x, y)

    got = pair_auc(u, v, score, pairs=50)
    rows, cols = np.repeat(np.arange(23), 23), np.tile(np.arange(23), 23)
    assert got == roc_auc(np.einsum("ij,ij->i", u[rows], v[cols]), rows == cols) and got > 0.6
    assert max(sizes) <= 50 and sum(sizes) == 23 * 23 and len(sizes) == 12  # 2 sources (46 pairs) a call


def test_a_pretrained_encoder_keeps_the_encoder_datas_pairs(fitted: Path, real_data: Path, tmp_path: Path) -> None:
    """A pre-trained encoder (fit-scorer --pretrained, e.g. USE) never trained on the encoder data: the
    held-out pair that the DAN's fit above removes as the encoder's own training pair stays (the same
    list of pairs is what the positives files lose, e.g. news test sets the DAN trains on)."""
    out = fit_head("cal", make_kind("calibrated", {"steps": 20}, "test"), trigram_encoder_dir(tmp_path),
                   _held_out(real_data), "en", "de", tmp_path / "cal", encoder_data=_training_data(tmp_path, real_data),
                   seed=7, positives=Positives("held_out"), encoder_trained=False)
    sources = out["held_out"]["report"]["sources"]
    assert sources["held-out1"]["kept"] == 2000 and "leakage" not in sources["held-out1"], sources
    assert out["held_out"]["report"]["excluded_other_sentences"] == 0 and out["held_out"]["pairs"] == 1997 + 2000


def test_the_calibrated_score_separates_translations_it_never_saw(fitted: Path, real_data: Path) -> None:
    """newstest2018 (not fitted on): each source's own translation against every other target, one
    global threshold - what a filter needs, and what raw cosine is poor at (Guo et al. Sec. 2.4.2)."""
    src = (real_data / NEWS / "newstest2018.en").read_text(encoding="utf-8").splitlines()[:300]
    tgt = (real_data / NEWS / "newstest2018.de").read_text(encoding="utf-8").splitlines()[:300]
    enc = TrigramEncoder()
    u, v = enc.encode(src, "en"), enc.encode(tgt, "de")
    rows, cols = np.repeat(np.arange(300), 300), np.tile(np.arange(300), 300)
    kind = make_kind("calibrated", {"head": str(fitted)}, "test")
    cal = kind.pair_scores(u[rows], v[cols])
    cos = np.einsum("ij,ij->i", u[rows], v[cols])
    own = rows == cols
    # trigram embeddings (a weak encoder: cosine AUC ~0.70 here); the calibration adds ~0.035
    assert roc_auc(cal, own) > roc_auc(cos, own) + 0.02 > 0.7
    check = json.loads((fitted / "head.json").read_text())["check"]  # the fit's own kept-out tenth
    assert check["auc_fitted"] > check["auc_cosine"] + 0.02


def test_split_score_files_are_byte_identical(fitted: Path, paracrawl_tsv: Path, tmp_path: Path) -> None:
    from marginmine.scoring.files import EncoderEmbeddings, ScoreSettings, score_file

    pairs = tmp_path / "pairs.tsv"
    lines = paracrawl_tsv.read_text(encoding="utf-8").splitlines()[:400]
    pairs.write_text("".join("\t".join(line.split("\t")[:2]) + "\n" for line in lines), encoding="utf-8")
    kind = make_kind("calibrated", {"head": str(fitted)}, "test")
    emb = EncoderEmbeddings(TrigramEncoder(), "en", "de")
    outs = []
    for size in (400, 37):
        out = tmp_path / f"s{size}.tsv.gz"
        score_file([str(pairs)], out, emb, ScoreSettings((("cal", kind),), batch_size=size))
        outs.append(out.read_bytes())
    import gzip

    assert gzip.decompress(outs[0]) == gzip.decompress(outs[1])


def test_the_mining_benchmark_thresholds_found_pairs_by_the_calibrated_score(fitted: Path, real_data: Path) -> None:
    from marginmine.evaluate.bucc import Split, evaluate_split_pair

    enc = TrigramEncoder()
    data = {}
    for name, year in (("train", "2016"), ("test", "2017")):
        src = (real_data / NEWS / f"newstest{year}.en").read_text(encoding="utf-8").splitlines()[:200]
        tgt = (real_data / NEWS / f"newstest{year}.de").read_text(encoding="utf-8").splitlines()[:200]
        data[name] = (enc.encode(src, "en"), enc.encode(tgt, "de"), Split(src, tgt, [(i, i) for i in range(200)]))
    kind = make_kind("calibrated", {"head": str(fitted)}, "test")
    plain = evaluate_split_pair(data["train"], data["test"], 4, [("cal", "absolute")], retrievals=["fwd"])
    cal = evaluate_split_pair(data["train"], data["test"], 4, [("cal", "absolute")], retrievals=["fwd"],
                              rescore={"cal": kind.pair_scores})
    # the same pairs are found (retrieval by cosine); only their scores, and so the threshold, differ
    assert plain[0].candidates == cal[0].candidates and plain[0].threshold != cal[0].threshold
    # trigram embeddings mine poorly (F1 ~0.11 either way here); the calibrated threshold is no worse
    assert cal[0].f1 >= plain[0].f1 > 0.05


def test_a_held_out_pair_in_an_evaluation_set_is_an_error_naming_file_and_line(real_data: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The held-out pairs must be disjoint from every evaluation set: the fit stops at the first pair
    with a side in one, naming the held-out file, its line and the set (not removed quietly)."""
    protect = tmp_path / "newstest-like.de"
    third_de = (real_data / NEWS / "newstest2019-deen.de").read_text(encoding="utf-8").splitlines()[2]
    protect.write_text("Erster Satz.\n" + third_de + "\n", encoding="utf-8")
    monkeypatch.setattr("marginmine.encoders.base.load_encoder", lambda d, device="cpu": TrigramEncoder())
    with pytest.raises(InputError) as err:
        fit_head("cal", make_kind("calibrated", {}, "test"), trigram_encoder_dir(tmp_path), _held_out(real_data),
                 "en", "de", tmp_path / "cal", protect=[protect], seed=7)
    assert err.value.path == str(real_data / NEWS / "newstest2019-deen.de") and err.value.line == 3
    assert f"occurs in the evaluation set {tmp_path.name}/newstest-like.de" in str(err.value)
    assert not (tmp_path / "cal" / "head.json").exists()


def test_a_head_fitted_on_another_encoder_is_refused(fitted: Path, real_data: Path, tmp_path: Path) -> None:
    """Scoring embeddings written by another encoder with the head (the same dimension: the dim check
    cannot see it) stops before any score is written; the embeddings' own encoder passes, and
    embeddings without a record pass with a warning."""
    import subprocess
    import sys

    from marginmine.encoders.base import encoder_identity
    from marginmine.encoders.embed import provenance_path

    rows = (real_data / NEWS / "newstest2018.en").read_text(encoding="utf-8").splitlines()[:40]
    de = (real_data / NEWS / "newstest2018.de").read_text(encoding="utf-8").splitlines()[:40]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in zip(rows, de)), encoding="utf-8")
    enc = TrigramEncoder()
    x, y = tmp_path / "x.en.npy", tmp_path / "y.de.npy"
    np.save(x, enc.encode(rows, "en").astype(np.float16))
    np.save(y, enc.encode(de, "de").astype(np.float16))
    own = encoder_identity(trigram_encoder_dir(fitted.parent.parent))  # the encoder the fixture fitted on
    other = encoder_identity(trigram_encoder_dir(tmp_path, "another"))
    assert own == json.loads((fitted / "head.json").read_text())["encoder"]["identity"] != other

    def score(out: str) -> subprocess.CompletedProcess[str]:
        spec = json.dumps({"cal": {"kind": "calibrated", "head": str(fitted)}})
        return subprocess.run([sys.executable, "-m", "marginmine.cli.main", "score", "--input", str(pairs),
                               "--src-embeddings", str(x), "--tgt-embeddings", str(y), "--scorers", spec,
                               "--output", str(tmp_path / out)], capture_output=True, text=True)

    r = score("none.tsv.gz")  # no record: scored, with a warning
    assert r.returncode == 0 and "cannot be checked" in r.stderr, r.stderr
    for p in (x, y):
        provenance_path(p).write_text(json.dumps({"encoder": other, "rows": 40, "dim": 64}))
    r = score("other.tsv.gz")
    assert r.returncode == 2 and "comes from another encoder" in r.stderr and str(fitted / "head.json") in r.stderr
    assert not (tmp_path / "other.tsv.gz").exists()
    provenance_path(y).write_text(json.dumps({"encoder": own, "rows": 40, "dim": 64}))
    r = score("mixed.tsv.gz")  # the two sides by two encoders
    assert r.returncode == 2 and "was embedded by another encoder" in r.stderr, r.stderr
    provenance_path(x).write_text(json.dumps({"encoder": own, "rows": 40, "dim": 64}))
    r = score("own.tsv.gz")
    assert r.returncode == 0 and "cannot be checked" not in r.stderr, r.stderr


def test_errors_name_what_to_do(fitted: Path, real_data: Path, tmp_path: Path) -> None:
    with pytest.raises(MarginmineError, match="no fitted head"):
        make_kind("calibrated", {}, "test").pair_scores(np.ones((1, 64)), np.ones((1, 64)))
    kind = make_kind("calibrated", {"head": str(fitted)}, "test")
    with pytest.raises(MarginmineError, match="fitted on 64-dim embeddings, given 8-dim ones"):
        kind.pair_scores(np.ones((1, 8)), np.ones((1, 8)))
    with pytest.raises(InputError, match="cannot read the fitted head's manifest"):
        load_arrays(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "head.json").write_text((fitted / "head.json").read_text())
    (broken / "head.npz").write_bytes((fitted / "head.npz").read_bytes()[:-10])
    with pytest.raises(InputError, match="is not the manifest's"):
        load_arrays(broken)
    with pytest.raises(MarginmineError, match="is not the corpus' en-de"):
        fit_head("cal", kind, tmp_path, [HeldOut("en", "fr", "a", "b")], "en", "de", tmp_path / "o", seed=1)
    with pytest.raises(MarginmineError, match="takes SRC_LANG,TGT_LANG,SRC_FILE,TGT_FILE"):
        HeldOut.parse("en,de,a.en")
    with pytest.raises(MarginmineError, match="dropout must be in"):
        make_kind("calibrated", {"dropout": 1.0}, "test")
    with pytest.raises(MarginmineError, match="kind ratio has nothing to fit"):
        fit_head("r", make_kind("ratio", {}, "test"), tmp_path, [], "en", "de", tmp_path / "o", seed=1)
