"""Dual encoder trained with in-batch negatives and an additive margin, in plain torch.

One encoder is shared by all languages (Guo et al. 2018; Yang et al. 2019 "BiDE"): a pair
``(x, y)`` is scored by the dot product of the L2-normalised embeddings, and training pushes each
pair above every other pair of its batch, in both directions, by a margin ``m``::

    loss = 1/2 [CE(s * (X Y^T - m I), diag) + CE(s * (Y X^T - m I), diag)]

Architectures (``params["arch"]``):

* ``dan`` (default) - Deep Averaging Network: the mean of the embeddings of the sentencepiece ids
  and of hashed bigrams of adjacent ids (one ``EmbeddingBag``, sparse gradients, lazy Adam),
  followed by Linear-tanh-Linear;
* ``transformer`` - small pre-LN transformer (2 layers, d=256, 4 heads), mean pooling;
* ``bilstm`` - one bidirectional LSTM layer, max pooling (LASER-style pooling).

:func:`train` writes an encoder directory (``model.pt``, ``spm.model``, ``config.json`` and, last,
``encoder.json``); ``marginmine.encoders.base.load_encoder`` loads it through :func:`load`.

Determinism and resuming: the model is initialised from ``seed`` and the batch order (and the
random side swap) of epoch ``e`` is drawn from ``numpy.random.default_rng([seed, e])``, so it does not
depend on the run's history. A checkpoint (``checkpoints/last.pt``) holds the model, the optimiser
moments, the torch RNG state and the position (epoch, batch, step); it is written every
``checkpoint_minutes`` and when training stops. Rerunning :func:`train` on the same ``out_dir``
continues from the checkpoint. "Same result" means: with the same data, params (except
``epochs``/``max_steps``/``checkpoint_minutes``/``log_seconds``/``threads``, which may change between runs;
``max_steps`` may not under a decaying ``lr_schedule``, whose end it sets),
seed, torch version and thread count, a fresh run gives bit-identical weights, and a run stopped
at a checkpoint (``max_steps``, ``max_minutes``) and resumed gives the same weights as an
uninterrupted run. A run killed between checkpoints repeats the steps after the last checkpoint.
``max_minutes`` (wall clock of one :func:`train` call, including sentencepiece training) is not
deterministic by nature: where it stops depends on the machine.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import random
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from marginmine.defaults import SEED
from marginmine.encoders.base import EncoderError, ParallelData, l2_normalize, write_manifest
from marginmine.io.safe import write_bytes, write_text
from marginmine.io.text import read_parallel

log = logging.getLogger(__name__)

KIND = "dual"
ARCHS = ("dan", "transformer", "bilstm")
LR_SCHEDULES = ("constant", "linear", "cosine")
CHECKPOINT = Path("checkpoints") / "last.pt"
_CKPT_FORMAT = "marginmine-dual-checkpoint"

#: every training parameter and its default; unknown keys are an error (typos)
DEFAULTS: dict[str, Any] = {
    "arch": "dan",
    "dim": 320,                 # output embedding size
    "vocab_size": 8000,         # joint sentencepiece unigram vocabulary
    "spm_sample": 300_000,      # sentences (all languages) sampled to train sentencepiece
    "character_coverage": 0.9999,
    "max_len": 128,             # subwords kept per sentence
    "buckets": 1 << 18,         # dan: hashed bigram buckets
    "emb_dim": 320,             # dan: id / bigram embedding size
    "hidden": 512,              # dan: hidden layer; bilstm: hidden size per direction
    "d_model": 256,             # transformer / bilstm: token embedding size
    "layers": 2,                # transformer layers
    "heads": 4,
    "ffn": 1024,
    "dropout": 0.1,             # transformer / bilstm
    "batch_size": 512,          # pairs per step
    "sort_window": None,        # batches sorted by length together (less padding); None: 1 for dan, 100 else
    "lr": 1e-3,                 # peak learning rate
    "lr_schedule": "constant",  # constant | linear | cosine (decay to 0 at max_steps, after warmup)
    "warmup_steps": 0,          # linear warm-up: update i (0-based) of the first warmup_steps uses lr*(i+1)/warmup_steps
    "epochs": 3,
    "margin": 0.3,
    "scale": 20.0,
    "max_steps": None,          # stop after this many steps in total (None: no limit)
    "checkpoint_minutes": 2.0,
    "log_seconds": 30.0,
    "threads": None,            # torch CPU threads while training (None: torch's default)
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


def _decays(cfg: dict[str, Any]) -> bool:
    """True when the lr schedule decays to 0 at ``max_steps`` (which then defines the run)."""
    return cfg["lr_schedule"] != "constant"


def in_batch_loss(src_emb: torch.Tensor, tgt_emb: torch.Tensor, scale: float, margin: float) -> torch.Tensor:
    """Additive-margin softmax over in-batch negatives, averaged over both directions.

    Row ``i`` of ``src_emb`` and ``tgt_emb`` is a translation pair (unit-norm rows). The logits are
    ``scale * (cos - margin)`` on the diagonal and ``scale * cos`` elsewhere.
    """
    sim = src_emb @ tgt_emb.T
    logits = scale * (sim - margin * torch.eye(sim.shape[0], dtype=sim.dtype, device=sim.device))
    labels = torch.arange(sim.shape[0], device=sim.device)
    return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))


def bigram_hash(a: np.ndarray, b: np.ndarray, buckets: int) -> np.ndarray:
    """Bucket in ``[0, buckets)`` of each id pair ``(a[i], b[i])`` (splitmix64 finaliser)."""
    x = (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return (x % np.uint64(buckets)).astype(np.int64)


def _starts(lengths: np.ndarray) -> np.ndarray:
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
    starts = _starts(lengths)
    nbi = np.maximum(lengths - 1, 0)
    sizes = lengths + nbi
    offsets = _starts(sizes)
    out = np.empty(int(sizes.sum()), dtype=np.int64)
    sid = np.repeat(np.arange(n), lengths)
    out[offsets[sid] + np.arange(len(flat)) - starts[sid]] = flat
    if nbi.sum():
        first = np.ones(len(flat), dtype=bool)          # positions that have a right neighbour
        first[(starts + lengths - 1)[lengths > 0]] = False
        pos = np.flatnonzero(first)
        bi = vocab + bigram_hash(flat[pos], flat[pos + 1], buckets)
        bid = np.repeat(np.arange(n), nbi)
        out[offsets[bid] + lengths[bid] + np.arange(len(bi)) - _starts(nbi)[bid]] = bi
    return out, offsets


def pad_ids(flat: np.ndarray, lengths: np.ndarray, pad: int) -> np.ndarray:
    """Concatenated ids as a ``(n, max(lengths))`` matrix filled up with ``pad``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    out = np.full((n, max(int(lengths.max(initial=0)), 1)), pad, dtype=np.int64)
    rows = np.repeat(np.arange(n), lengths)
    out[rows, np.arange(len(flat)) - _starts(lengths)[rows]] = flat
    return out


