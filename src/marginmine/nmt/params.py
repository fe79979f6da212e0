"""NMT parameters and their defaults, the model directory's manifest and fingerprints, the device,
and the environment fairseq runs in (shared by training and decoding)."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from marginmine.errors import MarginmineError
from marginmine.io.safe import write_text


class NmtError(MarginmineError):
    """NMT training or decoding cannot go on; the message says why and what to do."""


MODEL_SIZE_KEYS = ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads",
                   "decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_attention_heads")

DEFAULTS: dict[str, Any] = {
    "arch": "transformer", **{k: None for k in MODEL_SIZE_KEYS},
    "share_all_embeddings": True, "max_positions": 1024, "normalize_before": False,
    "dropout": 0.3, "attention_dropout": 0.0, "activation_dropout": 0.0, "label_smoothing": 0.1,
    "lr": 0.0005, "warmup_updates": 4000, "warmup_init_lr": 1e-07, "weight_decay": 0.0, "clip_norm": 0.0,
    "max_tokens": 4096, "update_freq": 1, "max_epoch": 20, "max_update": 0, "patience": 0,
    "average_last": 5, "bpe_vocab": 8000, "bpe_sample": 2_000_000, "character_coverage": 0.9999,
    "save_interval_updates": 0, "log_interval": 100, "device": "auto", "fp16": False, "threads": 0,
    "extra_args": [], "resume_killed": False,
}

PREP_KEYS = ("bpe_vocab", "bpe_sample", "character_coverage")
MODEL_KEYS = ("arch", *MODEL_SIZE_KEYS, "share_all_embeddings", "max_positions", "normalize_before")
# changing them does not make a finished run unfinished
NOT_RESULT_KEYS = ("threads", "log_interval", "resume_killed")
_LANG_RE = re.compile(r"^[A-Za-z0-9_]{1,16}$")
SPM_SEED = 12345  # fixed: the vocabulary must not change with the training seed
MANIFEST = "nmt.json"
MODEL_FILE = "checkpoint_avg.pt"


# ----------------------------------------------------------------------------------------------
# parameters, files, fingerprints


def resolve_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """``params`` over :data:`DEFAULTS`; unknown keys are an error (a typo must not train for days)."""
    p = dict(params or {})
    if "bpe_merges" in p:
        p.setdefault("bpe_vocab", p["bpe_merges"])
        del p["bpe_merges"]
    unknown = sorted(set(p) - set(DEFAULTS))
    if unknown:
        raise NmtError(f"unknown NMT params {unknown} (known: {', '.join(sorted(DEFAULTS))})")
    out = dict(DEFAULTS)
    out.update(p)
    _check_types(out)
    for k in ("bpe_vocab", "max_tokens", "update_freq", "max_positions", "average_last", "log_interval"):
        if int(out[k]) < 1:
            raise NmtError(f"NMT param {k} must be >= 1 (got {out[k]!r})")
    for k in ("max_epoch", "max_update", "patience", "bpe_sample", "save_interval_updates", "threads",
              "warmup_updates"):
        if int(out[k]) < 0:
            raise NmtError(f"NMT param {k} must be >= 0 (got {out[k]!r})")
    for k in MODEL_SIZE_KEYS:
        if out[k] is not None and int(out[k]) < 1:
            raise NmtError(f"NMT param {k} must be >= 1 (got {out[k]!r})")
    if not int(out["max_epoch"]) and not int(out["max_update"]):
        raise NmtError("NMT params: set max_epoch or max_update (> 0); otherwise training never ends")
    if out["device"] not in ("auto", "cpu", "cuda") and not str(out["device"]).startswith("cuda:"):
        raise NmtError(f"NMT param device must be auto, cpu or cuda (got {out['device']!r})")
    for k in ("share_all_embeddings", "normalize_before", "fp16"):
        if not isinstance(out[k], bool):
            raise NmtError(f"NMT param {k} must be true or false (got {out[k]!r})")
    if not isinstance(out["extra_args"], list) or not all(isinstance(a, str) for a in out["extra_args"]):
        raise NmtError("NMT param extra_args must be a list of strings (fairseq-train arguments)")
    return out


#: params that are shares in [0, 1) (sentencepiece's character_coverage, in (0, 1], is checked on its own)
SHARES = ("dropout", "attention_dropout", "activation_dropout", "label_smoothing")


def _check_types(p: Mapping[str, Any]) -> None:
    """Every param of the type of its default (a whole number, a number, text), before anything runs:
    a wrong one must not surface as fairseq's usage text after the BPE and binarizing are done."""
    for k, v in p.items():
        want = 1 if k in MODEL_SIZE_KEYS and v is not None else DEFAULTS[k]
        if isinstance(want, bool) or want is None or isinstance(want, list):
            continue  # true/false, the sizes left to the architecture and extra_args: checked below
        if isinstance(want, int) and (isinstance(v, bool) or not isinstance(v, int)):
            raise NmtError(f"NMT param {k} must be a whole number (got {v!r})")
        if isinstance(want, float) and (isinstance(v, bool) or not isinstance(v, (int, float))
                                        or not math.isfinite(v) or v < 0):
            raise NmtError(f"NMT param {k} must be a number >= 0 (got {v!r})")
        if isinstance(want, str) and not isinstance(v, str):
            raise NmtError(f"NMT param {k} must be text (got {v!r})")
    for k in SHARES:
        if not 0 <= p[k] < 1:
            raise NmtError(f"NMT param {k} must be in [0, 1) (got {p[k]!r})")
    if not 0 < p["character_coverage"] <= 1:
        raise NmtError(f"NMT param character_coverage must be in (0, 1] (got {p['character_coverage']!r})")
    if not p["lr"] > 0:
        raise NmtError(f"NMT param lr must be > 0 (got {p['lr']!r})")


