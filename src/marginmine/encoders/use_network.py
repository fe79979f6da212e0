"""The forward pass of universal-sentence-encoder-multilingual v3 (the kind's module,
:mod:`marginmine.encoders.use_multilingual`, says how it is computed and why it is fast): the
package's tokenization through the ``sentencepiece`` library (:class:`Tokenizer`), the network in
torch (:class:`Network`) and its FLOP count (:func:`flops`)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from marginmine.encoders.base import EncoderError

VOCAB_ROWS, CHUNKS, EMB, CNN = 7530, 17, 512, 256
#: (n-gram order, left context) of the three CNN branches
ORDERS = ((2, 0), (3, 1), (5, 2))
FEAT = EMB + len(ORDERS) * CNN
UNK, BOS, EOS = 0, 1, 2
#: rows of the first-stage table computed together (see Network.first_stage)
BLOCK_ROWS = 1024


def flops(tokens: int | np.ndarray, sentences: int | None = None) -> int:
    """Floating-point operations (2 per multiply-add) of the model as the package computes it, for
    ``tokens`` tokens (BOS/EOS included) in ``sentences`` sentences: per token the projection
    (512 x 768) and the six convolutions (n*256 x 256 each, two per branch), per sentence ``cnn_W``
    (1,280 x 512) and the dense stack. Elementwise work (layer norms, ReLU, tanh) is not counted."""
    if sentences is None:
        lens = np.asarray(tokens)
        tokens, sentences = int(lens.sum()), int(lens.size)
    per_token = EMB * len(ORDERS) * CNN + sum(2 * n * CNN * CNN for n, _ in ORDERS)
    per_sentence = FEAT * EMB + EMB * 320 + 320 * 320 + EMB * 320 + 320 * EMB + 320 * EMB + EMB * EMB
    return 2 * (per_token * int(tokens) + per_sentence * int(sentences))


class Tokenizer:
    """SentencePiece ids as the package's tokenizer gives them (see the module docstring)."""

    def __init__(self, model: Path):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(model))
        if self.sp.unk_id() != UNK or self.sp.bos_id() != BOS or self.sp.eos_id() != EOS:
            raise EncoderError(f"{model}: unexpected special ids (unk/bos/eos {self.sp.unk_id()}/"
                               f"{self.sp.bos_id()}/{self.sp.eos_id()})")

    def encode(self, sentences: Sequence[str], threads: int = 1) -> list[list[int]]:
        ids = self.sp.encode(list(sentences), out_type=int, add_bos=True, add_eos=True, num_threads=threads)
        for i, row in enumerate(ids):
            if len(row) == 2:
                ids[i] = [BOS, UNK, EOS]
            elif UNK in row:
                ids[i] = self._one_unk_per_char(sentences[i])
        return ids

    def _one_unk_per_char(self, text: str) -> list[int]:
        """sentencepiece merges a run of unknown characters into one ``<unk>``; the package's
        tokenizer, whose ids its embeddings (our oracle) are computed from, has one per character of
        the normalized text."""
        ids = self.sp.encode(text, out_type=int)
        pieces = self.sp.encode(text, out_type=str)  # an <unk>'s piece: its run of normalized text
        out = [BOS]
        for i, piece in zip(ids, pieces):
            out.extend([UNK] * len(piece) if i == UNK else [i])
        out.append(EOS)
        return out


