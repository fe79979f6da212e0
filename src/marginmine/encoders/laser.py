"""LASER-style sentence encoder (Artetxe & Schwenk 2019, Section 3), trained with fairseq's LASER task.

Architecture (fairseq ``examples/laser/laser_src``, ``--task laser --arch laser_lstm``): a BiLSTM
encoder shared by all languages whose outputs are max-pooled into the sentence embedding
(``2 * encoder_hidden`` dims); an LSTM decoder initialised from the embedding, which also sees the
embedding and a target-language embedding (``lang_embed_dim``) at every step; one joint BPE
vocabulary (sentencepiece) and one fairseq dictionary for all languages; Adam with a fixed learning
rate, a fixed number of epochs alternating over all directions. Every language pair in the data is
trained in BOTH directions (de->en and en->de, fr->en and en->fr, ...), so English sentences are
encoded too.

``train(data, out_dir, params)`` lays out::

    out_dir/work/bpe/     spm.model, spm.vocab, the BPE training sample
    out_dir/work/spm/     BPE-encoded text, one directory per language pair
    out_dir/work/bin/     fairseq-preprocess output (--dataset-impl cached), <src>-<tgt>/ per direction
    out_dir/work/checkpoints/   fairseq checkpoints (checkpoint_last.pt: rerunning resumes)
    out_dir/work/laser.json     the LASER task's config; train.log the full fairseq log
    out_dir/model.pt, spm.model, dict.txt, config.json, encoder.json   (the exported encoder)

Parameters (``params`` dict; defaults are the CPU demo sizes, the paper's in brackets):

    embed_dim 256 [512]       input token embedding (encoder and decoder)
    encoder_hidden 256 [512]  BiLSTM units per direction; embedding dim = 2 * encoder_hidden
    encoder_layers 1 [1]      decoder_hidden 512 [2048]    lang_embed_dim 32 [32]
    bpe_vocab 8000 [~40000]   joint sentencepiece BPE vocabulary (``bpe_merges`` is accepted as alias)
    bpe_sample 1000000        sentences (balanced over languages, deterministic) to learn the BPE on
    character_coverage 0.9999 lr 0.001  dropout 0.1  clip_norm 5.0  max_epoch 10  max_update 0 (none)
    max_tokens 4000           tokens per batch        max_len 250  longest training sentence (tokens)
    update_freq 1  log_interval 50  save_interval_updates 1000  (mid-epoch checkpoints for resuming)
    encode_max_len 1000       longer inputs are truncated when embedding
    lower_case true, normalize_punct true   text preparation, in training and embedding alike: LASER's
                              (every Unicode "other" character a space, Moses punctuation normalisation,
                              lower-casing; :func:`marginmine.encoders.laser_format.normalize`), so an
                              export (``export-encoder --format laser``) embeds raw text in
                              ``laser_encoders`` as here. Recorded in the manifest (``info.settings``); an
                              encoder trained before they were recorded embeds raw text, as it was trained
    threads 0                 CPU threads of fairseq-train (OMP/MKL_NUM_THREADS); 0 = inherit. Set it
                              when other jobs share the cores: oversubscribed OpenMP made a tiny run
                              ~70x slower on a 2-core machine
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from marginmine.encoders.base import EncoderError, l2_normalize

if TYPE_CHECKING:
    import torch
from marginmine.encoders.laser_common import DEFAULTS, KIND, laser_src_dir, piece_table, text_settings
from marginmine.encoders.laser_format import batches, normalize
from marginmine.encoders.laser_train import RERUN_AFTER_CAP, forget_training, train  # noqa: F401 (kind API)
from marginmine.fairseq_process import lean_fairseq

# embedding


def max_pool_masked(outputs: "torch.Tensor", padding_mask: "torch.Tensor") -> "torch.Tensor":
    """Max over time of ``outputs`` (T x B x C) ignoring positions where ``padding_mask`` (T x B) is True."""
    import torch

    if outputs.dim() != 3 or padding_mask.shape != outputs.shape[:2]:
        raise ValueError(f"outputs {tuple(outputs.shape)} (T x B x C) and padding_mask "
                         f"{tuple(padding_mask.shape)} (T x B) do not match")
    if bool(padding_mask.all(dim=0).any()):
        raise ValueError("a sequence consists of padding only")
    masked = outputs.masked_fill(padding_mask.unsqueeze(-1).to(torch.bool), float("-inf"))
    return masked.max(dim=0).values


def _laser_lstm_module() -> Any:
    """fairseq's ``laser_lstm`` module (imported once; fairseq's registries reject a second import)."""
    lean_fairseq()
    from fairseq.models import MODEL_REGISTRY

    if "laser_lstm" in MODEL_REGISTRY:
        return sys.modules[MODEL_REGISTRY["laser_lstm"].__module__]
    path = laser_src_dir() / "laser_lstm.py"
    spec = importlib.util.spec_from_file_location("marginmine_fairseq_laser_lstm", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class LaserEncoder:
    """A trained LASER-style encoder: text prepared as in training -> spm -> dictionary ids + EOS ->
    BiLSTM -> masked max-pool. ``settings``: the text preparation (``lower_case``,
    ``normalize_punct``; :func:`normalize`), None for raw text (an encoder trained before it was
    recorded)."""

    kind = KIND

    def __init__(self, encoder: Any, dictionary: Any, sp: Any, langs: Sequence[str], dim: int,
                 device: str = "cpu", encode_max_len: int = 1000, batch_tokens: int = 16000,
                 batch_sentences: int = 512, settings: dict[str, bool] | None = None):
        self.encoder = encoder.eval()
        self.dictionary = dictionary
        self.sp = sp
        self.langs = list(langs)
        self.dim = int(dim)
        self.device = device
        self.encode_max_len = int(encode_max_len)
        self.batch_tokens = int(batch_tokens)
        self.batch_sentences = int(batch_sentences)
        self.settings = None if settings is None else dict(settings)
        table = piece_table(sp)
        self._ids = np.array([dictionary.index(piece) for piece in table], dtype=np.int64)
        self._eos = dictionary.eos()
        self._pad = dictionary.pad()

    def prepare(self, sentence: str) -> str:
        """The text sentencepiece sees, prepared as the training data was."""
        return str(sentence) if self.settings is None else normalize(str(sentence), **self.settings)

    def tokenize(self, sentences: Sequence[str]) -> list[np.ndarray]:
        """Dictionary ids of every sentence, EOS appended (as fairseq-preprocess binarizes)."""
        out = []
        for ids in self.sp.encode([self.prepare(s) for s in sentences]):
            ids = self._ids[np.asarray(ids, dtype=np.int64)] if ids else np.zeros(0, dtype=np.int64)
            out.append(np.append(ids[: self.encode_max_len - 1], self._eos))
        return out

    def batches(self, sentences: Sequence[str]) -> Iterator[tuple[np.ndarray, "torch.Tensor", "torch.Tensor"]]:
        """``(indices, padded ids B x T, lengths)`` per batch, longest first (as pack_padded_sequence
        wants), at most ``batch_sentences`` sentences and ``batch_tokens`` padded ids each."""
        return batches(self.tokenize(sentences), self._pad, self.batch_tokens, self.batch_sentences)

    def encode(self, sentences: Sequence[str], lang: str) -> np.ndarray:
        import torch

        if lang not in self.langs:
            raise EncoderError(f"laser encoder trained on {', '.join(self.langs)}; no {lang!r}")
        result = np.zeros((len(sentences), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for idx, batch, lens in self.batches(sentences):
                enc = self.encoder(batch.to(self.device), lens, "encode")
                outputs = enc["encoder_out"][0]                           # T x B x C
                pad_mask = torch.arange(batch.shape[1]).unsqueeze(1) >= lens.unsqueeze(0)  # T x B
                pooled = max_pool_masked(outputs, pad_mask.to(outputs.device))
                result[idx] = pooled.float().cpu().numpy()
        return l2_normalize(result)


def load(directory: Path, manifest: dict[str, Any], device: str = "cpu") -> LaserEncoder:
    """Load an encoder written by :func:`train` (``read_manifest`` has verified every file's hash)."""
    import sentencepiece as spm
    import torch

    lean_fairseq()
    from fairseq.data import Dictionary

    d = Path(directory)
    files = manifest.get("files", {})
    for key in ("model", "spm", "dict", "config"):
        name = files.get(key)
        if not name or name not in manifest.get("sha256", {}):
            raise EncoderError(f"{d}: manifest lists no verified {key!r} file")
    settings = text_settings(manifest.get("info") or {}, d)  # how its training data was prepared
    cfg = json.loads((d / files["config"]).read_text(encoding="utf-8"))
    # the only unpickling of a checkpoint: a file whose SHA-256 matched our manifest
    ckpt = torch.load(d / files["model"], map_location="cpu", weights_only=False)
    margs = (ckpt.get("cfg") or {}).get("model") if isinstance(ckpt, dict) else None
    if margs is None and isinstance(ckpt, dict):
        margs = ckpt.get("args")
    if margs is None or "model" not in ckpt:
        raise EncoderError(f"{d / files['model']}: not a fairseq checkpoint")

    def arg(name: str) -> Any:
        return margs[name] if isinstance(margs, dict) else getattr(margs, name)

    if arg("arch") != "laser_lstm":
        raise EncoderError(f"{d}: checkpoint architecture {arg('arch')!r}, expected laser_lstm")
    dictionary = Dictionary.load(str(d / files["dict"]))
    hidden, bidir = int(arg("encoder_hidden_size")), bool(arg("encoder_bidirectional"))
    dim = hidden * (2 if bidir else 1)
    if dim != int(manifest["dim"]):
        raise EncoderError(f"{d}: checkpoint gives {dim}-dim embeddings, manifest says {manifest['dim']}")
    module = _laser_lstm_module()
    encoder = module.LSTMEncoder(dictionary=dictionary, embed_dim=int(arg("encoder_embed_dim")),
                                 hidden_size=hidden, num_layers=int(arg("encoder_layers")),
                                 dropout_in=0.0, dropout_out=0.0, bidirectional=bidir, left_pad=True)
    state = {k[len("encoder."):]: v for k, v in ckpt["model"].items() if k.startswith("encoder.")}
    try:
        encoder.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise EncoderError(f"{d}: checkpoint does not fit its own arguments: {exc}") from exc
    del ckpt
    encoder.to(device)
    sp = spm.SentencePieceProcessor(model_file=str(d / files["spm"]))
    return LaserEncoder(encoder, dictionary, sp, manifest["langs"], dim, device=device,
                        encode_max_len=int(cfg.get("encode_max_len", DEFAULTS["encode_max_len"])),
                        settings=settings)


__all__ = ["LaserEncoder", "load", "max_pool_masked", "train"]  # the kind: load (here), train (laser_train)