def gather(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
           idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ids and lengths of sentences ``idx`` of a table ``(flat, starts, lengths)``."""
    sub_len = lengths[idx]
    pos = np.arange(int(sub_len.sum())) - np.repeat(_starts(sub_len) - starts[idx], sub_len)
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


def _pad_mask(ids: torch.Tensor, pad: int) -> torch.Tensor:
    """True at padding; position 0 is never masked (an empty sentence reads one pad token)."""
    mask = ids == pad
    mask[:, 0] = False
    return mask


class Transformer(nn.Module):
    """Pre-LN transformer encoder with learned positions and mean pooling."""

    def __init__(self, cfg: dict[str, Any]):
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
        self.out = nn.Linear(d, cfg["dim"])
        self.scale = math.sqrt(d)

    def inputs(self, flat: np.ndarray, lengths: np.ndarray) -> tuple[torch.Tensor, ...]:
        return (torch.from_numpy(pad_ids(flat, lengths, self.pad)),)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pad = _pad_mask(ids, self.pad)
        x = self.tok(ids) * self.scale + self.pos[: ids.shape[1]]
        x = self.enc(x, src_key_padding_mask=pad)
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
        pad = _pad_mask(ids, self.pad)
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
    raise EncoderError(f"unknown dual-encoder arch {arch!r} (known: {', '.join(ARCHS)})")


class LazyAdam(torch.optim.Optimizer):
    """Adam for sparse gradients: only the rows in the batch are updated (dense ops, fast on CPU)."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):  # noqa: D102
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.coalesce()
                rows, val = grad.indices()[0], grad.values()
                st = self.state[p]
                if not st:
                    st["step"] = torch.zeros((), dtype=torch.float64)
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["step"] += 1
                t = float(st["step"])
                m = st["exp_avg"].index_select(0, rows).mul_(b1).add_(val, alpha=1 - b1)
                v = st["exp_avg_sq"].index_select(0, rows).mul_(b2).addcmul_(val, val, value=1 - b2)
                st["exp_avg"].index_copy_(0, rows, m)
                st["exp_avg_sq"].index_copy_(0, rows, v)
                denom = v.div_(1 - b2 ** t).sqrt_().add_(group["eps"])
                p.index_add_(0, rows, m.div_(denom), alpha=-group["lr"] / (1 - b1 ** t))
        return None


def make_optimizers(model: nn.Module, lr: float) -> list[torch.optim.Optimizer]:
    """Adam for dense parameters, :class:`LazyAdam` for sparse embedding tables."""
    sparse = {id(m.weight) for m in model.modules()
              if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse}
    dense = [p for p in model.parameters() if id(p) not in sparse]
    opts: list[torch.optim.Optimizer] = [torch.optim.Adam(dense, lr=lr)]
    if sparse:
        opts.append(LazyAdam([p for p in model.parameters() if id(p) in sparse], lr=lr))
    return opts


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
    """Concatenated sentencepiece ids (int32) and lengths; at most ``max_len`` ids a sentence."""
    ids = sp.encode(list(sentences), out_type=int, num_threads=max(1, torch.get_num_threads()))
    ids = [x[:max_len] for x in ids]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter((i for x in ids for i in x), dtype=np.int32, count=int(lengths.sum()))
    return flat, lengths


def _load_spm(path: Path) -> Any:
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(path))


