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
    threads 0                 CPU threads of fairseq-train (OMP/MKL_NUM_THREADS); 0 = inherit. Set it
                              when other jobs share the cores: oversubscribed OpenMP made a tiny run
                              ~70x slower on a 2-core machine
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from marginmine.defaults import SEED
from marginmine.encoders.base import EncoderError, ParallelData, l2_normalize, write_manifest
from marginmine.fairseq_process import parse_train_log, run_fairseq
from marginmine.io.safe import json_fingerprint, sha256_file

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

KIND = "laser"

DEFAULTS: dict[str, Any] = {
    "embed_dim": 256, "encoder_hidden": 256, "encoder_layers": 1, "decoder_hidden": 512,
    "lang_embed_dim": 32, "bpe_vocab": 8000, "bpe_sample": 1_000_000, "character_coverage": 0.9999,
    "lr": 0.001, "dropout": 0.1, "clip_norm": 5.0, "max_epoch": 10, "max_update": 0,
    "max_tokens": 4000, "max_len": 250, "update_freq": 1, "log_interval": 50,
    "save_interval_updates": 1000, "encode_max_len": 1000, "threads": 0,
}
#: the paper's sizes (pass them as params for a paper-scale run)
PAPER_PARAMS: dict[str, Any] = {"embed_dim": 512, "encoder_hidden": 512, "encoder_layers": 1,
                                "decoder_hidden": 2048, "lang_embed_dim": 32, "bpe_vocab": 40000}

_PREP_KEYS = ("bpe_vocab", "bpe_sample", "character_coverage")
_MODEL_KEYS = ("embed_dim", "encoder_hidden", "encoder_layers", "decoder_hidden", "lang_embed_dim")
_FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
_LANG_RE = re.compile(r"^[A-Za-z0-9_]{1,16}$")
_BPE_SAMPLE_SEED = 12345  # fixed: the vocabulary must not change with the training seed
_STARTUP_RESERVE_S = 30.0  # fairseq start-up + export, not counted by --stop-time-hours


# ----------------------------------------------------------------------------------------------
# small helpers


def laser_src_dir() -> Path:
    """fairseq's LASER example (task + models), shipped inside the fairseq package."""
    import fairseq

    d = Path(fairseq.__file__).parent / "examples" / "laser" / "laser_src"
    if not (d / "laser_task.py").exists() or not (d / "laser_lstm.py").exists():
        raise EncoderError(f"{d}: fairseq's LASER example task not found (fairseq {fairseq.__version__}); "
                           "install a fairseq build that ships fairseq/examples/laser")
    return d


def resolve_params(params: dict[str, Any] | None) -> dict[str, Any]:
    """``params`` over :data:`DEFAULTS` (unknown keys are logged and ignored)."""
    p = dict(params or {})
    if "bpe_merges" in p and "bpe_vocab" not in p:
        p["bpe_vocab"] = p.pop("bpe_merges")
    p.pop("bpe_merges", None)
    unknown = sorted(set(p) - set(DEFAULTS))
    if unknown:
        log.warning("laser: ignoring unknown params %s (known: %s)", unknown, ", ".join(sorted(DEFAULTS)))
    out = dict(DEFAULTS)
    out.update({k: v for k, v in p.items() if k in DEFAULTS})
    for k in ("embed_dim", "encoder_hidden", "encoder_layers", "decoder_hidden", "bpe_vocab", "max_tokens",
              "max_len", "max_epoch", "update_freq", "log_interval", "encode_max_len"):
        if int(out[k]) < 1:
            raise EncoderError(f"laser param {k} must be >= 1 (got {out[k]!r})")
    for k in ("lang_embed_dim", "threads", "max_update", "save_interval_updates"):
        if int(out[k]) < 0:
            raise EncoderError(f"laser param {k} must be >= 0 (got {out[k]!r})")
    return out


def _iter_lines(path: Path) -> Iterator[str]:
    """Lines split on '\\n' only (a stray '\\r' or U+2028 inside a sentence must not shift alignment)."""
    with open(path, encoding="utf-8", errors="replace", newline="\n") as fh:
        for line in fh:
            yield line.rstrip("\n").rstrip("\r")


def _count_lines(path: Path) -> int:
    return sum(1 for _ in _iter_lines(path))


