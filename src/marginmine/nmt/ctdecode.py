"""Beam search with CTranslate2, the default decoder of :func:`marginmine.nmt.evaluate.translate_files`.

Why: on the demo's ratio system (``bench/bench_decoding.py``, both through ``translate_files``,
6,000 sentences of its five test sets, 2 threads, beam 5, AMD EPYC) fairseq-generate took 189.3 s
and CTranslate2 70.9 s including the checkpoint conversion (2.67x), BLEU within 0.14 on every set
(``bench/RESULTS.md``). The fairseq path stays available (``--decoder fairseq``, config
``nmt.decoder``).

* The fairseq checkpoint is converted once per model into ``<workdir>/ct2/`` (written under a
  temporary name, renamed when complete; ``model_sha256.txt`` ties it to the checkpoint, so a
  retrained model is converted again). Jobs that decode with one model side by side (a
  translator's shards) convert it once: the first holds ``<workdir>/.ct2.lock`` while it converts,
  the others wait and then use its ``ct2/``. The checkpoint is unpickled only after
  :func:`marginmine.nmt.train.load_manifest` checked its SHA-256 (our own file).
* The same settings as fairseq-generate: beam, length penalty, the source cut to the model's
  positions, and the hypothesis length limit ``max_len_a * source_tokens + max_len_b`` per
  sentence: CTranslate2 takes one limit per batch, so sentences are batched by equal source length
  (and input order within a length), which makes the batch limit each sentence's own.
* Deterministic for a given machine and thread count (CPU); one hypothesis per piece list, in order.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

EOS = "</s>"
_CONVERT = """
import json, sys
from marginmine.fairseq_process import lean_fairseq
lean_fairseq()
from ctranslate2.converters import FairseqConverter
model, dicts, src, tgt, out = json.loads(sys.argv[1])
FairseqConverter(model, dicts, source_lang=src, target_lang=tgt, unsafe_deserialization=True).convert(out, force=True)
"""


def model_sha256(manifest: dict[str, Any]) -> str:
    return manifest["sha256"][manifest["files"]["model"]]


def converted_model(work: Path, manifest: dict[str, Any]) -> Path:
    """``<work>/ct2``: the checkpoint in CTranslate2's format, converted now unless it already
    belongs to this checkpoint. Call only with a manifest whose SHA-256s were verified."""

    target = work / "ct2"
    stamp = target / "model_sha256.txt"
    want = model_sha256(manifest)

    def current() -> bool:
        return stamp.is_file() and stamp.read_text().strip() == want and (target / "model.bin").is_file()

    if current():
        return target
    _require_ctranslate2()
    with open(work / ".ct2.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when the process dies
        if current():  # converted by a job that held the lock before us
            return target
        _convert(work, manifest, target, want)
    return target


def _convert(work: Path, manifest: dict[str, Any], target: Path, want: str) -> None:
    from marginmine.nmt.params import NmtError

    src, tgt = manifest["src_lang"], manifest["tgt_lang"]
    tmp = work / ".ct2.part"  # only the lock holder writes it: a killed conversion's leftover goes
    shutil.rmtree(tmp, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=".ct2-dicts.", dir=work) as dicts:
        for key, lang in (("src_dict", src), ("tgt_dict", tgt)):
            shutil.copyfile(work / manifest["files"][key], Path(dicts) / f"dict.{lang}.txt")
        # In a child process: the converter imports fairseq and torch, whose OpenMP runtime in the
        # decoding process slowed CTranslate2 threefold (measured: 212.8 s instead of 71.6 s).
        # Our own checkpoint, its SHA-256 verified by the caller: the converter may unpickle it.
        spec = json.dumps([str(work / manifest["files"]["model"]), dicts, src, tgt, str(tmp)])
        r = subprocess.run([sys.executable, "-c", _CONVERT, spec], capture_output=True, text=True)
        if r.returncode != 0 or not (tmp / "model.bin").is_file():
            raise NmtError(f"CTranslate2 could not convert {work / manifest['files']['model']}: "
                           f"{(r.stderr.strip().splitlines() or ['no output'])[-1]}")
    (tmp / "model_sha256.txt").write_text(want + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    log.info("converted %s for CTranslate2 -> %s", manifest["files"]["model"], target)


def _require_ctranslate2() -> None:
    from marginmine.nmt.params import NmtError

    if importlib.util.find_spec("ctranslate2") is None:
        raise NmtError("the ctranslate2 decoder needs the ctranslate2 package (pinned in requirements.txt; "
                       "`make setup`), or choose --decoder fairseq")


def gpu_visible() -> bool:
    """Whether CTranslate2 sees a CUDA GPU (no torch import: a decoding job needs none)."""
    _require_ctranslate2()
    import ctranslate2

    return ctranslate2.get_cuda_device_count() > 0


def length_batches(pieces: list[list[str]], batch_size: int) -> list[list[int]]:
    """Indices of ``pieces`` grouped by equal length (shortest first, input order within a length),
    cut into batches of at most ``batch_size``."""
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(pieces):
        by_len.setdefault(len(p), []).append(i)
    return [idx[a:a + batch_size] for n in sorted(by_len) for idx in [by_len[n]]
            for a in range(0, len(idx), batch_size)]


def decode(model_dir: Path, pieces: list[list[str]], *, device: str, threads: int, beam: int, lenpen: float,
           max_len_a: float, max_len_b: int, batch_size: int) -> list[list[str]]:
    """Hypothesis pieces for every source piece list (already cut to the model's positions)."""
    import ctranslate2

    translator = ctranslate2.Translator(str(model_dir), device="cuda" if device.startswith("cuda") else "cpu",
                                        intra_threads=max(0, threads), inter_threads=1)
    out: list[list[str]] = [[] for _ in pieces]
    for idx in length_batches(pieces, batch_size):
        n_src = len(pieces[idx[0]]) + 1  # fairseq counts the source's end-of-sentence token
        limit = max(1, int(max_len_a * n_src + max_len_b))
        results = translator.translate_batch([pieces[i] + [EOS] for i in idx], beam_size=beam,
                                             length_penalty=lenpen, max_decoding_length=limit,
                                             max_batch_size=len(idx))
        for i, r in zip(idx, results):
            out[i] = [t for t in r.hypotheses[0] if t != EOS]
    return out