# ---------------------------------------------------------------------------------------------
# the loaded encoder


class DualEncoder:
    """A trained dual encoder: ``encode(sentences, lang)`` -> unit-norm float32 ``(n, dim)``."""

    kind = KIND

    def __init__(self, model: nn.Module, sp: Any, config: dict[str, Any], device: str = "cpu",
                 batch_size: int = 2048, max_tokens: int = 65536):
        self.model = model.to(device).eval()
        self.sp = sp
        self.config = config
        self.dim = int(config["dim"])
        self.max_len = int(config["max_len"])
        self.device = device
        self.batch_size = batch_size
        self.max_tokens = max_tokens

    def encode(self, sentences: Sequence[str], lang: str) -> np.ndarray:
        """Embeddings of ``sentences``; ``lang`` is ignored (one encoder for all languages)."""
        out = np.zeros((len(sentences), self.dim), dtype=np.float32)
        if not len(sentences):
            return out
        flat, lengths = tokenize(self.sp, sentences, self.max_len)
        order = np.argsort(lengths, kind="stable")
        starts = _starts(lengths)
        with torch.inference_mode():
            for part in length_batches(lengths[order], self.batch_size, self.max_tokens):
                idx = order[part]
                sub, sub_len = gather(flat, starts, lengths, idx)
                inputs = [t.to(self.device) for t in self.model.inputs(sub, sub_len)]
                out[idx] = self.model(*inputs).float().cpu().numpy()
        return l2_normalize(out)


