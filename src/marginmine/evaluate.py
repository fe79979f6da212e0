"""Decoding with a model trained by :func:`marginmine.nmt.train_nmt`, BLEU, and the BLEU report.

* :func:`translate_files` (:func:`translate` for one file) - sentencepiece-encode source files,
  beam-search them all in one ``fairseq-generate`` call (one start-up per system, not per set)
  (``--required-batch-size-multiple 1``: with fairseq's default of 8 we measured 496 hypotheses for
  500 sources), restore the input order, decode the pieces. Exactly one hypothesis per source line
  (checked); empty source lines get an empty hypothesis without being decoded.
* :func:`score_bleu` - detokenised sacreBLEU (13a, mixed case; the number to report) and tokenised
  BLEU as ``multi-bleu.perl`` computes it (Moses-tokenised hypothesis and reference, case-sensitive,
  whitespace n-grams, no smoothing).
* :func:`write_bleu_report` - ``results/bleu_N.txt`` (first line: the test sacreBLEU, e.g. ``12.34``;
  then details) and ``results/bleu_N.json`` with the same numbers.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import InputError
from .fairseq_process import run_fairseq
from .nmt import NmtError, fairseq_env, load_manifest, one_line, resolve_device, spm_pieces
from .textio import open_text_out, read_lines
from .tokens import moses

log = logging.getLogger(__name__)

_HYP_RE = re.compile(r"^H-(\d+)\t(\S+)\t?(.*)$")
_SPEED_RE = re.compile(r"Translated ([\d,]+) sentences .* \(([\d.]+) sentences/s, ([\d.]+) tokens/s\)")


def parse_hypotheses(lines: list[str], n: int) -> list[str]:
    """The ``H-<id>`` lines of fairseq-generate output in id order; every id ``0..n-1`` exactly once."""
    hyps: dict[int, str] = {}
    for line in lines:
        m = _HYP_RE.match(line)
        if not m:
            continue
        i = int(m.group(1))
        if i in hyps:
            raise NmtError(f"fairseq-generate produced two hypotheses for sentence {i} (use --nbest 1)")
        hyps[i] = m.group(3)
    missing = [i for i in range(n) if i not in hyps]
    if missing or len(hyps) != n:
        raise NmtError(f"fairseq-generate returned {len(hyps)} hypotheses for {n} sentences "
                       f"(missing ids {missing[:10]}{' ...' if len(missing) > 10 else ''}); refusing to "
                       "score a partial translation")
    return [hyps[i] for i in range(n)]


def translate(workdir: str | Path, src_file: str | Path, out_file: str | Path, *, beam: int = 5,
              batch_size: int = 64, max_tokens: int | None = None, threads: int = 0, device: str = "auto",
              lenpen: float = 1.0, max_len_a: float = 1.5, max_len_b: int = 10) -> dict[str, Any]:
    """Translate ``src_file`` (plain or .gz, one sentence per line) into ``out_file`` (detokenised).

    ``max_len_a * source_pieces + max_len_b`` bounds a hypothesis (fairseq's ``--max-len-a/b``);
    sources longer than the model's ``max_positions`` are truncated (counted, logged). Returns stats.
    """
    return translate_files(workdir, [(src_file, out_file)], beam=beam, batch_size=batch_size,
                           max_tokens=max_tokens, threads=threads, device=device, lenpen=lenpen,
                           max_len_a=max_len_a, max_len_b=max_len_b)[0]


def translate_files(workdir: str | Path, jobs: list[tuple[str | Path, str | Path]], *, beam: int = 5,
                    batch_size: int = 64, max_tokens: int | None = None, threads: int = 0, device: str = "auto",
                    lenpen: float = 1.0, max_len_a: float = 1.5, max_len_b: int = 10) -> list[dict[str, Any]]:
    """Translate every ``(src_file, out_file)`` of ``jobs`` with ONE fairseq-generate start-up (model
    load and data set-up are paid once, not per test set); one stats dict per job, in order.

    Each output has exactly one line per source line (checked), written atomically; a hypothesis
    never depends on which other files share the call (beam search is per sentence, batches are
    sorted by length inside fairseq either way).
    """
    import sentencepiece as spm

    t0 = time.monotonic()
    work = Path(workdir)
    manifest = load_manifest(work, verify=True)  # before fairseq unpickles anything
    src, tgt = manifest["src_lang"], manifest["tgt_lang"]
    dev = resolve_device(device)
    max_src = int(manifest["params"]["max_positions"]) - 1  # room for </s>
    sp = spm.SentencePieceProcessor(model_file=str(work / manifest["files"]["spm"]))
    outs = [Path(o) for _, o in jobs]
    if len({o.resolve() for o in outs}) != len(outs):
        raise NmtError(f"translate: two jobs write the same file ({', '.join(map(str, outs))})")
    all_lines = [[one_line(x) for x in read_lines(s)] for s, _ in jobs]
    keep = [[i for i, x in enumerate(lines) if x] for lines in all_lines]
    pieces = [spm_pieces(sp, [lines[i] for i in k]) for lines, k in zip(all_lines, keep)]
    stats_list: list[dict[str, Any]] = []
    for (src_file, out), lines, k, p in zip(jobs, all_lines, keep, pieces):
        truncated = sum(1 for x in p if len(x) > max_src)
        if truncated:
            log.warning("translate: %d source sentences of %s are longer than %d pieces; truncated",
                        truncated, src_file, max_src)
        stats_list.append({"src": str(src_file), "hyp": str(out), "lines": len(lines),
                           "empty_sources": len(lines) - len(k), "truncated_sources": truncated,
                           "beam": int(beam), "batch_size": int(batch_size), "max_tokens": max_tokens,
                           "lenpen": float(lenpen), "max_len_a": float(max_len_a), "max_len_b": int(max_len_b),
                           "files_in_call": len(jobs)})
    flat = [x for p in pieces for x in p]
    hyps = [[""] * len(lines) for lines in all_lines]
    first = outs[0]
    first.parent.mkdir(parents=True, exist_ok=True)
    if flat:
        logfile = first.with_name(first.name + ".log")
        with tempfile.TemporaryDirectory(prefix=".translate.", dir=first.parent) as tmp_name:
            tmp = Path(tmp_name)
            # --dataset-impl raw: fairseq reads the pieces as text (no fairseq-preprocess start-up);
            # the translation task wants dict.<src>.txt and dict.<tgt>.txt beside the data
            (tmp / f"test.{src}-{tgt}.{src}").write_text(
                "".join(" ".join(x[:max_src]) + "\n" for x in flat), encoding="utf-8")
            for key, lang in (("src_dict", src), ("tgt_dict", tgt)):
                shutil.copyfile(work / manifest["files"][key], tmp / f"dict.{lang}.txt")
            env = fairseq_env(threads)
            cmd = [sys.executable, "-m", "fairseq_cli.generate", str(tmp), "--dataset-impl", "raw",
                   "--path", str(work / manifest["files"]["model"]), "--task", "translation",
                   "--source-lang", src, "--target-lang", tgt, "--gen-subset", "test",
                   "--beam", str(int(beam)), "--nbest", "1", "--lenpen", str(float(lenpen)),
                   "--max-len-a", str(float(max_len_a)), "--max-len-b", str(int(max_len_b)),
                   "--batch-size", str(int(batch_size)), "--required-batch-size-multiple", "1",
                   "--max-source-positions", str(max_src + 1), "--max-target-positions", str(max_src + 1),
                   "--num-workers", "0", "--seed", "1", "--log-format", "simple", "--log-interval", "10"]
            if max_tokens:
                cmd += ["--max-tokens", str(int(max_tokens))]
            if dev == "cpu":
                cmd += ["--cpu"]
            output, _ = run_fairseq(cmd, env, logfile, "fairseq-generate", error=NmtError)
            decoded = iter(parse_hypotheses(output, len(flat)))
            for job_hyps, k in zip(hyps, keep):
                for i in k:
                    h = next(decoded)
                    job_hyps[i] = sp.decode_pieces(h.split()) if h.strip() else ""
            speed = next((m for line in output if (m := _SPEED_RE.search(line))), None)
            if speed:
                for st in stats_list:
                    st["fairseq_sentences_per_s"] = float(speed.group(2))
                    st["fairseq_tokens_per_s"] = float(speed.group(3))
    seconds = round(time.monotonic() - t0, 2)
    for out, job_hyps, lines, st in zip(outs, hyps, all_lines, stats_list):
        if len(job_hyps) != len(lines):  # cannot happen by construction; the contract is checked anyway
            raise NmtError(f"{out}: {len(job_hyps)} hypotheses for {len(lines)} source lines")
        with open_text_out(out) as fo:  # atomic: a temporary name, renamed when complete
            fo.writelines(one_line(h) + "\n" for h in job_hyps)
        st["call_seconds"] = seconds
        st["call_sentences_per_s"] = round(len(flat) / max(seconds, 1e-9), 2)
    log.info("translate: %d file(s), %d lines (%d decoded) in %.1f s (%.1f sentences/s including start-up)",
             len(jobs), sum(len(x) for x in all_lines), len(flat), seconds, len(flat) / max(seconds, 1e-9))
    return stats_list


def score_bleu(hyp_file: str | Path, ref_file: str | Path, *, lang: str = "en") -> dict[str, Any]:
    """Detokenised sacreBLEU and tokenised (multi-bleu.perl) BLEU of one hypothesis file.

    ``lang`` is the target language (Moses tokenizer rules). The tokenised score is Moses-tokenised
    hypothesis and reference (sacremoses, no escaping), then BLEU over whitespace tokens, case-
    sensitive, no smoothing, as ``multi-bleu.perl`` without ``-lc``.
    """
    from sacrebleu.metrics import BLEU

    hyps, refs = read_lines(hyp_file), read_lines(ref_file)
    if len(hyps) != len(refs):
        raise InputError(str(hyp_file), f"has {len(hyps)} lines but the reference {ref_file} has {len(refs)}",
                         hint="one hypothesis per reference line")
    if not refs:
        raise InputError(str(ref_file), "reference is empty")
    sacre = BLEU()
    s = sacre.corpus_score(hyps, [refs])
    tok = moses(lang)
    tok_h = [tok.tokenize(h, escape=False, return_str=True) for h in hyps]
    tok_r = [tok.tokenize(r, escape=False, return_str=True) for r in refs]
    multi = BLEU(tokenize="none", force=True, smooth_method="none")
    t = multi.corpus_score(tok_h, [tok_r])
    return {"bleu": s.score, "signature": str(sacre.get_signature()),
            "precisions": [round(x, 2) for x in s.precisions], "bp": round(s.bp, 4),
            "ratio": round(s.sys_len / max(s.ref_len, 1), 4), "hyp_len": s.sys_len, "ref_len": s.ref_len,
            "tok_bleu": t.score, "tok_precisions": [round(x, 2) for x in t.precisions],
            "tok_method": f"multi-bleu.perl (case-sensitive) on sacremoses -l {lang} tokens (no escaping)",
            "lines": len(refs), "hyp_file": str(hyp_file), "ref_file": str(ref_file)}


def _bleu_lines(name: str, r: Mapping[str, Any]) -> list[str]:
    p = "/".join(f"{x:.1f}" for x in r["precisions"])
    out = [f"{name}: sacreBLEU {r['bleu']:.2f}  tokenised BLEU {r['tok_bleu']:.2f}  ({r['lines']} lines)",
           f"  sacreBLEU signature: {r['signature']}",
           (f"  precisions {p}  BP {r['bp']:.3f}  ratio {r['ratio']:.3f}  hyp_len {r['hyp_len']}  "
            f"ref_len {r['ref_len']}"),
           f"  tokenised: {r['tok_method']}",
           f"  hypotheses {r.get('hyp_file', '?')}  reference {r.get('ref_file', '?')}"]
    if "src" in r:
        out.append(f"  source {r['src']}  (empty {r.get('empty_sources', 0)}, truncated "
                   f"{r.get('truncated_sources', 0)}; {r.get('call_seconds', '?')} s for {r.get('files_in_call', 1)} file(s) in one call)")
    return out


def write_bleu_report(path: str | Path, test: Mapping[str, Any], dev: Mapping[str, Any] | None,
                      extra: Mapping[str, Mapping[str, Any]], meta: Mapping[str, Any]) -> Path:
    """The BLEU report: first line the test sacreBLEU alone (``12.34``), then details; plus a JSON
    sidecar (``path`` with suffix ``.json``) holding the same numbers. Returns the sidecar's path."""
    path = Path(path)
    lines = [f"{test['bleu']:.2f}", ""]
    lines += _bleu_lines("test", test)
    if dev is not None:
        lines += _bleu_lines("dev", dev)
    for name, r in extra.items():
        lines += _bleu_lines(name, r)
    lines += ["", "model and data:"]
    for k, v in meta.items():
        lines.append(f"  {k}: {json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}")
    sidecar = path.with_suffix(".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    obj = {"bleu": round(float(test["bleu"]), 2), "test": dict(test), "dev": dict(dev) if dev is not None else None,
           "extra": {k: dict(v) for k, v in extra.items()}, "meta": dict(meta)}
    for target, text in ((sidecar, json.dumps(obj, indent=1, sort_keys=True) + "\n"), (path, "\n".join(lines) + "\n")):
        part = target.with_name(target.name + ".part")
        part.write_text(text, encoding="utf-8")
        part.replace(target)
    return sidecar


__all__ = ["parse_hypotheses", "score_bleu", "translate", "translate_files", "write_bleu_report"]