def _piece_table(sp: Any) -> list[str]:
    """spm id -> token written for fairseq; pieces fairseq would misread become <unk>."""
    table = []
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        bad = (not piece or piece in _FAIRSEQ_SPECIALS or sp.is_control(i) or sp.is_unknown(i)
               or any(c.isspace() for c in piece))
        table.append("<unk>" if bad else piece)
    return table


def _pairs(data: Sequence[ParallelData]) -> dict[tuple[str, str], list[tuple[Path, Path]]]:
    """Unordered language pair (a < b) -> list of (file_a, file_b), in data order."""
    pairs: dict[tuple[str, str], list[tuple[Path, Path]]] = {}
    for d in data:
        for lang in (d.src_lang, d.tgt_lang):
            if not _LANG_RE.match(lang):
                raise EncoderError(f"laser: unsupported language code {lang!r} (letters, digits, '_')")
        if d.src_lang == d.tgt_lang:
            raise EncoderError(f"laser: {d.src} and {d.tgt} have the same language {d.src_lang!r}")
        a, b = sorted((d.src_lang, d.tgt_lang))
        fa, fb = (Path(d.src), Path(d.tgt)) if d.src_lang == a else (Path(d.tgt), Path(d.src))
        files = pairs.setdefault((a, b), [])
        if (fa, fb) not in files:  # de->en and en->de listing the same files: one corpus
            files.append((fa, fb))
    if not pairs:
        raise EncoderError("laser: no training data")
    return pairs


# ----------------------------------------------------------------------------------------------
# training


def _bpe_sample(pairs: dict[tuple[str, str], list[tuple[Path, Path]]], n_total: int, out: Path) -> dict[str, int]:
    """Deterministic sample, balanced over languages, of all sentences (each file once)."""
    by_lang: dict[str, list[Path]] = {}
    for (a, b), files in pairs.items():
        for fa, fb in files:
            for lang, f in ((a, fa), (b, fb)):
                if f not in by_lang.setdefault(lang, []):
                    by_lang[lang].append(f)
    quota = max(1, int(n_total) // len(by_lang))
    rng = np.random.default_rng(_BPE_SAMPLE_SEED)
    taken: dict[str, int] = {}
    with open(out, "w", encoding="utf-8", newline="\n") as fo:
        for lang in sorted(by_lang):
            sizes = [_count_lines(f) for f in by_lang[lang]]
            total = sum(sizes)
            keep = None if total <= quota else set(rng.choice(total, size=quota, replace=False).tolist())
            i = n = 0
            for f in by_lang[lang]:
                for line in _iter_lines(f):
                    if (keep is None or i in keep) and line.strip():
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
                 batch: int = 20000) -> int:
    n = 0
    with open(dst, "w", encoding="utf-8", newline="\n") as fo:
        for path in src:
            lines = _iter_lines(path)
            while True:
                buf = [line for _, line in zip(range(batch), lines)]
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


