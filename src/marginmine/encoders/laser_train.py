"""Training of the LASER-style encoder with fairseq's LASER task (resumable; see :mod:`.laser`)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from marginmine.defaults import SEED
from marginmine.encoders.base import EncoderError, ParallelData, write_manifest
from marginmine.encoders.laser_common import (
    BPE_SAMPLE_SEED,
    KIND,
    MODEL_KEYS,
    PREP_KEYS,
    PREP_VERSION,
    TEXT_KEYS,
    count_lines,
    iter_lines,
    laser_src_dir,
    pair_files,
    piece_table,
    resolve_params,
)
from marginmine.encoders.laser_format import normalize
from marginmine.fairseq_process import fairseq_command, parse_train_log, run_fairseq, time_budget
from marginmine.io.resume import StateFile, changed
from marginmine.io.safe import json_fingerprint, sha256_file
from marginmine.machine import dist_version

log = logging.getLogger(__name__)


# training


def _prepare(settings: dict[str, bool]) -> Callable[[str], str]:
    """Raw line -> the text sentencepiece sees (:func:`normalize`, as embedding prepares it)."""
    return partial(normalize, **{k: bool(settings[k]) for k in TEXT_KEYS})


def _bpe_sample(pairs: dict[tuple[str, str], list[tuple[Path, Path]]], n_total: int, out: Path,
                prepare: Callable[[str], str]) -> dict[str, int]:
    """Deterministic sample, balanced over languages, of all sentences (each file once), prepared."""
    by_lang: dict[str, list[Path]] = {}
    for (a, b), files in pairs.items():
        for fa, fb in files:
            for lang, f in ((a, fa), (b, fb)):
                if f not in by_lang.setdefault(lang, []):
                    by_lang[lang].append(f)
    quota = max(1, int(n_total) // len(by_lang))
    rng = np.random.default_rng(BPE_SAMPLE_SEED)
    taken: dict[str, int] = {}
    with open(out, "w", encoding="utf-8", newline="\n") as fo:
        for lang in sorted(by_lang):
            sizes = [count_lines(f) for f in by_lang[lang]]
            total = sum(sizes)
            keep = None if total <= quota else set(rng.choice(total, size=quota, replace=False).tolist())
            i = n = 0
            for f in by_lang[lang]:
                for line in iter_lines(f):
                    if keep is None or i in keep:
                        line = prepare(line)
                        if line.strip():
                            fo.write(line + "\n")
                            n += 1
                    i += 1
            taken[lang] = n
    return taken


def _learn_bpe(sample: Path, prefix: Path, p: dict[str, Any]) -> None:
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        input=str(sample), model_prefix=str(prefix), model_type="bpe", vocab_size=int(p["bpe_vocab"]),
        character_coverage=float(p["character_coverage"]), input_sentence_size=0,
        shuffle_input_sentence=False, hard_vocab_limit=False,
        num_threads=int(p["threads"]) or max(1, os.cpu_count() or 1),
        minloglevel=1)


def _encode_file(sp: Any, table: list[str], src: Sequence[Path], dst: Path, counts: np.ndarray,
                 prepare: Callable[[str], str], batch: int = 20000) -> int:
    """Every line of ``src`` prepared and BPE-encoded into ``dst`` (piece counts added to ``counts``)."""
    n = 0
    with open(dst, "w", encoding="utf-8", newline="\n") as fo:
        for path in src:
            lines = iter_lines(path)
            while True:
                buf = [prepare(line) for _, line in zip(range(batch), lines)]
                if not buf:
                    break
                encoded = sp.encode(buf)
                flat = [i for ids in encoded for i in ids]
                if flat:
                    counts += np.bincount(np.asarray(flat, dtype=np.int64), minlength=len(counts))
                fo.write("".join(" ".join(table[i] for i in ids) + "\n" for ids in encoded))
                n += len(buf)
    return n


def _write_dict(table: list[str], counts: np.ndarray, path: Path) -> int:
    """fairseq dictionary (``piece count``) of every spm piece (so nothing maps to <unk>)."""
    seen = set()
    with open(path, "w", encoding="utf-8", newline="\n") as fo:
        for i, piece in enumerate(table):
            if piece == "<unk>" or piece in seen:
                continue
            seen.add(piece)
            fo.write(f"{piece} {int(counts[i])}\n")
    return len(seen)


def parse_fairseq_log(lines: Sequence[str]) -> dict[str, Any]:
    """Training stats from fairseq's ``--log-format simple`` output (:func:`parse_train_log`), in the
    shape the encoder manifest records: ``resumed_from`` names the epoch of the loaded checkpoint,
    which also counts as the current epoch until a new epoch's stats arrive."""
    run = parse_train_log(lines)
    resumed = run["resumed_from"]
    if resumed is not None:
        resumed = {"epoch": resumed["continues_epoch"], "num_updates": resumed["num_updates"]}
    epoch = run["epoch"] if run["epoch"] is not None else (resumed or {}).get("epoch")
    return {"resumed_from": resumed, "epoch": epoch, "num_updates": run["num_updates"],
            "stopped_by_time": run["stopped_by_time"], "epoch_stats": run["train"], "wps": run["wps"]}