def resolve_device(device: str, gpu_visible: Callable[[], bool] | None = None) -> str:
    """``cpu`` or ``cuda``; asking for cuda without a visible GPU fails at once (never a silent CPU run).
    ``gpu_visible``: how to look for a GPU (default: torch's; CTranslate2 decoding passes its own,
    so that a decoding job does not import torch, ~2-4 s on 2 cores); ``cpu`` looks for none."""
    if device == "cpu":
        return "cpu"
    if gpu_visible is None:
        import torch

        gpu_visible = torch.cuda.is_available
    if device == "auto":
        return "cuda" if gpu_visible() else "cpu"
    if device.startswith("cuda"):
        if not gpu_visible():
            raise NmtError(f"device {device!r} requested but no CUDA GPU is visible "
                           "(check CUDA_VISIBLE_DEVICES / the job's GPU allocation, or use device cpu)")
        return "cuda"
    return "cpu"


def check_lang(lang: str) -> str:
    if not _LANG_RE.match(lang):
        raise NmtError(f"unsupported language code {lang!r} (letters, digits, '_', at most 16)")
    return lang


def one_line(text: str) -> str:
    """Whitespace (tabs, U+2028, ...) collapsed to single spaces: a sentence stays one line everywhere."""
    return " ".join(text.split())


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------------------------
# running fairseq


def fairseq_env(threads: int = 0, own_checkpoints: bool = True) -> dict[str, str]:
    """Environment for fairseq subprocesses; ``threads`` > 0 pins OpenMP/MKL.

    ``own_checkpoints``: the process loads checkpoints our own training wrote (fairseq pickles
    omegaconf configs, which torch >= 2.6 refuses under ``weights_only``), so unpickling is allowed
    for it, and only for it."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    if own_checkpoints:
        env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    if int(threads) > 0:
        env.update(OMP_NUM_THREADS=str(int(threads)), MKL_NUM_THREADS=str(int(threads)))
    return env