def load(directory: Path, manifest: dict[str, Any], device: str) -> DualEncoder:
    """Loader for ``kind: dual`` directories (files already checked against the manifest)."""
    files = manifest["files"]
    d = Path(directory)
    try:
        config = json.loads((d / files["config"]).read_text(encoding="utf-8"))
        model = build_model(config)
        state = torch.load(d / files["model"], map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except (KeyError, OSError, RuntimeError, json.JSONDecodeError) as exc:
        raise EncoderError(f"{d}: cannot load dual encoder ({exc})") from exc
    return DualEncoder(model, _load_spm(d / files["spm"]), config, device)


# ---------------------------------------------------------------------------------------------
# training


def resolve_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """``DEFAULTS`` updated with ``params``; unknown keys or a bad arch raise ``EncoderError``."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise EncoderError(f"unknown dual-encoder params: {', '.join(unknown)} "
                           f"(known: {', '.join(sorted(DEFAULTS))})")
    cfg = {**DEFAULTS, **params}
    if cfg["arch"] not in ARCHS:
        raise EncoderError(f"unknown dual-encoder arch {cfg['arch']!r} (known: {', '.join(ARCHS)})")
    if cfg["lr_schedule"] not in LR_SCHEDULES:
        raise EncoderError(f"unknown lr_schedule {cfg['lr_schedule']!r} (known: {', '.join(LR_SCHEDULES)})")
    if _decays(cfg) and cfg["max_steps"] is None:
        raise EncoderError(f"lr_schedule {cfg['lr_schedule']!r} decays to 0 at max_steps: set max_steps")
    if int(cfg["warmup_steps"]) < 0:
        raise EncoderError("dual-encoder warmup_steps must be >= 0")
    # (max_steps 0 writes the untrained, random-init encoder: no update, no schedule)
    if _decays(cfg) and 0 < int(cfg["max_steps"]) <= int(cfg["warmup_steps"]):
        raise EncoderError(f"dual-encoder warmup_steps ({cfg['warmup_steps']}) must be below max_steps "
                           f"({cfg['max_steps']}) under lr_schedule {cfg['lr_schedule']!r}")
    if cfg["sort_window"] is None:
        cfg["sort_window"] = 1 if cfg["arch"] == "dan" else 100
    if int(cfg["batch_size"]) < 2:
        raise EncoderError("dual-encoder batch_size must be >= 2 (in-batch negatives)")
    return cfg


class _Corpus:
    """All training sentences as one id table plus the index pairs of each translation pair."""

    def __init__(self, flat: np.ndarray, lengths: np.ndarray, left: np.ndarray, right: np.ndarray):
        self.flat, self.lengths, self.starts = flat, lengths, _starts(lengths)
        self.left, self.right = left, right

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for a in (self.flat, self.lengths, self.left, self.right):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()


Sides = list[tuple[list[str], list[str]]]


def _read_data(data: Sequence[ParallelData]) -> tuple[Sides, list[dict[str, Any]]]:
    """The usable pairs of every direction (defective lines dropped and counted)."""
    sides, stats = [], []
    for item in data:
        src, tgt, dropped = [], [], 0
        for pair in read_parallel(item.src, item.tgt):
            if pair.defect is not None:
                dropped += 1
                continue
            src.append(pair.src)
            tgt.append(pair.tgt)
        sides.append((src, tgt))
        stats.append({"src_lang": item.src_lang, "tgt_lang": item.tgt_lang, "src": str(item.src),
                      "tgt": str(item.tgt), "pairs": len(src), "dropped": dropped})
    return sides, stats


def _spm_sample(sides: Sides, size: int, seed: int) -> list[str]:
    everything = [s for pair in sides for side in pair for s in side]
    if len(everything) <= size:
        return everything
    keep = np.sort(np.random.default_rng([seed, 7]).choice(len(everything), size, replace=False))
    return [everything[i] for i in keep]


def _build_corpus(sp: Any, sides: Sides, max_len: int) -> _Corpus:
    flats, lens, left, right = [], [], [], []
    base = 0
    for src, tgt in sides:
        for side in (src, tgt):
            f, ln = tokenize(sp, side, max_len)
            flats.append(f)
            lens.append(ln)
        n = len(src)
        left.append(np.arange(base, base + n))
        right.append(np.arange(base + n, base + 2 * n))
        base += 2 * n
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa: E731
    return _Corpus(cat(flats, np.int32), cat(lens, np.int64), cat(left, np.int64), cat(right, np.int64))


def _torch_save_atomic(obj: Any, path: Path) -> None:
    # not safeio's temporary name: torch.save names the archive after the file it writes, so a
    # per-process name would make model.pt differ from run to run (the kill test caught it)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    torch.save(obj, tmp)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _load_checkpoint(path: Path, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint gets the same advice
        raise EncoderError(f"{path}: unreadable checkpoint ({exc}); delete it to train from scratch") from exc
    if not isinstance(ckpt, dict) or ckpt.get("format") != _CKPT_FORMAT:
        raise EncoderError(f"{path}: not a marginmine dual-encoder checkpoint; "
                           "delete it to train from scratch")
    # a decaying schedule ends at max_steps, so there it defines the run; params added since the
    # checkpoint was written take their defaults
    resumable = RESUMABLE - {"max_steps"} if _decays(cfg) else RESUMABLE
    saved = {**DEFAULTS, **ckpt["config"]}
    old = {k: v for k, v in saved.items() if k not in resumable}
    new = {k: v for k, v in cfg.items() if k not in resumable}
    diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if diff or ckpt["seed"] != seed:
        what = (", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diff)
                or f"seed {ckpt['seed']} -> {seed}")
        why = (f" (lr_schedule {cfg['lr_schedule']!r} decays to 0 at max_steps, so max_steps cannot change)"
               if "max_steps" in diff else "")
        raise EncoderError(f"{path}: checkpoint was trained with other settings ({what}){why}; "
                           "use another output directory or delete it to start over")
    return ckpt


def train(data: Sequence[ParallelData], out_dir: Path, params: dict[str, Any], *, seed: int = SEED,
          max_minutes: float | None = None) -> Path:
    """Train (or resume training) a dual encoder on ``data``; returns the encoder directory.

    Stops after ``params["epochs"]`` epochs, ``params["max_steps"]`` steps or ``max_minutes`` of wall
    clock (checked between steps), whichever comes first; every stop writes a loadable encoder.
    """
    t_start = time.monotonic()
    cfg = resolve_params(params)
    if not data:
        raise EncoderError("no training data for the dual encoder")
    threads = torch.get_num_threads()
    if cfg["threads"]:
        torch.set_num_threads(int(cfg["threads"]))
    try:
        return _train(data, Path(out_dir), cfg, seed, max_minutes, t_start)
    finally:
        torch.set_num_threads(threads)


def _train(data: Sequence[ParallelData], out: Path, cfg: dict[str, Any], seed: int, max_minutes: float | None,
           t_start: float) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    ckpt_path = out / CHECKPOINT
    ckpt = _load_checkpoint(ckpt_path, cfg, seed) if ckpt_path.exists() else None

    sides, data_stats = _read_data(data)
    spm_path = out / "spm.model"
    if ckpt is None:
        (out / "encoder.json").unlink(missing_ok=True)
        sample = _spm_sample(sides, int(cfg["spm_sample"]), seed)
        if not sample:
            raise EncoderError("no usable training sentences for the dual encoder")
        t = time.monotonic()
        write_bytes(spm_path, train_spm(sample, int(cfg["vocab_size"]), float(cfg["character_coverage"])))
        log.info("sentencepiece: %d pieces from %d sentences in %.1f s", _load_spm(spm_path).get_piece_size(),
                 len(sample), time.monotonic() - t)
    elif not spm_path.exists() or _sha256_bytes(spm_path.read_bytes()) != ckpt["spm_sha256"]:
        raise EncoderError(f"{spm_path}: missing or not the one {ckpt_path} was trained with; "
                           "delete the output directory to start over")
    sp = _load_spm(spm_path)
    spm_sha = _sha256_bytes(spm_path.read_bytes())
    corpus = _build_corpus(sp, sides, int(cfg["max_len"]))
    del sides
    fingerprint = corpus.fingerprint()
    if ckpt is not None and ckpt["data_fingerprint"] != fingerprint:
        raise EncoderError(f"{ckpt_path}: training data differ from the checkpoint's; "
                           "use another output directory or delete it to start over")
    n_pairs = len(corpus.left)
    model_cfg = {k: cfg[k] for k in MODEL_KEYS}
    model_cfg["vocab_size"] = int(sp.get_piece_size())

    det = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        random.seed(seed)
        np.random.seed(seed % (1 << 32))
        torch.manual_seed(seed)
        model = build_model(model_cfg)
        opts = make_optimizers(model, float(cfg["lr"]))
        pos = {"epoch": 0, "batch": 0, "step": 0, "pairs_seen": 0, "minutes": 0.0, "loss": None,
               "loss_avg": None}
        if ckpt is not None:
            model.load_state_dict(ckpt["model"])
            for opt, state in zip(opts, ckpt["optimizers"]):
                opt.load_state_dict(state)
            torch.set_rng_state(ckpt["rng"])
            pos.update({k: ckpt[k] for k in pos})
            log.info("resuming %s at step %d (epoch %d, batch %d)", out, pos["step"], pos["epoch"],
                     pos["batch"])
        stopped = _train_loop(model, opts, corpus, cfg, seed, pos, t_start, max_minutes,
                              lambda: _save_checkpoint(ckpt_path, model, opts, cfg, seed, fingerprint,
                                                       spm_sha, pos))
    finally:
        torch.use_deterministic_algorithms(det[0], warn_only=det[1])

    _save_checkpoint(ckpt_path, model, opts, cfg, seed, fingerprint, spm_sha, pos)
    (out / "encoder.json").unlink(missing_ok=True)
    _torch_save_atomic({k: v.detach().cpu().clone() for k, v in model.state_dict().items()}, out / "model.pt")
    write_text(out / "config.json", json.dumps(model_cfg, indent=1) + "\n")
    langs = sorted({x.src_lang for x in data} | {x.tgt_lang for x in data})
    info = {"arch": cfg["arch"], "seed": seed, "params": cfg, "train_pairs": n_pairs, "data": data_stats,
            "steps": pos["step"], "pairs_seen": pos["pairs_seen"],
            "epochs_done": round(pos["pairs_seen"] / max(n_pairs, 1), 4),
            "minutes": round(pos["minutes"], 3), "final_loss": pos["loss_avg"], "stopped_by": stopped,
            "spm_pieces": model_cfg["vocab_size"], "torch": torch.__version__,
            "threads": torch.get_num_threads()}
    write_manifest(out, kind=KIND, dim=int(cfg["dim"]), langs=langs,
                   files={"model": "model.pt", "spm": "spm.model", "config": "config.json"}, info=info)
    log.info("dual encoder written to %s (%d steps, %d pairs seen, %.1f min, loss %s, stopped by %s)", out,
             pos["step"], pos["pairs_seen"], pos["minutes"], pos["loss_avg"], stopped)
    return out


def _save_checkpoint(path: Path, model: nn.Module, opts: list[torch.optim.Optimizer], cfg: dict[str, Any],
                     seed: int, fingerprint: str, spm_sha: str, pos: dict[str, Any]) -> None:
    _torch_save_atomic({"format": _CKPT_FORMAT, "version": 1, "config": dict(cfg), "seed": seed,
                        "data_fingerprint": fingerprint, "spm_sha256": spm_sha,
                        "model": model.state_dict(), "optimizers": [o.state_dict() for o in opts],
                        "rng": torch.get_rng_state(), **pos}, path)


def _train_loop(model: nn.Module, opts: list[torch.optim.Optimizer], corpus: _Corpus, cfg: dict[str, Any],
                seed: int, pos: dict[str, Any], t_start: float, max_minutes: float | None,
                checkpoint: Any) -> str:
    """Run steps from ``pos`` (updated in place) until a stop condition; returns its name."""
    model.train()
    n_pairs, bs = len(corpus.left), int(cfg["batch_size"])
    if n_batches(n_pairs, bs) == 0:
        return "no_data"
    pair_len = np.maximum(corpus.lengths[corpus.left], corpus.lengths[corpus.right])
    scale, margin = float(cfg["scale"]), float(cfg["margin"])
    max_steps = cfg["max_steps"]
    lr, schedule, warmup = float(cfg["lr"]), str(cfg["lr_schedule"]), int(cfg["warmup_steps"])
    last_step = int(cfg["epochs"]) * n_batches(n_pairs, bs)
    if _decays(cfg) and last_step < int(max_steps):
        log.warning("%d epochs end training after %d steps, before max_steps %d: the %s lr schedule will "
                    "not decay to 0 (raise epochs)", int(cfg["epochs"]), last_step, int(max_steps), schedule)
    budget = None if max_minutes is None else 60.0 * max_minutes
    t_loop = time.monotonic()
    minutes0 = pos["minutes"]
    t_log = t_ckpt = t_loop
    pairs_log = 0
    while pos["epoch"] < int(cfg["epochs"]):
        batches, swap = epoch_batches(seed, pos["epoch"], pair_len, bs, int(cfg["sort_window"]))
        while pos["batch"] < len(batches):
            if max_steps is not None and pos["step"] >= int(max_steps):
                return "max_steps"
            if budget is not None and time.monotonic() - t_start >= budget:
                return "max_minutes"
            sel = batches[pos["batch"]]
            sw = swap[sel]
            a = np.where(sw, corpus.right[sel], corpus.left[sel])
            b = np.where(sw, corpus.left[sel], corpus.right[sel])
            flat, lengths = gather(corpus.flat, corpus.starts, corpus.lengths, np.concatenate([a, b]))
            emb = model(*model.inputs(flat, lengths))
            loss = in_batch_loss(emb[:len(sel)], emb[len(sel):], scale, margin)
            step_lr = lr_at(pos["step"], lr, schedule, warmup, max_steps)
            for opt in opts:
                opt.zero_grad(set_to_none=True)
                for group in opt.param_groups:
                    group["lr"] = step_lr
            loss.backward()
            for opt in opts:
                opt.step()
            value = float(loss.detach())
            pos["loss"] = value
            pos["loss_avg"] = value if pos["loss_avg"] is None else 0.98 * pos["loss_avg"] + 0.02 * value
            pos["step"] += 1
            pos["batch"] += 1
            pos["pairs_seen"] += len(sel)
            pairs_log += len(sel)
            now = time.monotonic()
            pos["minutes"] = minutes0 + (now - t_loop) / 60.0
            if now - t_log >= float(cfg["log_seconds"]):
                log.info("step %d epoch %d: %.0f pairs/s, lr %.2g, loss %.4f (avg %.4f)", pos["step"],
                         pos["epoch"], pairs_log / (now - t_log), step_lr, value, pos["loss_avg"])
                t_log, pairs_log = now, 0
            if now - t_ckpt >= 60.0 * float(cfg["checkpoint_minutes"]):
                checkpoint()
                t_ckpt = time.monotonic()
        pos["epoch"] += 1
        pos["batch"] = 0
    return "epochs"


__all__ = ["DEFAULTS", "DualEncoder", "bigram_hash", "build_model", "dan_bags", "epoch_batches",
           "epoch_order", "gather", "in_batch_loss", "length_batches", "load", "lr_at", "pad_ids", "resolve_params",
           "tokenize", "train"]