def train(data: Sequence[ParallelData], out_dir: Path, params: dict, *, seed: int = SEED,
          max_minutes: float | None = None) -> Path:
    """Learn the joint BPE, binarize, train with fairseq's LASER task, export ``out_dir``.

    Rerunning on the same ``out_dir`` resumes from ``work/checkpoints/checkpoint_last.pt`` (raise
    ``max_epoch`` to train further); ``max_minutes`` bounds this call's wall-clock time (fairseq's
    ``--stop-time-hours``, which counts cumulative training time, is set accordingly).
    """
    import sentencepiece as spm
    import torch

    t0 = time.monotonic()
    deadline = None if max_minutes is None else t0 + 60.0 * float(max_minutes)
    p = resolve_params(params)
    out = Path(out_dir)
    work = out / "work"
    for sub in ("bpe", "spm", "bin", "checkpoints"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    pairs = _pairs(data)
    langs = sorted({lang for pair in pairs for lang in pair})
    lang_ids = {lang: i for i, lang in enumerate(langs)}
    logfile = work / "train.log"
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", PYTHONUNBUFFERED="1")  # our checkpoints only
    if int(p["threads"]) > 0:
        env.update(OMP_NUM_THREADS=str(int(p["threads"])), MKL_NUM_THREADS=str(int(p["threads"])))
    state_path = work / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}

    # 0. what the existing work dir was made from
    data_fp = {f"{a}-{b}": [[str(fa), sha256_file(fa), str(fb), sha256_file(fb)] for fa, fb in files]
               for (a, b), files in sorted(pairs.items())}
    prep_fp = json_fingerprint({"data": data_fp, "prep": {k: p[k] for k in _PREP_KEYS}, "version": 1})
    model_fp = json_fingerprint({"prep": prep_fp, "model": {k: p[k] for k in _MODEL_KEYS}})
    ckpt_last = work / "checkpoints" / "checkpoint_last.pt"
    if ckpt_last.exists() and state.get("model_fingerprint") != model_fp:
        raise EncoderError(f"{work}: holds checkpoints of a different run (other data, BPE or model sizes); "
                           "resuming would be wrong - delete that directory or use another output directory")
    (out / "encoder.json").unlink(missing_ok=True)  # never leave an old manifest over new files

    # 1.+2. joint BPE, encoded text, dictionary, binarized data (skipped when already done)
    bpe_model, dict_path = work / "bpe" / "spm.model", work / "bin" / "dict.txt"
    stats = state.get("prep_stats", {})
    if state.get("prep_fingerprint") != prep_fp or not (work / "bin" / ".done").exists():
        (work / "bin" / ".done").unlink(missing_ok=True)
        log.info("laser: learning a joint BPE (%d pieces) on a sample of %s", p["bpe_vocab"], ", ".join(langs))
        sample = work / "bpe" / "sample.txt"
        taken = _bpe_sample(pairs, int(p["bpe_sample"]), sample)
        _learn_bpe(sample, work / "bpe" / "spm", p)
        sp = spm.SentencePieceProcessor(model_file=str(bpe_model))
        table = _piece_table(sp)
        counts = np.zeros(sp.get_piece_size(), dtype=np.int64)
        n_pairs: dict[str, int] = {}
        for (a, b), files in sorted(pairs.items()):
            d = work / "spm" / f"{a}-{b}"
            d.mkdir(parents=True, exist_ok=True)
            na = _encode_file(sp, table, [fa for fa, _ in files], d / f"train.{a}", counts)
            nb = _encode_file(sp, table, [fb for _, fb in files], d / f"train.{b}", counts)
            if na != nb:
                raise EncoderError(f"laser: {a}-{b} files are not line-aligned ({na} vs {nb} lines): "
                                   + ", ".join(f"{fa} / {fb}" for fa, fb in files))
            n_pairs[f"{a}-{b}"] = na
        n_dict = _write_dict(table, counts, dict_path)
        log.info("laser: binarizing %d language pairs (dictionary: %d pieces)", len(pairs), n_dict)
        for (a, b) in sorted(pairs):
            fwd = work / "bin" / f"{a}-{b}"
            shutil.rmtree(fwd, ignore_errors=True)
            run_fairseq([sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", a, "--target-lang", b,
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
        state_path.write_text(json.dumps(state, indent=1))
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
    cmd = [sys.executable, "-m", "fairseq_cli.train", str((work / "laser.json").resolve()),
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
    timeout_s = None
    if deadline is not None:
        remaining = deadline - time.monotonic() - _STARTUP_RESERVE_S
        if remaining <= 0 and not ckpt_last.exists():
            raise EncoderError(f"laser: the wall-clock budget ({max_minutes} min) was used up by BPE and "
                               "binarization; nothing trained (raise max_minutes; rerunning resumes)")
        remaining = max(remaining, 1.0)
        # --stop-time-hours compares fairseq's CUMULATIVE training time (kept in the checkpoint)
        cmd += ["--stop-time-hours", f"{(float(state.get('train_seconds', 0.0)) + remaining) / 3600.0:.6f}"]
        timeout_s = remaining + max(120.0, 0.1 * remaining)  # hard stop if fairseq overshoots badly
    state["model_fingerprint"] = model_fp
    state_path.write_text(json.dumps(state, indent=1))
    t_train = time.monotonic()
    lines, killed = run_fairseq(cmd, env, logfile, "fairseq-train", timeout_s, error=EncoderError, prefix="laser: ")
    state["train_seconds"] = float(state.get("train_seconds", 0.0)) + time.monotonic() - t_train
    state_path.write_text(json.dumps(state, indent=1))
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
    import fairseq

    last = run["epoch_stats"][-1] if run["epoch_stats"] else {}
    info = {"params": p, "seed": int(seed), "max_minutes": max_minutes,
            "directions": cfg["directions"], "lang_ids": lang_ids, **stats,
            "epoch": run["epoch"], "num_updates": run["num_updates"],
            "epoch_complete": not run["stopped_by_time"], "stopped_by_time": run["stopped_by_time"],
            "resumed_from": run["resumed_from"], "last_epoch_stats": last,
            "train_wps": last.get("wps"), "train_seconds_total": round(state["train_seconds"], 1),
            "minutes": round(state["train_seconds"] / 60.0, 3),      # as the dual encoder reports it
            "wall_seconds_this_call": round(time.monotonic() - t0, 1),
            "fairseq": fairseq.__version__, "torch": torch.__version__}
    write_manifest(out, kind=KIND, dim=dim, langs=langs,
                   files={"model": "model.pt", "spm": "spm.model", "dict": "dict.txt", "config": "config.json"},
                   info=info)
    log.info("laser: exported %s (epoch %s, %s updates, %s wps)", out, run["epoch"], run["num_updates"],
             info["train_wps"])
    return out


# ----------------------------------------------------------------------------------------------
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
    """A trained LASER-style encoder: spm -> dictionary ids + EOS -> BiLSTM -> masked max-pool."""

    kind = KIND

    def __init__(self, encoder: Any, dictionary: Any, sp: Any, langs: Sequence[str], dim: int,
                 device: str = "cpu", encode_max_len: int = 1000, batch_tokens: int = 16000,
                 batch_sentences: int = 512):
        self.encoder = encoder.eval()
        self.dictionary = dictionary
        self.sp = sp
        self.langs = list(langs)
        self.dim = int(dim)
        self.device = device
        self.encode_max_len = int(encode_max_len)
        self.batch_tokens = int(batch_tokens)
        self.batch_sentences = int(batch_sentences)
        table = _piece_table(sp)
        self._ids = np.array([dictionary.index(piece) for piece in table], dtype=np.int64)
        self._eos = dictionary.eos()
        self._pad = dictionary.pad()

    def tokenize(self, sentences: Sequence[str]) -> list[np.ndarray]:
        """Dictionary ids of every sentence, EOS appended (as fairseq-preprocess binarizes)."""
        out = []
        for ids in self.sp.encode([str(s) for s in sentences]):
            ids = self._ids[np.asarray(ids, dtype=np.int64)] if ids else np.zeros(0, dtype=np.int64)
            out.append(np.append(ids[: self.encode_max_len - 1], self._eos))
        return out

    def batches(self, sentences: Sequence[str]) -> Iterator[tuple[np.ndarray, "torch.Tensor", "torch.Tensor"]]:
        """``(indices, padded ids B x T, lengths)`` per batch, longest first (as pack_padded_sequence
        wants), at most ``batch_sentences`` sentences and ``batch_tokens`` padded ids each."""
        import torch

        toks = self.tokenize(sentences)
        lengths = np.array([len(t) for t in toks])
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(order):
            longest = lengths[order[start]]
            n = max(1, min(self.batch_sentences, self.batch_tokens // max(1, longest), len(order) - start))
            idx = order[start:start + n]
            start += n
            batch = torch.full((n, longest), self._pad, dtype=torch.long)
            for row, i in enumerate(idx):
                batch[row, : lengths[i]] = torch.from_numpy(toks[i])
            yield idx, batch, torch.from_numpy(lengths[idx].astype(np.int64))

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
    from fairseq.data import Dictionary

    d = Path(directory)
    files = manifest.get("files", {})
    for key in ("model", "spm", "dict", "config"):
        name = files.get(key)
        if not name or name not in manifest.get("sha256", {}):
            raise EncoderError(f"{d}: manifest lists no verified {key!r} file")
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
                        encode_max_len=int(cfg.get("encode_max_len", DEFAULTS["encode_max_len"])))


__all__ = ["DEFAULTS", "PAPER_PARAMS", "LaserEncoder", "load", "max_pool_masked", "parse_fairseq_log",
           "resolve_params", "train"]
