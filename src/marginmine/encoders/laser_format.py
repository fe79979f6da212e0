"""LASER's own checkpoint format and tokenisation, both ways (read: ``laser-pretrained``; write:
``marginmine export-encoder --format laser``).

The format, as the authors release LASER2 (``laser2.pt``, ``laser2.spm``, ``laser2.cvocab``) and as
the official ``laser_encoders`` package loads it:

* ``<name>.pt`` - a ``torch.save`` dict. A BiLSTM checkpoint (LASER2) holds ``params`` (the keyword
  arguments of the encoder: ``num_embeddings, padding_idx, embed_dim, hidden_size, num_layers,
  bidirectional, left_pad, padding_value``), ``model`` (its state dict: ``embed_tokens.weight``,
  ``lstm.*``) and ``dictionary`` (token -> index; ``<s> <pad> </s> <unk>`` are 0-3). A transformer
  checkpoint (the per-language LASER3 students) holds fairseq's ``cfg`` and ``model`` instead, and its
  vocabulary is the ``.cvocab`` file (fairseq dictionary text).
* ``<name>.spm`` - the sentencepiece model.

Tokenisation (``laser_encoders.LaserTokenizer``): every Unicode "other" character (category C)
becomes a space, Moses punctuation normalisation (language ``en``, Perl parity, the two quote rules
of Moses release 4.0), lower-casing, sentencepiece pieces; then each piece is looked up in the
dictionary (unknown -> ``<unk>``) and ``</s>`` appended. The sentence embedding is the max over time
of the BiLSTM's outputs (padding excluded).

A BiLSTM checkpoint contains only tensors, numbers and strings, so it is read with
``torch.load(weights_only=True)`` - no pickled code runs. A transformer checkpoint needs full
unpickling; :func:`read_checkpoint` does that only when the caller has verified the file's pinned
SHA-256.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from marginmine.encoders.base import EncoderError

if TYPE_CHECKING:
    import torch

#: the keyword arguments of LASER's BiLSTM encoder, in its ``params`` entry
LSTM_PARAMS = ("num_embeddings", "padding_idx", "embed_dim", "hidden_size", "num_layers", "bidirectional",
               "left_pad", "padding_value")
SPECIALS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
SPACE = re.compile(r"\s+")
TRANSFORMER_LAYER = re.compile(r"^(encoder\.)?layers\.\d+\.")
LASER3_NAME = re.compile(r"^laser3-(?P<lang>[A-Za-z]{3}_[A-Za-z]{4})\.v\d+\.pt$")
log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------
# tokenisation


@lru_cache(maxsize=1)
def _punct_normalizer() -> Any:
    from sacremoses import MosesPunctNormalizer

    norm = MosesPunctNormalizer("en", perl_parity=True)
    norm.substitutions[21] = ("\u2018", r'"')  # Moses release 4.0, as laser_encoders patches it
    norm.substitutions[22] = ("\u201a", r'"')
    return norm


def normalize(text: str, *, lower_case: bool = True, normalize_punct: bool = True) -> str:
    """LASER's text preparation before sentencepiece (see the module docstring): the one function
    that prepares text for the ``laser-pretrained`` loader and for the ``laser`` kind's training (BPE
    sample, encoded training files) and embedding.

    Apply it once, to raw text, as ``laser_encoders`` does: Moses' normaliser is not idempotent.
    Its rule moving a comma or full stop inside a closing quote (``"([,.]+)`` -> ``\\1"``,
    sacremoses' rule 43 of 45) runs after the rule joining ``) `` to the punctuation that follows
    (``\\) ([.!:?;,])``) and moves past one quote per pass: ``(3,8 Euro) ",`` -> ``(3,8 euro) ,"``
    -> ``(3,8 euro),"`` and ``Notfall‘“,`` -> ``notfall","`` -> ``notfall,""``. Prepared text given
    to ``laser_encoders`` (which prepares it again) therefore embeds differently for such sentences
    (about one in 3,000 German news sentences).
    """
    out = text if text.isprintable() else "".join(" " if unicodedata.category(c).startswith("C") else c
                                                   for c in text)  # isprintable: no category C (nor Z)
    if normalize_punct:
        out = _punct_normalizer().normalize(out)
    return out.lower() if lower_case else out


class LaserTokenizer:
    """Sentences -> dictionary ids with ``</s>`` appended, exactly as LASER prepares them."""

    def __init__(self, spm_model: str | Path, dictionary: dict[str, int], *, lower_case: bool = True,
                 normalize_punct: bool = True, prepend_bos: bool = False):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(spm_model))
        self.dictionary = {**dictionary, **SPECIALS}
        self.lower_case, self.normalize_punct, self.prepend_bos = lower_case, normalize_punct, prepend_bos

    def pieces(self, text: str) -> list[str]:
        text = normalize(text, lower_case=self.lower_case, normalize_punct=self.normalize_punct)
        return SPACE.sub(" ", " ".join(self.sp.encode(text, out_type=str))).strip().split()

    def ids(self, text: str) -> np.ndarray:
        unk = SPECIALS["<unk>"]
        ids = [self.dictionary.get(p, unk) for p in self.pieces(text)]
        return np.array(([SPECIALS["<s>"]] if self.prepend_bos else []) + ids + [SPECIALS["</s>"]],
                        dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# checkpoints


def read_checkpoint(path: str | Path, *, pinned: bool) -> dict[str, Any]:
    """A LASER checkpoint as a dict; ``pinned`` = its SHA-256 matched the user's pin (only then may a
    transformer checkpoint be fully unpickled)."""
    import pickle

    import torch

    p = Path(path)
    try:
        ckpt = torch.load(p, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError, TypeError) as exc:
        if "weights_only" not in str(exc) and "Unsupported global" not in str(exc):
            raise EncoderError(f"{p}: not a LASER checkpoint (torch.load failed: {str(exc).splitlines()[0]})") \
                from exc
        if not pinned:
            raise EncoderError(f"{p}: needs full unpickling (a LASER3/transformer checkpoint) and its SHA-256 "
                               "is not pinned; refusing to load it") from exc
        ckpt = torch.load(p, map_location="cpu", weights_only=False)
    check_format(ckpt, p)
    return ckpt


def check_format(ckpt: Any, path: Path) -> str:
    """``"lstm"`` or ``"transformer"``; anything else is refused with what was expected."""
    if isinstance(ckpt, dict) and {"params", "model", "dictionary"} <= set(ckpt):
        missing = [k for k in LSTM_PARAMS[:3] if k not in ckpt["params"]]
        if missing:
            raise EncoderError(f"{path}: LASER BiLSTM checkpoint without params {missing}")
        return "lstm"
    if isinstance(ckpt, dict) and {"cfg", "model"} <= set(ckpt) and isinstance(ckpt["model"], dict) \
            and any(TRANSFORMER_LAYER.match(k) for k in ckpt["model"]):
        return "transformer"
    keys = sorted(ckpt)[:8] if isinstance(ckpt, dict) else type(ckpt).__name__
    raise EncoderError(f"{path}: not LASER's checkpoint format (expected a dict with params/model/dictionary "
                       f"(LASER2) or cfg/model (LASER3); found {keys}). A fairseq training checkpoint of "
                       "our laser kind is exported with `marginmine export-encoder --format laser`")


def laser3_language(path: str | Path) -> str | None:
    """The language a LASER3 file covers, from its released name (``laser3-wol_Latn.v1.pt``)."""
    m = LASER3_NAME.match(Path(path).name)
    return m.group("lang") if m else None


# ----------------------------------------------------------------------------------------------
# the BiLSTM (our own, tested against laser_encoders.models.LaserLstmEncoder)


def build_lstm(params: dict[str, Any]) -> "torch.nn.Module":
    import torch

    class LaserLstm(torch.nn.Module):
        def __init__(self, p: dict[str, Any]):
            super().__init__()
            self.padding_idx = int(p["padding_idx"])
            self.embed_tokens = torch.nn.Embedding(int(p["num_embeddings"]), int(p["embed_dim"]),
                                                   padding_idx=self.padding_idx)
            self.lstm = torch.nn.LSTM(input_size=int(p["embed_dim"]), hidden_size=int(p.get("hidden_size", 512)),
                                      num_layers=int(p.get("num_layers", 1)),
                                      bidirectional=bool(p.get("bidirectional", False)))

        def forward(self, tokens: "torch.Tensor", lengths: "torch.Tensor") -> "torch.Tensor":
            """``tokens`` B x T right-padded, rows longest first -> B x C max-pooled outputs."""
            x = self.embed_tokens(tokens).transpose(0, 1)
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths.tolist())
            out, _ = self.lstm(packed)
            out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, padding_value=0.0)
            mask = tokens.eq(self.padding_idx).t().unsqueeze(-1)
            return out.float().masked_fill(mask, float("-inf")).max(dim=0).values

    return LaserLstm(params)


def batches(token_ids: Sequence[np.ndarray], pad: int, max_tokens: int, max_sentences: int
            ) -> Iterator[tuple[np.ndarray, "torch.Tensor", "torch.Tensor"]]:
    """``(indices, B x T right-padded ids, lengths)``, longest first, bounded by tokens and sentences."""
    import torch

    lengths = np.array([len(t) for t in token_ids], dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    start = 0
    while start < len(order):
        longest = int(lengths[order[start]])
        n = max(1, min(max_sentences, max_tokens // max(1, longest), len(order) - start))
        idx = order[start:start + n]
        start += n
        batch = torch.full((n, longest), pad, dtype=torch.long)
        for row, i in enumerate(idx):
            batch[row, : lengths[i]] = torch.from_numpy(token_ids[i])
        yield idx, batch, torch.from_numpy(lengths[idx])


# ----------------------------------------------------------------------------------------------
# writing (export-encoder --format laser)


def export_laser(encoder_dir: str | Path, prefix: str | Path) -> list[Path]:
    """Write our ``laser`` encoder in LASER's format: ``<prefix>.pt``, ``.spm``, ``.cvocab``.

    Loading ``<prefix>.pt`` needs no pickled code (``torch.load(weights_only=True)``, as
    ``laser_encoders`` does by default). ``laser_encoders``' tokeniser always prepares text as
    :func:`normalize` does with its defaults, which our ``laser`` kind records and applies: with
    them the export embeds raw text as marginmine does. An encoder trained on other settings, or
    before they were recorded (raw text), is exported with a warning naming what differs.
    """
    import shutil

    import torch

    from marginmine.encoders.base import read_manifest
    from marginmine.encoders.laser_common import DEFAULTS, TEXT_KEYS, text_settings
    from marginmine.io.safe import atomic_path

    src = Path(encoder_dir)
    manifest = read_manifest(src)
    if manifest["kind"] != "laser":
        raise EncoderError(f"{src}: a {manifest['kind']!r} encoder; only our LASER-style BiLSTM (kind laser) "
                           "has LASER's format")
    settings = text_settings(manifest.get("info") or {}, src)
    if settings is None:
        log.warning("%s: exported as it is, but laser_encoders lower-cases and normalises punctuation, so "
                    "it will embed raw text differently from marginmine", src)
    elif any(settings[k] != DEFAULTS[k] for k in TEXT_KEYS):
        log.warning("%s: trained with %s; laser_encoders' SentenceEncoder prepares text with lower_case and "
                    "normalize_punct true, so it will embed raw text differently from marginmine (its "
                    "LaserTokenizer(spm_model, lower_case=..., normalize_punct=...) and "
                    "SentenceEncoder.encode_sentences prepare it as trained)", src,
                    ", ".join(f"{k}={str(settings[k]).lower()}" for k in TEXT_KEYS))
    files = manifest["files"]
    # the unpickling of our own checkpoint: its SHA-256 matched our manifest just now
    ckpt = torch.load(src / files["model"], map_location="cpu", weights_only=False)
    margs = (ckpt.get("cfg") or {}).get("model") or ckpt.get("args")

    def arg(name: str) -> Any:
        return margs[name] if isinstance(margs, dict) else getattr(margs, name)

    symbols = _fairseq_symbols(src / files["dict"])
    state = {k[len("encoder."):]: v.clone() for k, v in ckpt["model"].items() if k.startswith("encoder.")}
    params = {"num_embeddings": len(symbols), "padding_idx": SPECIALS["<pad>"],
              "embed_dim": int(arg("encoder_embed_dim")), "hidden_size": int(arg("encoder_hidden_size")),
              "num_layers": int(arg("encoder_layers")), "bidirectional": bool(arg("encoder_bidirectional")),
              "left_pad": False, "padding_value": 0.0}
    if int(state["embed_tokens.weight"].shape[0]) != len(symbols):
        raise EncoderError(f"{src}: embedding has {state['embed_tokens.weight'].shape[0]} rows, dictionary "
                           f"{len(symbols)} symbols")
    out = Path(prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = [out.with_name(out.name + ext) for ext in (".pt", ".spm", ".cvocab")]
    if any(p.resolve() == (src / f).resolve() for p in written for f in files.values()):
        raise EncoderError(f"{out}: would overwrite the encoder being exported")
    with atomic_path(written[0]) as tmp:
        torch.save({"params": params, "model": state,
                    "dictionary": {sym: i for i, sym in enumerate(symbols)}}, tmp)
    with atomic_path(written[1]) as tmp:
        shutil.copyfile(src / files["spm"], tmp)
    with atomic_path(written[2]) as tmp:
        shutil.copyfile(src / files["dict"], tmp)
    return written


def _fairseq_symbols(dict_txt: Path) -> list[str]:
    """The symbols of a fairseq dictionary file, in index order (4 specials first)."""
    symbols = list(SPECIALS)
    for n, line in enumerate(dict_txt.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.rsplit(" ", 1)
        if len(parts) != 2:
            raise EncoderError(f"{dict_txt}:{n}: not a fairseq dictionary line ('<symbol> <count>')")
        symbols.append(parts[0])
    return symbols
