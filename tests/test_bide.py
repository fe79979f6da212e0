"""The BiDE+AM network (Yang et al. 2019, Sec. 5.4): hashed character n-grams of each piece, the
four poolings, the table saved with the weights, and SGD training as in the paper."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from marginmine.encoders import bide_model, dual, dual_model
from marginmine.encoders.base import ParallelData, load_encoder

SMALL = {"arch": "bide", "vocab_size": 200, "spm_sample": 2000, "buckets": 4096, "dim": 16, "d_model": 32,
         "ffn": 64, "heads": 2, "layers": 1, "batch_size": 32, "epochs": 1, "threads": 1, "max_len": 32}


def test_fnv1a_matches_the_published_test_vectors() -> None:
    assert bide_model.fnv1a(b"") == 0xCBF29CE484222325
    assert bide_model.fnv1a(b"a") == 0xAF63DC4C8601EC8C
    assert bide_model.fnv1a(b"foobar") == 0x85944171F73967E8


def test_char_ngrams_of_a_piece_with_boundary_marks() -> None:
    assert bide_model.char_ngrams("ab") == ["<ab", "ab>", "<ab>"]
    grams = bide_model.char_ngrams("▁Haus")            # <▁Haus>: 7 characters
    assert len(grams) == 5 + 4 + 3 + 2 and grams[0] == "<▁H" and grams[-1] == "▁Haus>"
    assert bide_model.char_ngrams("") == [] and bide_model.char_ngrams("a") == ["<a>"]
    assert bide_model.char_ngrams("aaaa") == ["<aa", "aaa", "aa>", "<aaa", "aaaa", "aaa>", "<aaaa", "aaaa>",
                                              "<aaaa>"]          # a repeated n-gram is kept once


def test_ngram_table_pads_and_caps() -> None:
    pieces = ["ab", "abcdefghijklmnopqrstuvwxyz0123456789", ""]
    t = bide_model.ngram_table(pieces, buckets=97)
    assert t.shape == (4, bide_model.NGRAMS_PER_PIECE)
    assert (t[0, :3] < 97).all() and (t[0, 3:] == 97).all()
    assert (t[1] < 97).all()                               # capped at NGRAMS_PER_PIECE
    assert (t[2] == 97).all() and (t[3] == 97).all()       # no n-gram; the padding token
    assert t[0, 0] == bide_model.fnv1a("<ab".encode()) % 97


def test_four_poolings_ignore_padding_and_share_pieces_across_the_batch() -> None:
    torch.manual_seed(0)
    cfg = {**dual_model.DEFAULTS, **SMALL, "vocab_size": 10, "dropout": 0.0}
    model = bide_model.BiDE(cfg).eval()
    model.set_pieces([f"p{i}" for i in range(10)])
    flat = np.array([1, 2, 3, 4, 5, 1], dtype=np.int32)
    with torch.no_grad():
        both = model(*model.inputs(flat, np.array([4, 2])))
        first = model(*model.inputs(flat[:4], np.array([4])))
        second = model(*model.inputs(flat[4:], np.array([2])))
    assert torch.allclose(both[0], first[0], atol=1e-5) and torch.allclose(both[1], second[0], atol=1e-5)
    assert torch.allclose(both.norm(dim=1), torch.ones(2), atol=1e-5)
    with pytest.raises(ValueError, match="9 pieces for a vocabulary of 10"):
        model.set_pieces(["p"] * 9)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory, real_data: Path) -> list[ParallelData]:
    d = real_data / "tatoeba-manythings-deu-eng-2018"
    tmp = tmp_path_factory.mktemp("bide_data")
    for lang in ("de", "en"):
        lines = (d / f"train.nooverlap.{lang}").read_text(encoding="utf-8").rstrip("\n").split("\n")
        (tmp / f"train.{lang}").write_text("\n".join(lines[::350][:400]) + "\n", encoding="utf-8")
    return [ParallelData("de", "en", tmp / "train.de", tmp / "train.en")]


def test_the_ngram_table_is_built_from_the_pieces_and_saved_with_the_weights(pairs, tmp_path: Path) -> None:
    out = dual.train(pairs, tmp_path / "bide", {**SMALL, "optimizer": "sgd", "lr": 0.003, "max_steps": 4}, seed=3)
    enc = load_encoder(out)
    n = json.loads((out / "config.json").read_text())["vocab_size"]
    pieces = [enc.sp.id_to_piece(i) for i in range(n)]
    assert np.array_equal(enc.model.table.numpy(), bide_model.ngram_table(pieces, SMALL["buckets"]))
    untrained = dual.train(pairs, tmp_path / "twin", SMALL, seed=3, untrained=True)
    w, w0 = torch.load(out / "model.pt"), torch.load(untrained / "model.pt")
    assert not torch.equal(w["ngram.weight"], w0["ngram.weight"])          # SGD moved the n-gram rows
    assert torch.equal(w["table"], w0["table"])
    emb = enc.encode(["Das Haus ist groß.", "The house is big.", ""], "de")
    assert emb.shape == (3, 16) and np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
