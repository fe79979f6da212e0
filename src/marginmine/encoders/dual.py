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
* ``bilstm`` - one bidirectional LSTM layer, max pooling (LASER-style pooling);
* ``bide`` - the BiDE+AM paper's network (:mod:`.bide_model`): transformer over piece + hashed
  character 3-6-gram embeddings, max + mean + first-token + attention pooling.

``directions: 1`` trains the forward ranking only, without side swaps (the paper's DE; BiDE with
``margin: 0``); ``optimizer: sgd`` is the paper's optimiser (default Adam).

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

import json
import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from marginmine.encoders.base import EncoderError, l2_normalize
from marginmine.encoders.dual_model import KIND, build_model, gather, length_batches, load_spm, row_starts, tokenize
from marginmine.encoders.dual_train import train

log = logging.getLogger(__name__)


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
        starts = row_starts(lengths)
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
    return DualEncoder(model, load_spm(d / files["spm"]), config, device)




__all__ = ["DualEncoder", "load", "train"]  # the kind: load (here) and train (dual_train)
