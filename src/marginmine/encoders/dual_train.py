"""Training of the dual encoder (resumable, deterministic; see :mod:`.dual` for the contract)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from marginmine.defaults import SEED
from marginmine.encoders.base import EncoderError, ParallelData, write_manifest
from marginmine.encoders.dual_model import (
    ARCHS,
    CHECKPOINT,
    CKPT_FORMAT,
    DEFAULTS,
    KIND,
    LR_SCHEDULES,
    MODEL_KEYS,
    RESUMABLE,
    build_model,
    decays,
    epoch_batches,
    gather,
    hard_negative_loss,
    in_batch_loss,
    load_spm,
    lr_at,
    n_batches,
    row_starts,
    tokenize,
    train_spm,
)
from marginmine.encoders.dual_optim import check_optimizer, make_optimizers
from marginmine.io.safe import write_bytes, write_text
from marginmine.io.text import read_parallel

log = logging.getLogger(__name__)


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
    if decays(cfg) and cfg["max_steps"] is None:
        raise EncoderError(f"lr_schedule {cfg['lr_schedule']!r} decays to 0 at max_steps: set max_steps")
    if int(cfg["warmup_steps"]) < 0:
        raise EncoderError("dual-encoder warmup_steps must be >= 0")
    # (max_steps 0 writes the untrained, random-init encoder: no update, no schedule)
    if decays(cfg) and 0 < int(cfg["max_steps"]) <= int(cfg["warmup_steps"]):
        raise EncoderError(f"dual-encoder warmup_steps ({cfg['warmup_steps']}) must be below max_steps "
                           f"({cfg['max_steps']}) under lr_schedule {cfg['lr_schedule']!r}")
    if cfg["sort_window"] is None:
        cfg["sort_window"] = 1 if cfg["arch"] == "dan" else 100
    if int(cfg["batch_size"]) < 2:
        raise EncoderError("dual-encoder batch_size must be >= 2 (in-batch negatives)")
    from marginmine.encoders.hard_negatives import resolve_spec

    cfg["hard_negatives"] = resolve_spec(cfg["hard_negatives"])
    check_optimizer(cfg["optimizer"])
    if float(cfg["margin"]) < 0:
        raise EncoderError(f"dual-encoder margin must be >= 0 (additive margin; 0 = none), got {cfg['margin']!r}")
    if cfg["directions"] not in (1, 2):
        raise EncoderError(f"dual-encoder directions must be 1 (x->y, no side swap) or 2, got {cfg['directions']!r}")
    return cfg


class _Corpus:
    """All training sentences as one id table plus the index pairs of each translation pair."""

    def __init__(self, flat: np.ndarray, lengths: np.ndarray, left: np.ndarray, right: np.ndarray):
        self.flat, self.lengths, self.starts = flat, lengths, row_starts(lengths)
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
    if not isinstance(ckpt, dict) or ckpt.get("format") != CKPT_FORMAT:
        raise EncoderError(f"{path}: not a marginmine dual-encoder checkpoint; "
                           "delete it to train from scratch")
    # a decaying schedule ends at max_steps, so there it defines the run; params added since the
    # checkpoint was written take their defaults
    resumable = RESUMABLE - {"max_steps"} if decays(cfg) else RESUMABLE
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
          max_minutes: float | None = None, untrained: bool = False) -> Path:
    """Train (or resume training) a dual encoder on ``data``; returns the encoder directory.

    Stops after ``params["epochs"]`` epochs, ``params["max_steps"]`` steps or ``max_minutes`` of wall
    clock (checked between steps), whichever comes first; every stop writes a loadable encoder.
    """
    if untrained:  # the random-init twin: same subwords and network, 0 steps (what training buys)
        params = {**(params or {}), "max_steps": 0}
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
        log.info("sentencepiece: %d pieces from %d sentences in %.1f s", load_spm(spm_path).get_piece_size(),
                 len(sample), time.monotonic() - t)
    elif not spm_path.exists() or _sha256_bytes(spm_path.read_bytes()) != ckpt["spm_sha256"]:
        raise EncoderError(f"{spm_path}: missing or not the one {ckpt_path} was trained with; "
                           "delete the output directory to start over")
    sp = load_spm(spm_path)
    spm_sha = _sha256_bytes(spm_path.read_bytes())
    corpus = _build_corpus(sp, sides, int(cfg["max_len"]))
    fingerprint = corpus.fingerprint()
    if ckpt is not None and ckpt["data_fingerprint"] != fingerprint:
        raise EncoderError(f"{ckpt_path}: training data differ from the checkpoint's; "
                           "use another output directory or delete it to start over")
    negatives = None
    if cfg["hard_negatives"] and cfg["max_steps"] != 0:  # (a random-init twin takes no step)
        from marginmine.encoders import hard_negatives

        texts = [t for pair in sides for side in pair for t in side]
        langs = [lang for item, (src, _) in zip(data, sides) for lang in [item.src_lang] * len(src)
                 + [item.tgt_lang] * len(src)]
        negatives = hard_negatives.prepare(out, cfg["hard_negatives"], texts, langs, corpus.left, corpus.right,
                                           fingerprint, seed)
        del texts, langs
    del sides
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
        if hasattr(model, "set_pieces"):  # bide: the pieces' character n-grams (saved with the weights)
            model.set_pieces([sp.id_to_piece(i) for i in range(model_cfg["vocab_size"])])
        opts = make_optimizers(model, float(cfg["lr"]), str(cfg["optimizer"]))
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
                                                       spm_sha, pos), negatives)
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
    _torch_save_atomic({"format": CKPT_FORMAT, "version": 1, "config": dict(cfg), "seed": seed,
                        "data_fingerprint": fingerprint, "spm_sha256": spm_sha,
                        "model": model.state_dict(), "optimizers": [o.state_dict() for o in opts],
                        "rng": torch.get_rng_state(), **pos}, path)


def _train_loop(model: nn.Module, opts: list[torch.optim.Optimizer], corpus: _Corpus, cfg: dict[str, Any],
                seed: int, pos: dict[str, Any], t_start: float, max_minutes: float | None,
                checkpoint: Any, negatives: Any = None) -> str:
    """Run steps from ``pos`` (updated in place) until a stop condition; returns its name. With
    ``negatives``, the pairs of the ``share`` (a seeded, fixed subset) bring their ``count`` negatives
    of the target side's language as extra target columns."""
    model.train()
    n_pairs, bs = len(corpus.left), int(cfg["batch_size"])
    if n_batches(n_pairs, bs) == 0:
        return "no_data"
    pair_len = np.maximum(corpus.lengths[corpus.left], corpus.lengths[corpus.right])
    scale, margin, directions = float(cfg["scale"]), float(cfg["margin"]), int(cfg["directions"])
    max_steps = cfg["max_steps"]
    lr, schedule, warmup = float(cfg["lr"]), str(cfg["lr_schedule"]), int(cfg["warmup_steps"])
    last_step = int(cfg["epochs"]) * n_batches(n_pairs, bs)
    if decays(cfg) and last_step < int(max_steps):
        log.warning("%d epochs end training after %d steps, before max_steps %d: the %s lr schedule will "
                    "not decay to 0 (raise epochs)", int(cfg["epochs"]), last_step, int(max_steps), schedule)
    budget = None if max_minutes is None else 60.0 * max_minutes
    if negatives is not None:
        from marginmine.encoders.hard_negatives import share_mask

        with_neg = share_mask(n_pairs, float(cfg["hard_negatives"]["share"]), seed)
        unmined = int((negatives.for_right[with_neg] < 0).sum() + (negatives.for_left[with_neg] < 0).sum())
        if unmined:
            raise EncoderError(f"{unmined} negatives of the pairs that train with them are -1 (never mined) in "
                               "negatives.npz: delete it to mine again")
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
            sw = swap[sel] if directions == 2 else np.zeros(len(sel), bool)  # forward only: no swap
            a = np.where(sw, corpus.right[sel], corpus.left[sel])
            b = np.where(sw, corpus.left[sel], corpus.right[sel])
            extra = np.zeros(0, np.int64)
            if negatives is not None:  # the target side's negatives (the source side's when swapped)
                chosen = with_neg[sel]
                extra = np.where(sw[chosen, None], negatives.for_left[sel[chosen]],
                                 negatives.for_right[sel[chosen]]).reshape(-1)
            flat, lengths = gather(corpus.flat, corpus.starts, corpus.lengths, np.concatenate([a, b, extra]))
            emb = model(*model.inputs(flat, lengths))
            k = len(sel)
            if negatives is None:
                loss = in_batch_loss(emb[:k], emb[k:2 * k], scale, margin, directions)
            else:
                loss = hard_negative_loss(emb[:k], emb[k:2 * k], emb[2 * k:], scale, margin, directions)
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