class Network:
    """The model's forward pass in torch (float32, CPU)."""

    def __init__(self, weights: dict[str, np.ndarray]):
        import threading

        import torch

        w = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in weights.items()
             if not k.startswith("q") and k != "eps"}
        self.eps = float(weights["eps"])
        table = np.empty((CHUNKS * VOCAB_ROWS, EMB), dtype=np.uint8)
        for i in range(CHUNKS):
            table[i::CHUNKS] = weights[f"q{i + 1}"]
        self.table = torch.from_numpy(table)
        self.scale, self.lo = w["scale"], w["lo"]
        self.proj_w = torch.cat([w[f"proj{n}"] for n, _ in ORDERS], 1)
        self.proj_b = torch.cat([w[f"proj_b{n}"] for n, _ in ORDERS])
        self.proj_g = torch.cat([w[f"ln_g{n}"] for n, _ in ORDERS])
        self.proj_beta = torch.cat([w[f"ln_b{n}"] for n, _ in ORDERS])
        # the first stage (dequantize, project, layer norm) of every table row, filled in blocks of
        # BLOCK_ROWS rows the first time a batch needs one of them; untouched blocks cost no memory
        self.first = torch.empty((table.shape[0], len(ORDERS) * CNN), dtype=torch.float32)
        self.ready = np.zeros(-(-table.shape[0] // BLOCK_ROWS), dtype=bool)
        self.lock = threading.Lock()
        # conv weights (n*256 x 256, window slot-major) as (256 x n*256): one GEMM gives every slot's product
        self.conv = [[(w[f"w{j}_{n}"].reshape(n, CNN, CNN).permute(1, 0, 2).reshape(CNN, n * CNN)
                       .contiguous(), w[f"b{j}_{n}"]) for j in (1, 2)] for n, _ in ORDERS]
        self.ln_g, self.ln_b = w["ln_g"], w["ln_b"]
        self.cnn_w, self.cnn_b = w["cnn_W"], w["cnn_b"]
        self.d0p1 = torch.cat([w["d0"], w["p1"]], 1)  # mean @ [d0 | p1]
        self.d1, self.d2 = w["d1"], w["d2"]
        self.p3d3 = torch.cat([w["p3"], w["d3"]], 0)  # [y1 | y2] @ [p3 ; d3]

    def dequantize(self, ids: Any) -> Any:
        chunk = ids % CHUNKS
        return self.table[ids].float().mul_(self.scale[chunk, None]).add_(self.lo[chunk, None])

    def first_stage(self, ids: np.ndarray) -> Any:
        """Rows ``ids`` of the first-stage table, computing the blocks not yet computed. A block is
        always the same GEMM (its BLOCK_ROWS rows, one thread), so its values do not depend on which
        sentences asked for it first."""
        import torch
        import torch.nn.functional as F

        blocks = np.unique(ids // BLOCK_ROWS)
        missing = blocks[~self.ready[blocks]]
        if missing.size:
            with self.lock, torch_threads(1):
                for b in missing:
                    if self.ready[b]:  # another worker computed it meanwhile
                        continue
                    a, e = int(b) * BLOCK_ROWS, min(self.first.shape[0], (int(b) + 1) * BLOCK_ROWS)
                    x = torch.addmm(self.proj_b, self.dequantize(torch.arange(a, e)), self.proj_w)
                    self.first[a:e] = F.layer_norm(x, (x.shape[1],), self.proj_g, self.proj_beta, self.eps)
                    self.ready[b] = True
        return self.first[torch.from_numpy(ids)]

    def forward(self, ids: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """Embeddings (len(lens) x 512, float32) of sentences given as flat ids and their lengths."""
        import torch
        import torch.nn.functional as F

        n_tok, n_sent = int(ids.size), int(lens.size)
        starts = np.zeros(n_sent, dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        pos = np.arange(n_tok, dtype=np.int64) - np.repeat(starts, lens)  # position in its sentence
        rem = np.repeat(lens, lens) - 1 - pos  # tokens after it in its sentence
        # rows whose product with window slot d (d = slot - left) lands in another sentence
        cross = {d: torch.from_numpy(np.flatnonzero(pos < d) if d > 0 else np.flatnonzero(rem < -d))
                 for d in range(-2, 3) if d}
        tids = torch.from_numpy(ids)
        feats = torch.empty((n_tok, FEAT), dtype=torch.float32)
        feats[:, :EMB] = self.dequantize(tids)
        x = self.first_stage(ids)
        for i, ((n, left), layers) in enumerate(zip(ORDERS, self.conv)):
            h = x[:, i * CNN:(i + 1) * CNN]
            for j, (wcat, bias) in enumerate(layers):
                y = h @ wcat
                rows = y.view(n_tok * n, CNN)  # row t * n + k: token t's product with window slot k
                y = y.view(n_tok, n, CNN)
                out = feats[:, EMB + i * CNN:EMB + (i + 1) * CNN] if j == 1 else torch.empty((n_tok, CNN))
                torch.add(y[:, left], bias, out=out)
                for k in range(n):
                    d = k - left
                    if d == 0:
                        continue
                    rows.index_fill_(0, cross[d] * n + k, 0.0)  # (a contiguous tensor: fast)
                    yk = y[:, k]
                    if d > 0:
                        out[:n_tok - d] += yk[d:]
                    else:
                        out[-d:] += yk[:n_tok + d]
                out.relu_().add_(h)
                h = out
        feats = F.layer_norm(feats, (FEAT,), self.ln_g, self.ln_b, self.eps)
        sums = torch.zeros((n_sent, FEAT), dtype=torch.float32)
        sums.index_add_(0, torch.from_numpy(np.repeat(np.arange(n_sent), lens)), feats)
        flen = torch.from_numpy(lens.astype(np.float32))[:, None]
        mean = torch.addmm(flen * self.cnn_b, sums, self.cnn_w).mul_(flen.rsqrt())
        y01 = mean @ self.d0p1
        y0 = y01[:, :320].relu()
        y1 = y01[:, 320:].addmm_(y0, self.d1).relu_()
        y2 = (y1 @ self.d2).relu_()
        z = torch.cat([y1, y2], 1).matmul(self.p3d3).tanh_()
        z.mul_(z.square().sum(1, keepdim=True).clamp_(min=self.eps).rsqrt_())
        return z.numpy()


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``n`` (None: left as they are) for the block, then restored."""
    import torch

    before = torch.get_num_threads()
    if not n or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
