"""The BiDE+AM network of Yang et al. (2019, "Improving Multilingual Sentence Embedding using
Bi-directional Dual Encoder with Additive Margin Softmax", Sec. 5.4): a transformer encoder whose
tokens are a word (subword) embedding plus the embeddings of the token's hashed character 3- to
6-grams, pooled four ways (max, mean, first token, attention) and projected to the embedding size.

The paper's size: 3 layers, 8 heads, hidden 512, filter 2048, embeddings of 500. Tokens here are
the dual encoder's sentencepiece pieces; a piece's character n-grams are those of ``<piece>`` (with
boundary marks, as fastText does), hashed with 64-bit FNV-1a into ``buckets`` rows. The n-gram
ids of every piece are a table built once from the sentencepiece vocabulary (:meth:`BiDE.set_pieces`)
and saved with the weights (a buffer), so a loaded model needs no sentencepiece call to rebuild it.
Each forward pass embeds the n-grams of the batch's distinct pieces only (one bag per piece).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from marginmine.encoders.dual_model import Transformer

NGRAM_ORDERS = (3, 4, 5, 6)
#: n-grams kept per piece (the first ones in order of n, then position): a piece of 10 characters has 34
NGRAMS_PER_PIECE = 32
_FNV_OFFSET, _FNV_PRIME, _MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def fnv1a(data: bytes) -> int:
    """64-bit FNV-1a hash (stable across runs and machines, unlike ``hash``)."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def char_ngrams(piece: str) -> list[str]:
    """The character 3- to 6-grams of ``<piece>``, by n then position (duplicates kept once)."""
    word = f"<{piece}>"
    out: dict[str, None] = {}
    for n in NGRAM_ORDERS:
        for i in range(len(word) - n + 1):
            out.setdefault(word[i:i + n])
    return list(out)


def ngram_table(pieces: Sequence[str], buckets: int, per_piece: int = NGRAMS_PER_PIECE) -> np.ndarray:
    """``(len(pieces) + 1, per_piece)`` bucket ids of each piece's n-grams, padded with ``buckets``
    (the last row, for the padding token, is all padding)."""
    table = np.full((len(pieces) + 1, per_piece), buckets, dtype=np.int64)
    for i, piece in enumerate(pieces):
        grams = char_ngrams(piece)[:per_piece]
        table[i, :len(grams)] = [fnv1a(g.encode("utf-8")) % buckets for g in grams]
    return table


class BiDE(Transformer):
    """The pre-LN transformer over (piece + hashed character n-gram) embeddings; max + mean +
    first-token + attention pooling concatenated and projected to ``dim``."""

    def __init__(self, cfg: dict[str, Any]):
        super().__init__(cfg, pooled=4)
        d = int(cfg["d_model"])
        self.buckets = int(cfg["buckets"])
        self.ngram = nn.EmbeddingBag(self.buckets + 1, d, mode="mean", sparse=True, padding_idx=self.buckets)
        nn.init.normal_(self.ngram.weight, std=d ** -0.5)
        with torch.no_grad():
            self.ngram.weight[self.buckets].zero_()
        self.register_buffer("table", torch.full((self.pad + 1, NGRAMS_PER_PIECE), self.buckets, dtype=torch.long))
        self.att = nn.Linear(d, 1)

    def set_pieces(self, pieces: Sequence[str]) -> None:
        """Fill the n-gram table from the sentencepiece vocabulary (id order)."""
        if len(pieces) != self.pad:
            raise ValueError(f"{len(pieces)} pieces for a vocabulary of {self.pad}")
        self.table.copy_(torch.from_numpy(ngram_table(pieces, self.buckets)))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        uniq, inverse = torch.unique(ids, return_inverse=True)
        grams = self.ngram(self.table[uniq])             # one bag per distinct piece of the batch
        x, pad = self.contextual(ids, self.tok(ids) + grams[inverse])
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        mean = (x * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        top = x.masked_fill(pad.unsqueeze(-1), float("-inf")).amax(1)
        weights = torch.softmax(self.att(x).squeeze(-1).masked_fill(pad, float("-inf")), dim=1)
        attended = torch.einsum("bt,btd->bd", weights, x)
        return F.normalize(self.out(torch.cat([top, mean, x[:, 0], attended], dim=-1)), dim=-1)