#: what the rerun after a time-cap error does (marginmine.timecap; encoders.base.check_time_cap)
RERUN_AFTER_CAP = ("The checkpoints are removed: the rerun trains from the start, since fairseq's resume is not "
                   "byte-identical")


def forget_training(out_dir: Path) -> None:
    """Remove the checkpoints and the training time of ``out_dir`` (BPE and binarized data stay), so that
    the next ``train`` starts over: called when a time cap stopped it (fairseq resumes inexactly)."""
    work = Path(out_dir) / "work"
    shutil.rmtree(work / "checkpoints", ignore_errors=True)
    states = StateFile(work / "state.json")
    if states.path.exists():
        states.write({**states.read(), "train_seconds": 0.0})


def train(data: Sequence[ParallelData], out_dir: Path, params: dict, *, seed: int = SEED,
          max_minutes: float | None = None, untrained: bool = False) -> Path:
    """Learn the joint BPE, binarize, train with fairseq's LASER task, export ``out_dir``.

    Rerunning on the same ``out_dir`` resumes from ``work/checkpoints/checkpoint_last.pt`` (raise
    ``max_epoch`` to train further); ``max_minutes`` bounds this call's wall-clock time (fairseq's
    ``--stop-time-hours``, which counts cumulative training time, is set accordingly).
    """
    if untrained:  # the random-init twin: fairseq cannot export an untrained model, so 1 update
        params = {**(params or {}), "max_update": 1, "max_epoch": 1}
    import sentencepiece as spm
    import torch

    t0 = time.monotonic()
    deadline = None if max_minutes is None else t0 + 60.0 * float(max_minutes)
    p = resolve_params(params)
    out = Path(out_dir)
    work = out / "work"
    for sub in ("bpe", "spm", "bin", "checkpoints"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    pairs = pair_files(data)
    langs = sorted({lang for pair in pairs for lang in pair})
    lang_ids = {lang: i for i, lang in enumerate(langs)}
    logfile = work / "train.log"
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", PYTHONUNBUFFERED="1")  # our checkpoints only
    if int(p["threads"]) > 0:
        env.update(OMP_NUM_THREADS=str(int(p["threads"])), MKL_NUM_THREADS=str(int(p["threads"])))
    states = StateFile(work / "state.json")
    state = states.read()

    # 0. what the existing work dir was made from
    data_fp = {f"{a}-{b}": [[str(fa), sha256_file(fa), str(fb), sha256_file(fb)] for fa, fb in files]
               for (a, b), files in sorted(pairs.items())}
    prep_fp = json_fingerprint({"data": data_fp, "prep": {k: p[k] for k in PREP_KEYS},
                                "version": PREP_VERSION})
    model_fp = json_fingerprint({"prep": prep_fp, "model": {k: p[k] for k in MODEL_KEYS}})
    ckpt_last = work / "checkpoints" / "checkpoint_last.pt"
    if ckpt_last.exists() and changed(state, "model_fingerprint", model_fp):
        raise EncoderError(f"{work}: holds checkpoints of a different run (other data, BPE, text "
                           "preparation or model sizes, or an older marginmine's); resuming would be wrong - "
                           "delete that directory or use another output directory")
    (out / "encoder.json").unlink(missing_ok=True)  # never leave an old manifest over new files

    # 1.+2. joint BPE, encoded text, dictionary, binarized data (skipped when already done)
    bpe_model, dict_path = work / "bpe" / "spm.model", work / "bin" / "dict.txt"
    stats = state.get("prep_stats", {})
    if changed(state, "prep_fingerprint", prep_fp) or not (work / "bin" / ".done").exists():
        (work / "bin" / ".done").unlink(missing_ok=True)
        log.info("laser: learning a joint BPE (%d pieces) on a sample of %s", p["bpe_vocab"], ", ".join(langs))
        sample = work / "bpe" / "sample.txt"
        prepare = _prepare(p)
        taken = _bpe_sample(pairs, int(p["bpe_sample"]), sample, prepare)
        _learn_bpe(sample, work / "bpe" / "spm", p)
        sp = spm.SentencePieceProcessor(model_file=str(bpe_model))
        table = piece_table(sp)
        counts = np.zeros(sp.get_piece_size(), dtype=np.int64)
        n_pairs: dict[str, int] = {}
        for (a, b), files in sorted(pairs.items()):
            d = work / "spm" / f"{a}-{b}"
            d.mkdir(parents=True, exist_ok=True)
            na = _encode_file(sp, table, [fa for fa, _ in files], d / f"train.{a}", counts, prepare)
            nb = _encode_file(sp, table, [fb for _, fb in files], d / f"train.{b}", counts, prepare)
            if na != nb:
                raise EncoderError(f"laser: {a}-{b} files are not line-aligned ({na} vs {nb} lines): "
                                   + ", ".join(f"{fa} / {fb}" for fa, fb in files))
            n_pairs[f"{a}-{b}"] = na
        n_dict = _write_dict(table, counts, dict_path)
        log.info("laser: binarizing %d language pairs (dictionary: %d pieces)", len(pairs), n_dict)
        for (a, b) in sorted(pairs):
            fwd = work / "bin" / f"{a}-{b}"
            shutil.rmtree(fwd, ignore_errors=True)
            run_fairseq([*fairseq_command("preprocess"), "--source-lang", a, "--target-lang", b,
                         "--trainpref", str(work / "spm" / f"{a}-{b}" / "train"), "--destdir", str(fwd),
                         "--srcdict", str(dict_path), "--tgtdict", str(dict_path), "--dataset-impl", "cached",
                         "--workers", str(int(p["threads"]) or max(1, min(4, os.cpu_count() or 1)))],
                        env, logfile, "fairseq-preprocess", error=EncoderError, prefix="laser: ")
            # the reverse direction reads the same binarized files (its own directory: the task
            # names datasets by directory)
            rev = work / "bin" / f"{b}-{a}"
            shutil.rmtree(rev, ignore_errors=True)
            rev.mkdir()
            for lang in (a, b):
                for ext in ("bin", "idx"):
                    (rev / f"train.{b}-{a}.{lang}.{ext}").symlink_to(f"../{a}-{b}/train.{a}-{b}.{lang}.{ext}")
        stats = {"bpe_sample": taken, "pairs": n_pairs, "dict_size": n_dict}
        state = {"prep_fingerprint": prep_fp, "prep_stats": stats, "train_seconds": 0.0}
        states.write(state)
        (work / "bin" / ".done").write_text("ok\n")

    # 3. the LASER task's config and fairseq-train
    directions = [(a, b) for pair in sorted(pairs) for a, b in (pair, pair[::-1])]
    config = {
        "src_vocab": str(dict_path.resolve()), "tgt_vocab": str(dict_path.resolve()),
        "train": [{"type": "translation", "id": lang_ids[t],
                   "src": str((work / "bin" / f"{s}-{t}" / f"train.{s}-{t}.{s}").resolve()),
                   "tgt": str((work / "bin" / f"{s}-{t}" / f"train.{s}-{t}.{t}").resolve())}
                  for s, t in directions],
        "valid": [{"type": "translation", "id": 0, "src": "/unused", "tgt": "/unused"}],
    }
    (work / "laser.json").write_text(json.dumps(config, indent=1))
    cpu = not torch.cuda.is_available()
    max_pos = min(int(p["max_len"]), int(p["max_tokens"]))
    cmd = [*fairseq_command("train"), str((work / "laser.json").resolve()),
           "--user-dir", str(laser_src_dir()), "--task", "laser", "--arch", "laser_lstm",
           "--save-dir", str((work / "checkpoints").resolve()), "--seed", str(int(seed)),
           "--optimizer", "adam", "--lr", str(p["lr"]), "--lr-scheduler", "fixed",
           "--clip-norm", str(p["clip_norm"]), "--dropout", str(p["dropout"]),
           "--max-tokens", str(int(p["max_tokens"])), "--max-epoch", str(int(p["max_epoch"])),
           "--update-freq", str(int(p["update_freq"])),
           "--max-source-positions", str(max_pos), "--max-target-positions", str(max_pos),
           "--encoder-bidirectional", "--encoder-layers", str(int(p["encoder_layers"])),
           "--encoder-hidden-size", str(int(p["encoder_hidden"])), "--encoder-embed-dim", str(int(p["embed_dim"])),
           "--decoder-layers", "1", "--decoder-hidden-size", str(int(p["decoder_hidden"])),
           "--decoder-embed-dim", str(int(p["embed_dim"])), "--decoder-out-embed-dim", str(int(p["embed_dim"])),
           "--decoder-lang-embed-dim", str(int(p["lang_embed_dim"])),
           "--disable-validation", "--no-epoch-checkpoints", "--num-workers", "0",
           "--log-format", "simple", "--log-interval", str(int(p["log_interval"])), "--no-progress-bar"]
    if int(p["save_interval_updates"]) > 0:
        cmd += ["--save-interval-updates", str(int(p["save_interval_updates"])), "--keep-interval-updates", "1"]
    if int(p["max_update"]) > 0:
        cmd += ["--max-update", str(int(p["max_update"]))]
    if cpu:
        cmd += ["--cpu"]
    budget, timeout_s = time_budget(deadline, ckpt_last.exists(), state.get("train_seconds", 0.0), max_minutes,
                                    "laser", EncoderError)
    cmd += budget
    state["model_fingerprint"] = model_fp
    states.write(state)
    t_train = time.monotonic()
    lines, killed = run_fairseq(cmd, env, logfile, "fairseq-train", timeout_s, error=EncoderError, prefix="laser: ")
    state["train_seconds"] = float(state.get("train_seconds", 0.0)) + time.monotonic() - t_train
    states.write(state)
    if not ckpt_last.exists():
        raise EncoderError(f"laser: fairseq-train wrote no checkpoint_last.pt in {work / 'checkpoints'}; "
                           f"see {logfile}")
    run = parse_fairseq_log(lines)
    run["stopped_by_time"] |= killed

    # 4. export (manifest last)
    for name, src in (("model.pt", ckpt_last), ("spm.model", bpe_model), ("dict.txt", dict_path)):
        shutil.copyfile(src, out / (name + ".part"))
        (out / (name + ".part")).replace(out / name)
    dim = 2 * int(p["encoder_hidden"])
    cfg = {"arch": "laser_lstm", "dim": dim, "langs": langs, "lang_ids": lang_ids,
           "directions": [f"{s}-{t}" for s, t in directions],
           "params": p, "encode_max_len": int(p["encode_max_len"])}
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")

    last = run["epoch_stats"][-1] if run["epoch_stats"] else {}
    info = {"params": p, "settings": {k: p[k] for k in TEXT_KEYS},  # how it prepares text (laser.load)
            "seed": int(seed), "max_minutes": max_minutes,
            "directions": cfg["directions"], "lang_ids": lang_ids, **stats,
            "epoch": run["epoch"], "num_updates": run["num_updates"],
            "epoch_complete": not run["stopped_by_time"], "stopped_by_time": run["stopped_by_time"],
            "resumed_from": run["resumed_from"], "last_epoch_stats": last,
            "train_wps": last.get("wps"), "train_seconds_total": round(state["train_seconds"], 1),
            "minutes": round(state["train_seconds"] / 60.0, 3),      # as the dual encoder reports it
            "wall_seconds_this_call": round(time.monotonic() - t0, 1),
            "fairseq": dist_version("fairseq-fixed", "fairseq"), "torch": torch.__version__}
    write_manifest(out, kind=KIND, dim=dim, langs=langs,
                   files={"model": "model.pt", "spm": "spm.model", "dict": "dict.txt", "config": "config.json"},
                   info=info)
    log.info("laser: exported %s (epoch %s, %s updates, %s wps)", out, run["epoch"], run["num_updates"],
             info["train_wps"])
    return out
