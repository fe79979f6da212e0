"""The dual encoder's parameters and networks (DAN, transformer, BiLSTM: tensors in, unit-norm
embeddings out), its loss and batching helpers, and its sentencepiece model. Trained by
:mod:`.dual_train`, loaded by :mod:`.dual`."""

from __future__ import annotations

import gc
import io
import itertools
import logging
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from marginmine.encoders.base import EncoderError

log = logging.getLogger(__name__)

KIND = "dual"
ARCHS = ("dan", "transformer", "bilstm", "bide")
LR_SCHEDULES = ("constant", "linear", "cosine")
CHECKPOINT = Path("checkpoints") / "last.pt"
CKPT_FORMAT = "marginmine-dual-checkpoint"

#: every training parameter and its default; unknown keys are an error (typos)
DEFAULTS: dict[str, Any] = {
    "arch": "dan",
    "dim": 320,                 # output embedding size
    "vocab_size": 8000,         # joint sentencepiece unigram vocabulary
    "spm_sample": 300_000,      # sentences (all languages) sampled to train sentencepiece
    "character_coverage": 0.9999,
    "max_len": 128,             # subwords kept per sentence
    "buckets": 1 << 18,         # dan: hashed bigram buckets; bide: hashed character 3-6-gram buckets
    "emb_dim": 320,             # dan: id / bigram embedding size
    "hidden": 512,              # dan: hidden layer; bilstm: hidden size per direction
    "d_model": 256,             # transformer / bilstm / bide: token embedding size
    "layers": 2,                # transformer / bide layers
    "heads": 4,
    "ffn": 1024,
    "dropout": 0.1,             # transformer / bilstm
    "batch_size": 512,          # pairs per step
    "sort_window": None,        # batches sorted by length together (less padding); None: 1 for dan, 100 else
    "optimizer": "adam",        # adam (sparse tables: lazy Adam) | sgd (the BiDE+AM paper: SGD, lr 0.003)
    "lr": 1e-3,                 # peak learning rate
    "lr_schedule": "constant",  # constant | linear | cosine (decay to 0 at max_steps, after warmup)
    # linear warm-up: update i (0-based) of the first warmup_steps uses lr*(i+1)/warmup_steps
    "warmup_steps": 0,
    "epochs": 3,
    "margin": 0.3,
    "scale": 20.0,
    "directions": 2,            # 2: both ranking directions, sides swapped at random (BiDE); 1: x->y only (DE)
    "max_steps": None,          # stop after this many steps in total (None: no limit)
    "checkpoint_minutes": 2.0,
    "log_seconds": 30.0,
    "threads": None,            # torch CPU threads while training (None: torch's default)
    "hard_negatives": None,     # {count, share, kind: hard|random, miner: DIR, pool} (hard_negatives.py)
}
#: parameters that may differ between a run and its resumption
RESUMABLE = frozenset({"epochs", "max_steps", "checkpoint_minutes", "log_seconds", "threads"})
#: parameters that define the network (``config.json``)
MODEL_KEYS = ("arch", "dim", "vocab_size", "max_len", "buckets", "emb_dim", "hidden", "d_model",
              "layers", "heads", "ffn", "dropout")


# ---------------------------------------------------------------------------------------------
# pure helpers: loss, token arrays, batching


def lr_at(step: int, lr: float, schedule: str, warmup_steps: int, max_steps: int | None) -> float:
    """Learning rate of the update after ``step`` updates: linear warm-up, then the schedule.

    ``linear`` and ``cosine`` decay from ``lr`` after the warm-up to 0 at ``max_steps``.
    """
    if warmup_steps > 0 and step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if schedule == "constant":
        return lr
    if max_steps is None:
        raise EncoderError(f"lr_schedule {schedule!r} decays to 0 at max_steps: set max_steps")
    span = max(int(max_steps) - warmup_steps, 1)
    frac = min(max(step - warmup_steps, 0) / span, 1.0)
    if schedule == "linear":
        return lr * (1.0 - frac)
    if schedule == "cosine":
        return lr * 0.5 * (1.0 + math.cos(math.pi * frac))
    raise EncoderError(f"unknown lr_schedule {schedule!r} (known: {', '.join(LR_SCHEDULES)})")


def decays(cfg: dict[str, Any]) -> bool:
    """True when the lr schedule decays to 0 at ``max_steps`` (which then defines the run)."""
    return cfg["lr_schedule"] != "constant"


