"""The NMT training data: raw text pairs checked, a joint sentencepiece BPE learned on them, and the
binarized fairseq data set (the bytes fairseq-preprocess writes: :mod:`.binarize`)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from marginmine.errors import InputError
from marginmine.io.text import read_aligned, read_tsv
from marginmine.nmt.binarize import binarize
from marginmine.nmt.params import SPM_SEED, one_line

log = logging.getLogger(__name__)


# data: raw text, BPE, binarized


def _extract_train(train_tsv: Path, out_src: Path, out_tgt: Path) -> int:
    """Source/target columns of the training TSV into two files; any unusable line is an error."""
    n = 0
    with open(out_src, "w", encoding="utf-8", newline="\n") as fs, \
            open(out_tgt, "w", encoding="utf-8", newline="\n") as ft:
        for pair in read_tsv(train_tsv):
            if pair.defect == "missing_column":
                raise InputError(str(train_tsv), "has fewer than 2 tab-separated columns", line=pair.line,
                                 hint="expected source<TAB>target[<TAB>...], as `marginmine select` writes")
            if pair.defect is not None:
                raise InputError(str(train_tsv), f"unusable training pair ({pair.defect})", line=pair.line,
                                 hint="train on the output of `marginmine preprocess`/`select`")
            fs.write(one_line(pair.src) + "\n")
            ft.write(one_line(pair.tgt) + "\n")
            n += 1
    return n


def _extract_dev(dev_src: Path, dev_ref: Path, out_src: Path, out_tgt: Path) -> int:
    src, ref = read_aligned(dev_src, dev_ref, hint="the dev source and reference must be line-aligned")
    if not src:
        raise InputError(str(dev_src), "dev set is empty")
    out_src.write_text("".join(one_line(s) + "\n" for s in src), encoding="utf-8")
    out_tgt.write_text("".join(one_line(t) + "\n" for t in ref), encoding="utf-8")
    return len(src)


def _learn_spm(inputs: Sequence[Path], prefix: Path, p: Mapping[str, Any], threads: int) -> int:
    """Joint BPE; with too little data for ``bpe_vocab`` sentencepiece stops early (logged)."""
    import sentencepiece as spm

    spm.set_random_generator_seed(SPM_SEED)
    spm.SentencePieceTrainer.train(
        input=",".join(str(x) for x in inputs), model_prefix=str(prefix), model_type="bpe",
        vocab_size=int(p["bpe_vocab"]), character_coverage=float(p["character_coverage"]),
        input_sentence_size=int(p["bpe_sample"]), shuffle_input_sentence=True, hard_vocab_limit=False,
        num_threads=threads or max(1, os.cpu_count() or 1), minloglevel=1)
    size = spm.SentencePieceProcessor(model_file=str(prefix) + ".model").get_piece_size()
    if size < int(p["bpe_vocab"]):
        log.warning("nmt: the training data only supports %d BPE pieces; vocabulary lowered from %d",
                    size, int(p["bpe_vocab"]))
    return size


def spm_pieces(sp: Any, texts: Sequence[str]) -> list[list[str]]:
    """sentencepiece pieces as fairseq tokens (a piece fairseq would split on becomes ``<unk>``)."""
    return [[("<unk>" if any(c.isspace() for c in piece) else piece) for piece in pieces]
            for pieces in sp.encode([one_line(t) for t in texts], out_type=str)]


def spm_encode_file(sp: Any, src: Path, dst: Path, batch: int = 20000) -> int:
    n = 0
    with open(src, encoding="utf-8", newline="\n") as fi, open(dst, "w", encoding="utf-8", newline="\n") as fo:
        while True:
            buf = [line.rstrip("\n") for _, line in zip(range(batch), fi)]
            if not buf:
                return n
            fo.write("".join(" ".join(pieces) + "\n" for pieces in spm_pieces(sp, buf)))
            n += len(buf)


def prepare_data(work: Path, train_tsv: Path, dev_src: Path, dev_ref: Path, src: str, tgt: str,
                 p: Mapping[str, Any], threads: int) -> dict[str, Any]:
    import sentencepiece as spm

    for sub in ("data", "spm", "bin"):
        shutil.rmtree(work / sub, ignore_errors=True)
        (work / sub).mkdir(parents=True)
    t0 = time.monotonic()
    n_train = _extract_train(train_tsv, work / "data" / f"train.{src}", work / "data" / f"train.{tgt}")
    n_dev = _extract_dev(dev_src, dev_ref, work / "data" / f"valid.{src}", work / "data" / f"valid.{tgt}")
    log.info("nmt: %d training pairs, %d dev pairs; learning a joint BPE (%d pieces)", n_train, n_dev,
             int(p["bpe_vocab"]))
    vocab = _learn_spm([work / "data" / f"train.{src}", work / "data" / f"train.{tgt}"], work / "spm" / "spm",
                       p, threads)
    sp = spm.SentencePieceProcessor(model_file=str(work / "spm" / "spm.model"))
    for split in ("train", "valid"):
        for lang in (src, tgt):
            spm_encode_file(sp, work / "data" / f"{split}.{lang}", work / "spm" / f"{split}.{lang}")
    log.info("nmt: BPE done (%d pieces, %.0f s); binarizing", vocab, time.monotonic() - t0)
    binarize(work / "spm", work / "bin", src, tgt)   # fairseq-preprocess's bytes, in this process
    n_dict = len((work / "bin" / f"dict.{src}.txt").read_text(encoding="utf-8").splitlines())  # the file's words
    return {"train_pairs": n_train, "dev_pairs": n_dev, "bpe_vocab": vocab, "dict_size": n_dict}
