"""NMT on the selected pairs (issue #5): joint sentencepiece BPE, the binarized data (fairseq-preprocess's
bytes), a fairseq transformer, and the average of the last epoch checkpoints.

``train_nmt(train_tsv, dev_src, dev_ref, workdir, ...)`` lays out::

    workdir/data/      train.<src>, train.<tgt>, valid.<src>, valid.<tgt>   (raw text, one line each)
    workdir/spm/       spm.model, spm.vocab (joint BPE) and the encoded text (pieces)
    workdir/bin/       what fairseq-preprocess --joined-dictionary writes (by :mod:`.binarize`): dict.<src>.txt, ...
    workdir/checkpoints/  checkpoint_last.pt (rerunning resumes from it), checkpoint<E>.pt (the last
                          ``average_last`` epochs), checkpoint_best.pt
    workdir/checkpoint_avg.pt   the average of the last ``average_last`` epoch checkpoints (the model);
                          when a budget (``max_minutes``, ``max_update``) stopped training inside an
                          epoch, checkpoint_last.pt counts as the newest of them
    workdir/nmt.json   manifest: languages, params, SHA-256 of every file decoding needs, training info
    workdir/train.log  fairseq's full output; state.json what is done

Decoding (``marginmine.nmt.evaluate.translate``) needs only the workdir; it verifies the manifest's
hashes before fairseq unpickles the checkpoint.

Parameters (``params``; a model-size key left out takes the value of ``arch`` in fairseq):

    arch transformer            any fairseq translation arch, e.g. transformer_vaswani_wmt_en_de_big
    encoder_layers, encoder_embed_dim, encoder_ffn_embed_dim, encoder_attention_heads,
    decoder_layers, decoder_embed_dim, decoder_ffn_embed_dim, decoder_attention_heads
    share_all_embeddings true   max_positions 1024
    normalize_before false      pre-norm encoder and decoder layers: trains stably at the high learning
                                rates a few-minute CPU run needs (the paper's big transformer is post-norm)
    dropout 0.3   attention_dropout 0.0   activation_dropout 0.0   label_smoothing 0.1
    lr 0.0005   warmup_updates 4000   warmup_init_lr 1e-07   weight_decay 0.0   clip_norm 0.0
                (Adam, betas (0.9, 0.98), inverse_sqrt schedule)
    max_tokens 4096   update_freq 1   max_epoch 20   max_update 0 (none)
    patience 0        stop when the dev loss has not improved for this many validations (0: off;
                      fairseq forgets the count when a run is resumed)
    average_last 5    epoch checkpoints averaged into checkpoint_avg.pt (paper: 10; 1 for short runs,
                      where averaging with much weaker early epochs hurts)
    bpe_vocab 8000    joint BPE size (``bpe_merges`` is accepted as alias); lowered automatically, and
                      logged, when the data is too small for it
    bpe_sample 2000000  sentences (both sides together) sentencepiece learns from; 0 = all
    character_coverage 0.9999
    save_interval_updates 0  also save (and validate) every N updates, for resuming long epochs
    log_interval 100  device auto (cuda if visible, else cpu; "cuda" without a GPU fails)
    fp16 false   threads 0 (inherit)   extra_args []  verbatim fairseq-train arguments
    resume_killed false  after a kill (fairseq-train did not return) the rerun trains again from the
                      start: fairseq's resume from checkpoint_last.pt is not byte-identical to an
                      uninterrupted run (tests/test_kill.py measured other hypotheses and BLEU), so the
                      default keeps results reproducible; true resumes instead (days of GPU training).
                      A run stopped by ``max_minutes`` always resumes.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from marginmine.fairseq_process import fairseq_command, parse_train_log, run_fairseq, time_budget
from marginmine.io.resume import StateFile, changed
from marginmine.io.safe import json_fingerprint, sha256_file
from marginmine.machine import dist_version, machine
from marginmine.nmt.checkpoints import EPOCH_CKPT_RE, average_checkpoints, averaging_window
from marginmine.nmt.data import prepare_data
from marginmine.nmt.params import (
    MANIFEST,
    MODEL_FILE,
    MODEL_KEYS,
    MODEL_SIZE_KEYS,
    NOT_RESULT_KEYS,
    PREP_KEYS,
    NmtError,
    check_lang,
    fairseq_env,
    resolve_device,
    resolve_params,
    write_json,
)

log = logging.getLogger(__name__)


# training


def _typical_wps(run: Mapping[str, Any]) -> float | None:
    """Median of fairseq's per-interval words/s (target tokens/s); an epoch a budget cut after a few
    updates must not stand for the whole run."""
    values = sorted(run["wps"] or [s["wps"] for s in run["train"] if "wps" in s])
    return values[len(values) // 2] if values else None


def _train_cmd(work: Path, src: str, tgt: str, p: Mapping[str, Any], device: str, seed: int) -> list[str]:
    cmd = [*fairseq_command("train"), str((work / "bin").resolve()),
           "--task", "translation", "--source-lang", src, "--target-lang", tgt, "--arch", str(p["arch"]),
           "--save-dir", str((work / "checkpoints").resolve()), "--seed", str(int(seed)),
           "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", str(p["clip_norm"]),
           "--lr", str(p["lr"]), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(int(p["warmup_updates"])),
           "--warmup-init-lr", str(p["warmup_init_lr"]), "--weight-decay", str(p["weight_decay"]),
           "--dropout", str(p["dropout"]), "--attention-dropout", str(p["attention_dropout"]),
           "--activation-dropout", str(p["activation_dropout"]),
           "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", str(p["label_smoothing"]),
           "--max-tokens", str(int(p["max_tokens"])), "--update-freq", str(int(p["update_freq"])),
           "--max-source-positions", str(int(p["max_positions"])),
           "--max-target-positions", str(int(p["max_positions"])),
           "--keep-last-epochs", str(int(p["average_last"])), "--skip-invalid-size-inputs-valid-test",
           "--num-workers", "0", "--log-format", "simple", "--log-interval", str(int(p["log_interval"])),
           "--no-progress-bar"]
    for k in MODEL_SIZE_KEYS:
        if p[k] is not None:
            cmd += ["--" + k.replace("_", "-"), str(int(p[k]))]
    if p["share_all_embeddings"]:
        cmd += ["--share-all-embeddings"]
    if p["normalize_before"]:
        cmd += ["--encoder-normalize-before", "--decoder-normalize-before"]
    if int(p["max_epoch"]):
        cmd += ["--max-epoch", str(int(p["max_epoch"]))]
    if int(p["max_update"]):
        cmd += ["--max-update", str(int(p["max_update"]))]
    if int(p["patience"]):
        cmd += ["--patience", str(int(p["patience"]))]
    if int(p["save_interval_updates"]):
        cmd += ["--save-interval-updates", str(int(p["save_interval_updates"])), "--keep-interval-updates", "1"]
    if device == "cpu":
        cmd += ["--cpu"]
    if p["fp16"]:
        cmd += ["--fp16"]
    return cmd + list(p["extra_args"])


def load_manifest(workdir: str | Path, verify: bool = True) -> dict[str, Any]:
    """``workdir/nmt.json``; with ``verify`` every listed file's SHA-256 is checked (before anything
    unpickles the checkpoint)."""
    work = Path(workdir)
    path = work / MANIFEST
    if not path.exists():
        raise NmtError(f"{work}: no {MANIFEST}; `marginmine train-nmt` has not finished in this directory "
                       "(run or rerun it: it resumes)")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if verify:
        for key, name in manifest["files"].items():
            f = work / name
            if not f.exists():
                raise NmtError(f"{f}: missing ({key} of the model in {work}); rerun train-nmt")
            if sha256_file(f) != manifest["sha256"][name]:
                raise NmtError(f"{f}: SHA-256 differs from {path} (changed after training); refusing to load it "
                               "- rerun train-nmt")
    return manifest


#: what the rerun after a time-cap error does (by the NMT param resume_killed)
RERUN_AFTER_CAP = {False: "The checkpoints are removed: the rerun trains from the start, since fairseq's resume "
                          "is not byte-identical (NMT param resume_killed: true resumes instead)",
                   True: "The rerun resumes from checkpoint_last.pt (resume_killed: true; fairseq's resume is "
                         "not byte-identical to an uninterrupted run)"}


def train_nmt(train_tsv: str | Path, dev_src: str | Path, dev_ref: str | Path, workdir: str | Path,
              src_lang: str, tgt_lang: str, params: Mapping[str, Any] | None = None, threads: int = 0,
              max_minutes: float | None = None, seed: int = 1, on_time_cap: str | None = None) -> Path:
    """Train a fairseq transformer on the first two columns of ``train_tsv``; return the averaged model.

    ``max_minutes`` that ends training before ``max_update`` / ``max_epoch`` / early stopping is an
    error by default (``on_time_cap``; :mod:`marginmine.timecap`): no manifest is written and a rerun
    resumes; with ``on_time_cap="warn"`` the model is kept and the warning written into its manifest.

    Rerunning on the same ``workdir``: a finished run with the same data and params does nothing; an
    interrupted one (killed, or stopped by ``max_minutes``) resumes from
    ``checkpoints/checkpoint_last.pt``; raising ``max_epoch``/``max_update`` trains further; the BPE and
    binarized data are reused while data and BPE params are unchanged. Other data/BPE/model sizes on
    top of existing checkpoints are refused.
    """
    import torch

    from marginmine import timecap

    t0 = time.monotonic()
    deadline = None if max_minutes is None else t0 + 60.0 * float(max_minutes)
    on_time_cap = timecap.check_policy(on_time_cap, "on_time_cap")
    p = resolve_params(params)
    src, tgt = check_lang(src_lang), check_lang(tgt_lang)
    if src == tgt:
        raise NmtError(f"source and target language are both {src!r}")
    device = resolve_device(str(p["device"]))
    if p["fp16"] and device == "cpu":
        raise NmtError("NMT param fp16 needs a CUDA GPU; none is used here (device cpu)")
    threads = int(threads or p["threads"] or 0)
    train_tsv, dev_src, dev_ref = Path(train_tsv), Path(dev_src), Path(dev_ref)
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    (work / "checkpoints").mkdir(exist_ok=True)
    logfile = work / "train.log"
    env = fairseq_env(threads)
    states = StateFile(work / "state.json")
    state = states.read()

    data_fp = {"train": sha256_file(train_tsv), "dev_src": sha256_file(dev_src), "dev_ref": sha256_file(dev_ref),
               "langs": [src, tgt]}
    prep_fp = json_fingerprint({"data": data_fp, "prep": {k: p[k] for k in PREP_KEYS}, "version": 1})
    model_fp = json_fingerprint({"prep": prep_fp, "model": {k: p[k] for k in MODEL_KEYS}})
    train_fp = json_fingerprint({"model": model_fp, "seed": int(seed),
                             "params": {k: v for k, v in p.items() if k not in NOT_RESULT_KEYS}})
    out = work / MODEL_FILE
    if not changed(state, "train_fingerprint", train_fp) and state.get("train_done") and out.exists():
        try:
            load_manifest(work, verify=True)
        except NmtError as exc:
            log.warning("nmt: finished run found but %s; averaging again", exc)
        else:
            log.info("nmt: %s already trained with these data and params (%s); nothing to do", work, out)
            return out
    ckpt_last = work / "checkpoints" / "checkpoint_last.pt"
    if state.get("fairseq_running") and not p["resume_killed"]:
        # the last fairseq-train never returned (killed): resuming would not give the same model
        log.warning("nmt: the training in %s was killed; training again from the start, since fairseq's "
                    "resume is not byte-identical (set NMT param resume_killed: true to resume instead)", work)
        shutil.rmtree(work / "checkpoints", ignore_errors=True)
        (work / "checkpoints").mkdir()
        state.update(fairseq_running=False, train_seconds=0.0)
        states.write(state)
    if ckpt_last.exists() and changed(state, "model_fingerprint", model_fp):
        raise NmtError(f"{work}: holds checkpoints of a different run (other data, BPE, languages or model "
                       "sizes); resuming would mix them - delete that directory or use another workdir")
    (work / MANIFEST).unlink(missing_ok=True)  # never leave an old manifest over new files

    # 1. raw text, joint BPE, binarized data (skipped when already done)
    if changed(state, "prep_fingerprint", prep_fp) or not (work / "bin" / ".done").exists():
        (work / "bin" / ".done").unlink(missing_ok=True)
        stats = prepare_data(work, train_tsv, dev_src, dev_ref, src, tgt, p, threads)
        state = {"prep_fingerprint": prep_fp, "prep_stats": stats,
                 "train_seconds": float(state.get("train_seconds", 0.0)) if ckpt_last.exists() else 0.0}
        states.write(state)
        (work / "bin" / ".done").write_text("ok\n")
    else:
        log.info("nmt: reusing the BPE model and binarized data in %s", work)
    stats = state["prep_stats"]

    # 2. fairseq-train (resumes from checkpoint_last.pt)
    cmd = _train_cmd(work, src, tgt, p, device, seed)
    budget, timeout_s = time_budget(deadline, ckpt_last.exists(), state.get("train_seconds", 0.0), max_minutes, "nmt",
                                    NmtError)
    cmd += budget
    # every machine a part of this model was trained on (a time budget's stop resumes, maybe elsewhere)
    here = machine()
    machines = [m for m in state.get("machines", []) if m != here] if ckpt_last.exists() else []
    state.update(model_fingerprint=model_fp, train_fingerprint=train_fp, train_done=False, fairseq_running=True,
                 machines=[*machines, here])
    states.write(state)
    log.info("nmt: training %s %s->%s on %d pairs (%s, %d threads; log %s)", p["arch"], src, tgt,
             stats["train_pairs"], device, threads, logfile)
    t_train = time.monotonic()
    lines, killed = run_fairseq(cmd, env, logfile, "fairseq-train", timeout_s, error=NmtError)
    state["train_seconds"] = float(state.get("train_seconds", 0.0)) + time.monotonic() - t_train
    state["fairseq_running"] = False  # returned: stopped by its budget or done, so a rerun may resume
    states.write(state)
    run = parse_train_log(lines)
    run["stopped_by_time"] |= killed
    if run["epoch"] is None:  # nothing left to train (e.g. rerun after a kill during averaging)
        run["epoch"], run["num_updates"] = state.get("epoch"), run["num_updates"] or state.get("num_updates")
    state.update(epoch=run["epoch"], num_updates=run["num_updates"])
    if not ckpt_last.exists():
        raise NmtError(f"fairseq-train wrote no checkpoint_last.pt in {work / 'checkpoints'}; see {logfile}")
    capped = {"max_minutes": max_minutes, "params": p, "num_updates": run["num_updates"], "epoch": run["epoch"],
              "stopped_by_time": run["stopped_by_time"], "machine": " + ".join(state["machines"])}
    try:  # fairseq's resume is not byte-identical: after the error the rerun trains from the start
        cap_text = timecap.enforce(capped, f"NMT system {work}", on_time_cap, RERUN_AFTER_CAP[p["resume_killed"]])
    except timecap.TimeCapError:
        if not p["resume_killed"]:
            shutil.rmtree(work / "checkpoints", ignore_errors=True)
            state["train_seconds"] = 0.0
            states.write(state)
        raise

    # 3. average the last epoch checkpoints (and the partial epoch a time budget stopped in)
    if run["last_saved"] is not None:
        state["partial_epoch"] = not EPOCH_CKPT_RE.match(run["last_saved"]["file"])
    to_average = averaging_window(work / "checkpoints", int(p["average_last"]), bool(state.get("partial_epoch")))
    if len(to_average) < int(p["average_last"]):
        log.warning("nmt: only %d epoch checkpoint(s) to average (average_last %d): %s", len(to_average),
                    int(p["average_last"]), ", ".join(x.name for x in to_average))
    log.info("nmt: averaging %s into %s", ", ".join(x.name for x in to_average), out)
    average_checkpoints(to_average, out)

    # 4. the manifest (last)
    files = {"model": MODEL_FILE, "spm": "spm/spm.model", "src_dict": f"bin/dict.{src}.txt",
             "tgt_dict": f"bin/dict.{tgt}.txt"}
    last_train = run["train"][-1] if run["train"] else {}
    last_valid = run["valid"][-1] if run["valid"] else {}
    info = {"seed": int(seed), "device": device, "threads": threads, "max_minutes": max_minutes, **stats,
            "epoch": run["epoch"], "num_updates": run["num_updates"], "resumed_from": run["resumed_from"],
            "stopped_by_time": run["stopped_by_time"], "early_stop": run["early_stop"],
            "averaged": [x.name for x in to_average], "partial_epoch": bool(state.get("partial_epoch")),
            "last_train_stats": last_train,
            "last_valid_stats": last_valid, "train_wps": _typical_wps(run),
            "dev_loss": last_valid.get("loss"), "train_seconds_total": round(state["train_seconds"], 1),
            "wall_seconds_this_call": round(time.monotonic() - t0, 1), "train_tsv": str(train_tsv),
            "fairseq": dist_version("fairseq-fixed", "fairseq"), "torch": torch.__version__,
            "machine": " + ".join(state["machines"])}
    if cap_text:
        info[timecap.FIELD] = cap_text
    manifest = {"format": 1, "src_lang": src, "tgt_lang": tgt, "arch": p["arch"], "params": p, "files": files,
                "sha256": {name: sha256_file(work / name) for name in files.values()}, "info": info}
    write_json(work / MANIFEST, manifest)
    state["train_done"] = not run["stopped_by_time"]
    states.write(state)
    log.info("nmt: %s ready (epoch %s, %s updates, dev loss %s, %s train wps)", out, run["epoch"],
             run["num_updates"], info["dev_loss"], info["train_wps"])
    return out


