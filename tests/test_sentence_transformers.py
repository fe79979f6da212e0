"""The sentence-transformers encoder kind on a small model built and saved here (random weights, a
WordPiece vocabulary learned from real sentences, no network): import with pins, loading through
the manifest, L2-normalised embeddings, a shard embedded and scored by the CLI, and its errors."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest
import torch

from marginmine.cli.main import main
from marginmine.encoders import sbert
from marginmine.encoders.base import EncoderError, load_encoder
from marginmine.io.safe import sha256_file
from marginmine.scoring.files import read_scores

N = 300


@pytest.fixture(scope="module")
def pairs(real_data):
    en = (real_data / "wmt-newstest-ende/newstest2013.en").read_text(encoding="utf-8").splitlines()
    de = (real_data / "wmt-newstest-ende/newstest2013.de").read_text(encoding="utf-8").splitlines()
    return list(zip(en[:N], de[:N]))


def build_model(base, sentences):
    """A 1-layer BERT (random weights, seed 0) with mean pooling and a WordPiece vocabulary learned
    from ``sentences``, saved as a sentence-transformers directory (safetensors) below ``base``."""
    sbert._require_library()  # hides fairseq's broken torchaudio from transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers import models as tmodels
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    tok = Tokenizer(tmodels.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(list(sentences), trainers.WordPieceTrainer(
        vocab_size=2000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=64, max_position_embeddings=256))
    hf = base / "hf"
    bert.save_pretrained(hf)
    fast.save_pretrained(hf)
    word = models.Transformer(str(hf), max_seq_length=128)
    model = SentenceTransformer(modules=[word, models.Pooling(32, "mean")], device="cpu")
    out = base / "model"
    model.save(str(out))
    assert (out / "modules.json").is_file() and list(out.glob("*.safetensors"))
    return out


@pytest.fixture(scope="module")
def st_dir(tmp_path_factory, pairs):
    return build_model(tmp_path_factory.mktemp("st"), [s for p in pairs for s in p])


@pytest.fixture(scope="module")
def imported(st_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("st_enc") / "enc"
    sbert.train([], out, {"path": str(st_dir), "langs": ["de", "en"], "batch_size": 16})
    return out


def test_loads_and_embeds_normalised_rows(imported, pairs):
    enc = load_encoder(imported)
    assert enc.kind == "sentence-transformers" and enc.dim == 32
    manifest = json.loads((imported / "encoder.json").read_text())
    assert any(name.endswith(".safetensors") for name in manifest["sha256"])  # every file verified on load
    x = enc.encode([en for en, _ in pairs[:50]], "en")
    assert x.shape == (50, 32) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(x, enc.encode([en for en, _ in pairs[:50]], "en"))
    assert enc.encode([], "de").shape == (0, 32)
    with pytest.raises(EncoderError, match="no 'fr'"):
        enc.encode(["Bonjour."], "fr")


def test_scores_a_shard(imported, pairs, tmp_path):
    """A shard of real pairs plus copies (source = target) embedded and scored by the CLI: with
    random weights only copies are recognisable - they get the top ratio and cosine scores."""
    rows = [f"{en}\t{de}" for en, de in pairs[:100]] + [f"{en}\t{en}" for en, _ in pairs[100:120]]
    shard = tmp_path / "shard.tsv.gz"
    with gzip.open(shard, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(rows) + "\n")
    for col, lang in ((0, "en"), (1, "de")):
        assert main(["embed", "--encoder", str(imported), "--lang", lang, "--input", str(shard), "--column",
                     str(col), "--output", str(tmp_path / f"{lang}.npy"), "--threads", "1"]) == 0
    out = tmp_path / "scores.tsv.gz"
    assert main(["score", "--input", str(shard), "--src-embeddings", str(tmp_path / "en.npy"),
                 "--tgt-embeddings", str(tmp_path / "de.npy"), "--scorers", "ratio,cosine",
                 "--output", str(out)]) == 0
    cosine, ratio = read_scores(out, "cosine"), read_scores(out, "ratio")
    assert len(cosine) == len(ratio) == 120
    assert set(np.argsort(-cosine)[:20]) == set(range(100, 120))
    # a random network maps all sentences close together, so the margin is flat (near-ties around
    # 1.01): copies still lead - 18 of the top 20 alone, 17 in two full `make test` runs (2026-11-24)
    assert len(set(np.argsort(-ratio)[:20]) & set(range(100, 120))) >= 16, np.sort(ratio)[-25:]
    assert ratio[100:].min() > np.median(ratio[:100])


def test_import_errors(st_dir, tmp_path):
    ok = {"path": str(st_dir), "langs": ["de", "en"]}
    no_config = tmp_path / "noconf"
    shutil.copytree(st_dir, no_config)
    (no_config / "modules.json").unlink()
    with pytest.raises(EncoderError, match="no modules.json"):
        sbert.train([], tmp_path / "a", {**ok, "path": str(no_config)})
    pickled = tmp_path / "pickled"
    shutil.copytree(st_dir, pickled)
    (pickled / "extra.bin").write_bytes(b"not a checkpoint")
    with pytest.raises(EncoderError, match=r"params.sha256.extra.bin: no SHA-256 pinned"):
        sbert.train([], tmp_path / "b", {**ok, "path": str(pickled)})
    weights = next(p.relative_to(st_dir).as_posix() for p in st_dir.rglob("*.safetensors"))
    with pytest.raises(EncoderError, match="differs from"):
        sbert.train([], tmp_path / "c", {**ok, "sha256": {weights: "0" * 64}})
    sbert.train([], tmp_path / "d", {**ok, "sha256": {weights: sha256_file(st_dir / weights)}})
    with pytest.raises(EncoderError, match="random-init twin"):
        sbert.train([], tmp_path / "e", ok, untrained=True)
    with pytest.raises(EncoderError, match="not a directory"):
        sbert.train([], tmp_path / "f", {**ok, "path": str(tmp_path / "missing")})


def test_cuda_without_gpu_fails_at_once(imported):
    if torch.cuda.is_available():  # never on the CPU CI machine: then cuda must work
        assert load_encoder(imported, device="cuda").encode(["Hallo"], "de").shape == (1, 32)
        return
    with pytest.raises(EncoderError, match="no CUDA GPU"):
        load_encoder(imported, device="cuda")