def in_batch_loss(src_emb: torch.Tensor, tgt_emb: torch.Tensor, scale: float, margin: float,
                  directions: int = 2) -> torch.Tensor:
    """Additive-margin softmax over in-batch negatives (Yang et al. 2019, Eq. 7), averaged over both
    directions (Eq. 7 + 8, BiDE) or forward only (``directions=1``: x ranks its translation among
    the batch's targets; with ``margin=0`` the DE of their Eq. 3).

    Row ``i`` of ``src_emb`` and ``tgt_emb`` is a translation pair (unit-norm rows). The logits are
    ``scale * (cos - margin)`` on the diagonal and ``scale * cos`` elsewhere.
    """
    sim = src_emb @ tgt_emb.T
    logits = scale * (sim - margin * torch.eye(sim.shape[0], dtype=sim.dtype, device=sim.device))
    labels = torch.arange(sim.shape[0], device=sim.device)
    if directions == 1:
        return F.cross_entropy(logits, labels)
    return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))


def hard_negative_loss(src_emb: torch.Tensor, tgt_emb: torch.Tensor, neg_emb: torch.Tensor, scale: float,
                       margin: float, directions: int = 2) -> torch.Tensor:
    """:func:`in_batch_loss` with extra target columns (Guo et al. 2018): the forward softmax of row
    ``i`` runs over the ``K`` batch targets and the ``len(neg_emb)`` negatives appended after them
    (``K + K*M`` columns when every pair brings ``M``); the backward term, if any, stays in-batch."""
    k = src_emb.shape[0]
    sim = src_emb @ torch.cat([tgt_emb, neg_emb]).T
    eye = torch.zeros_like(sim)
    eye[:, :k] = torch.eye(k, dtype=sim.dtype, device=sim.device)
    logits = scale * (sim - margin * eye)
    labels = torch.arange(k, device=sim.device)
    forward = F.cross_entropy(logits, labels)
    if directions == 1:
        return forward
    return 0.5 * (forward + F.cross_entropy(logits[:, :k].T, labels))


def bigram_hash(a: np.ndarray, b: np.ndarray, buckets: int) -> np.ndarray:
    """Bucket in ``[0, buckets)`` of each id pair ``(a[i], b[i])`` (splitmix64 finaliser)."""
    x = (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return (x % np.uint64(buckets)).astype(np.int64)


def row_starts(lengths: np.ndarray) -> np.ndarray:
    return np.cumsum(lengths) - lengths


def dan_bags(flat: np.ndarray, lengths: np.ndarray, vocab: int,
             buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """``EmbeddingBag`` input for sentences given as concatenated ids: ``(ids, offsets)``.

    The bag of a sentence of ``L >= 1`` ids holds its ``L`` ids followed by its ``L - 1`` bigram
    buckets shifted by ``vocab``; an empty sentence (``L = 0``) gives an empty bag.
    """
    flat = np.asarray(flat, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    starts = row_starts(lengths)
    nbi = np.maximum(lengths - 1, 0)
    sizes = lengths + nbi
    offsets = row_starts(sizes)
    out = np.empty(int(sizes.sum()), dtype=np.int64)
    sid = np.repeat(np.arange(n), lengths)
    out[offsets[sid] + np.arange(len(flat)) - starts[sid]] = flat
    if nbi.sum():
        first = np.ones(len(flat), dtype=bool)          # positions that have a right neighbour
        first[(starts + lengths - 1)[lengths > 0]] = False
        pos = np.flatnonzero(first)
        bi = vocab + bigram_hash(flat[pos], flat[pos + 1], buckets)
        bid = np.repeat(np.arange(n), nbi)
        out[offsets[bid] + lengths[bid] + np.arange(len(bi)) - row_starts(nbi)[bid]] = bi
    return out, offsets


def pad_ids(flat: np.ndarray, lengths: np.ndarray, pad: int) -> np.ndarray:
    """Concatenated ids as a ``(n, max(lengths))`` matrix filled up with ``pad``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    out = np.full((n, max(int(lengths.max(initial=0)), 1)), pad, dtype=np.int64)
    rows = np.repeat(np.arange(n), lengths)
    out[rows, np.arange(len(flat)) - row_starts(lengths)[rows]] = flat
    return out


def gather(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
           idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ids and lengths of sentences ``idx`` of a table ``(flat, starts, lengths)``."""
    sub_len = lengths[idx]
    pos = np.arange(int(sub_len.sum())) - np.repeat(row_starts(sub_len) - starts[idx], sub_len)
    return flat[pos], sub_len


def length_batches(sorted_lengths: np.ndarray, max_sentences: int, max_tokens: int) -> list[slice]:
    """Consecutive batches of length-sorted sentences: at most ``max_sentences`` sentences and
    ``max_tokens`` padded ids (count x longest) each; a single sentence always fits."""
    out, i, n = [], 0, len(sorted_lengths)
    while i < n:
        j = min(i + max_sentences, n)
        while j - i > 1 and (j - i) * max(int(sorted_lengths[j - 1]), 1) > max_tokens:
            j = i + max(1, min(j - i - 1, max_tokens // max(int(sorted_lengths[j - 1]), 1)))
        out.append(slice(i, j))
        i = j
    return out


def epoch_order(seed: int, epoch: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pair order and side-swap flags of one epoch; depends only on ``(seed, epoch, n)``."""
    rng = np.random.default_rng([seed, epoch])
    return rng.permutation(n), rng.random(n) < 0.5


def n_batches(n_pairs: int, batch_size: int) -> int:
    """Full batches per epoch (one smaller batch when there are fewer pairs than a batch)."""
    return max(1, n_pairs // batch_size) if n_pairs >= 2 else 0


def epoch_batches(seed: int, epoch: int, pair_len: np.ndarray, batch_size: int,
                  sort_window: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The batches (pair indices) and side-swap flags of one epoch; a function of its arguments only.

    With ``sort_window > 1`` every run of ``sort_window`` batches of the shuffled order is sorted by
    ``pair_len`` before it is cut into batches (less padding), and the batches are then shuffled.
    """
    n = len(pair_len)
    perm, swap = epoch_order(seed, epoch, n)
    nb = n_batches(n, batch_size)
    if nb <= 1:
        return [perm[:batch_size]][:nb], swap
    perm = perm[: nb * batch_size].copy()
    if sort_window > 1:
        w = sort_window * batch_size
        for i in range(0, len(perm), w):
            chunk = perm[i:i + w]
            perm[i:i + w] = chunk[np.argsort(pair_len[chunk], kind="stable")]
        order = np.random.default_rng([seed, epoch, 1]).permutation(nb)
        return [perm[b * batch_size:(b + 1) * batch_size] for b in order], swap
    return [perm[b * batch_size:(b + 1) * batch_size] for b in range(nb)], swap


# ---------------------------------------------------------------------------------------------
# models (tensors in, unit-norm embeddings out)


class DAN(nn.Module):
    """Mean of id + hashed-bigram embeddings, then Linear-tanh-Linear."""

    def __init__(self, cfg: dict[str, Any]):
        super().__init__()
        self.vocab, self.buckets = int(cfg["vocab_size"]), int(cfg["buckets"])
        self.bag = nn.EmbeddingBag(self.vocab + self.buckets, cfg["emb_dim"], mode="mean", sparse=True)
        nn.init.normal_(self.bag.weight, std=cfg["emb_dim"] ** -0.5)
        self.hidden = nn.Linear(cfg["emb_dim"], cfg["hidden"])
        self.out = nn.Linear(cfg["hidden"], cfg["dim"])

    def inputs(self, flat: np.ndarray, lengths: np.ndarray) -> tuple[torch.Tensor, ...]:
        ids, offsets = dan_bags(flat, lengths, self.vocab, self.buckets)
        return torch.from_numpy(ids), torch.from_numpy(offsets)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.hidden(self.bag(ids, offsets)))
        return F.normalize(self.out(h), dim=-1)


def pad_mask(ids: torch.Tensor, pad: int) -> torch.Tensor:
    """True at padding; position 0 is never masked (an empty sentence reads one pad token)."""
    mask = ids == pad
    mask[:, 0] = False
    return mask


class Transformer(nn.Module):
    """Pre-LN transformer encoder with learned positions and mean pooling (``pooled`` poolings of
    ``d_model`` concatenated before the output layer: 1 here, more in subclasses)."""

    def __init__(self, cfg: dict[str, Any], pooled: int = 1):
        super().__init__()
        d = cfg["d_model"]
        self.pad = int(cfg["vocab_size"])
        self.tok = nn.Embedding(self.pad + 1, d, padding_idx=self.pad)
        nn.init.normal_(self.tok.weight, std=d ** -0.5)
        with torch.no_grad():
            self.tok.weight[self.pad].zero_()
        self.pos = nn.Parameter(torch.randn(cfg["max_len"], d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, cfg["heads"], cfg["ffn"], cfg["dropout"], batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, cfg["layers"], norm=nn.LayerNorm(d),
                                         enable_nested_tensor=False)
        self.out = nn.Linear(pooled * d, cfg["dim"])
        self.scale = math.sqrt(d)

    def inputs(self, flat: np.ndarray, lengths: np.ndarray) -> tuple[torch.Tensor, ...]:
        return (torch.from_numpy(pad_ids(flat, lengths, self.pad)),)

    def contextual(self, ids: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder's output over token embeddings ``tokens`` of ``ids``, and the padding mask."""
        pad = pad_mask(ids, self.pad)
        x = tokens * self.scale + self.pos[: ids.shape[1]]
        return self.enc(x, src_key_padding_mask=pad), pad

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x, pad = self.contextual(ids, self.tok(ids))
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        pooled = (x * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        return F.normalize(self.out(pooled), dim=-1)


class BiLSTM(nn.Module):
    """One bidirectional LSTM layer, max pooling over time."""

    def __init__(self, cfg: dict[str, Any]):
        super().__init__()
        self.pad = int(cfg["vocab_size"])
        self.tok = nn.Embedding(self.pad + 1, cfg["d_model"], padding_idx=self.pad)
        self.drop = nn.Dropout(cfg["dropout"])
        self.lstm = nn.LSTM(cfg["d_model"], cfg["hidden"], batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * cfg["hidden"], cfg["dim"])

    def inputs(self, flat: np.ndarray, lengths: np.ndarray) -> tuple[torch.Tensor, ...]:
        return (torch.from_numpy(pad_ids(flat, lengths, self.pad)),)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pad = pad_mask(ids, self.pad)
        lengths = (~pad).sum(1).cpu()
        x = nn.utils.rnn.pack_padded_sequence(self.drop(self.tok(ids)), lengths, batch_first=True,
                                              enforce_sorted=False)
        h, _ = self.lstm(x)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=ids.shape[1])
        h = h.masked_fill(pad.unsqueeze(-1), float("-inf")).amax(1)
        return F.normalize(self.out(h), dim=-1)


def build_model(cfg: dict[str, Any]) -> nn.Module:
    """The network described by ``cfg`` (``config.json``), randomly initialised."""
    arch = cfg["arch"]
    if arch == "dan":
        return DAN(cfg)
    if arch == "transformer":
        return Transformer(cfg)
    if arch == "bilstm":
        return BiLSTM(cfg)
    if arch == "bide":
        from marginmine.encoders.bide_model import BiDE

        return BiDE(cfg)
    raise EncoderError(f"unknown dual-encoder arch {arch!r} (known: {', '.join(ARCHS)})")


# ---------------------------------------------------------------------------------------------
# sentencepiece


def train_spm(sentences: Sequence[str], vocab_size: int, character_coverage: float) -> bytes:
    """A sentencepiece unigram model (serialised) trained on ``sentences`` in the given order."""
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=buf, model_type="unigram", vocab_size=vocab_size,
        character_coverage=character_coverage, hard_vocab_limit=False, input_sentence_size=0,
        shuffle_input_sentence=False, num_threads=max(1, torch.get_num_threads()),
        minloglevel=2, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1)
    return buf.getvalue()


def tokenize(sp: Any, sentences: Sequence[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated sentencepiece ids (int32) and lengths; at most ``max_len`` ids a sentence.

    Python's cycle collector is paused meanwhile: the hundreds of thousands of id lists it would
    rescan again and again form no cycle (the smoke DAN's 646k training sentences on a 2-core Xeon:
    6.2-7.0 s -> 2.8-3.3 s, the same arrays)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        ids = sp.encode(list(sentences), out_type=int, num_threads=max(1, torch.get_num_threads()))
        ids = [x[:max_len] for x in ids]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int32, count=int(lengths.sum()))
    finally:
        if enabled:
            gc.enable()
    return flat, lengths


def load_spm(path: Path) -> Any:
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(path))
