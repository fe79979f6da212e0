"""Decoding with a model trained by :func:`marginmine.nmt.train.train_nmt`, BLEU, and the BLEU report.

* :func:`translate_files` (:func:`translate` for one file) - sentencepiece-encode source files,
  beam-search them all with one model load (one start-up per system, not per set), restore the
  input order, decode the pieces. Exactly one hypothesis per source line (checked); empty source
  lines get an empty hypothesis without being decoded. Two decoders behind the same API:
  ``ctranslate2`` (the default, 2.67x faster end to end: :mod:`marginmine.nmt.ctdecode`) and ``fairseq``
  (one ``fairseq-generate`` call; ``--required-batch-size-multiple 1``: with fairseq's default of 8
  we measured 496 hypotheses for 500 sources).
* :func:`score_bleu` - detokenised sacreBLEU (13a, mixed case; the number to report), tokenised
  BLEU as ``multi-bleu.perl`` computes it (Moses-tokenised hypothesis and reference, case-sensitive,
  whitespace n-grams, no smoothing), and sacreBLEU's chrF (``CHRF()``: chrF2) with its signature.
* :func:`write_bleu_report` - ``results/bleu_N.txt`` (first line: the test sacreBLEU, e.g. ``12.34``;
  then details, chrF among them) and ``results/bleu_N.json`` with the same numbers (``chrf`` and
  ``chrf_signature`` per set; reports written before chrF lack them, and the comparison computes chrF
  from the hypothesis files instead, so no reader needs them).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marginmine.defaults import BEAM, DECODERS, DEFAULT_DECODER
from marginmine.errors import InputError
from marginmine.fairseq_process import fairseq_command, run_fairseq
from marginmine.io.safe import sha256_file, write_text
from marginmine.io.text import open_text_out, read_lines
from marginmine.nmt.data import spm_pieces
from marginmine.nmt.params import NmtError, fairseq_env, one_line, resolve_device
from marginmine.nmt.train import load_manifest
from marginmine.preprocess.tokens import moses

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


def translate(workdir: str | Path, src_file: str | Path, out_file: str | Path, *, beam: int = BEAM,
              batch_size: int = 64, max_tokens: int | None = None, threads: int = 0, device: str = "auto",
              lenpen: float = 1.0, max_len_a: float = 1.5, max_len_b: int = 10,
              decoder: str = DEFAULT_DECODER) -> dict[str, Any]:
    """Translate ``src_file`` (plain or .gz, one sentence per line) into ``out_file`` (detokenised).

    ``max_len_a * source_pieces + max_len_b`` bounds a hypothesis (fairseq's ``--max-len-a/b``);
    sources longer than the model's ``max_positions`` are truncated (counted, logged). Returns stats.
    """
    return translate_files(workdir, [(src_file, out_file)], beam=beam, batch_size=batch_size,
                           max_tokens=max_tokens, threads=threads, device=device, lenpen=lenpen,
                           max_len_a=max_len_a, max_len_b=max_len_b, decoder=decoder)[0]


@dataclass(frozen=True)
class _Decoder:
    """A verified model and its decoding settings: pieces in, detokenised hypotheses out."""

    work: Path
    manifest: dict[str, Any]
    sp: Any
    device: str
    max_src: int
    beam: int
    batch_size: int
    max_tokens: int | None
    threads: int
    lenpen: float
    max_len_a: float
    max_len_b: int
    decoder: str = DEFAULT_DECODER

    def settings(self) -> dict[str, Any]:
        return {"model_sha256": self.manifest["sha256"], "beam": self.beam, "lenpen": self.lenpen,
                "max_len_a": self.max_len_a, "max_len_b": self.max_len_b, "max_src": self.max_src,
                "decoder": self.decoder}

    def decode(self, pieces: list[list[str]], logfile: Path, stats: list[dict[str, Any]]) -> list[str]:
        """Hypotheses for ``pieces`` (no empty ones), in input order."""
        if not pieces:
            return []
        if self.decoder == "ctranslate2":
            return self._decode_ct2(pieces, stats)
        return self._decode_fairseq(pieces, logfile, stats)

    def _decode_ct2(self, pieces: list[list[str]], stats: list[dict[str, Any]]) -> list[str]:
        from marginmine.nmt.ctdecode import converted_model, decode

        t0 = time.monotonic()
        out = decode(converted_model(self.work, self.manifest), [x[:self.max_src] for x in pieces], device=self.device,
                     threads=self.threads, beam=self.beam, lenpen=self.lenpen, max_len_a=self.max_len_a,
                     max_len_b=self.max_len_b, batch_size=self.batch_size)
        for st in stats:
            st["decoder_sentences_per_s"] = round(len(pieces) / max(time.monotonic() - t0, 1e-9), 1)
        return [self.sp.decode_pieces(h) if h else "" for h in out]

    def _decode_fairseq(self, pieces: list[list[str]], logfile: Path, stats: list[dict[str, Any]]) -> list[str]:
        """One fairseq-generate call over ``pieces``."""
        src, tgt = self.manifest["src_lang"], self.manifest["tgt_lang"]
        with tempfile.TemporaryDirectory(prefix=".translate.", dir=logfile.parent) as tmp_name:
            tmp = Path(tmp_name)
            # --dataset-impl raw: fairseq reads the pieces as text (no fairseq-preprocess start-up);
            # the translation task wants dict.<src>.txt and dict.<tgt>.txt beside the data
            (tmp / f"test.{src}-{tgt}.{src}").write_text(
                "".join(" ".join(x[:self.max_src]) + "\n" for x in pieces), encoding="utf-8")
            for key, lang in (("src_dict", src), ("tgt_dict", tgt)):
                shutil.copyfile(self.work / self.manifest["files"][key], tmp / f"dict.{lang}.txt")
            cmd = [*fairseq_command("generate"), str(tmp), "--dataset-impl", "raw",
                   "--path", str(self.work / self.manifest["files"]["model"]), "--task", "translation",
                   "--source-lang", src, "--target-lang", tgt, "--gen-subset", "test",
                   "--beam", str(self.beam), "--nbest", "1", "--lenpen", str(self.lenpen),
                   "--max-len-a", str(self.max_len_a), "--max-len-b", str(self.max_len_b),
                   "--batch-size", str(self.batch_size), "--required-batch-size-multiple", "1",
                   "--max-source-positions", str(self.max_src + 1), "--max-target-positions", str(self.max_src + 1),
                   "--num-workers", "0", "--seed", "1", "--log-format", "simple", "--log-interval", "10"]
            if self.max_tokens:
                cmd += ["--max-tokens", str(self.max_tokens)]
            if self.device == "cpu":
                cmd += ["--cpu"]
            output, _ = run_fairseq(cmd, fairseq_env(self.threads), logfile, "fairseq-generate", error=NmtError)
        hyps = [self.sp.decode_pieces(h.split()) if h.strip() else "" for h in parse_hypotheses(output, len(pieces))]
        speed = next((m for line in output if (m := _SPEED_RE.search(line))), None)
        if speed:
            for st in stats:
                st["decoder_sentences_per_s"] = float(speed.group(2))
                st["fairseq_tokens_per_s"] = float(speed.group(3))
        return hyps


def translate_files(workdir: str | Path, jobs: list[tuple[str | Path, str | Path]], *, beam: int = BEAM,
                    batch_size: int = 64, max_tokens: int | None = None, threads: int = 0, device: str = "auto",
                    lenpen: float = 1.0, max_len_a: float = 1.5, max_len_b: int = 10,
                    chunk_lines: int | None = None, decoder: str = DEFAULT_DECODER,
                    column: int | None = None) -> list[dict[str, Any]]:
    """Translate every ``(src_file, out_file)`` of ``jobs``; one stats dict per job, in order.

    ``decoder``: ``ctranslate2`` (default) or ``fairseq``. Without ``chunk_lines`` all files go
    through ONE decoder start-up (model load and data set-up paid once, not per test set). With
    ``chunk_lines`` (corpora) each file is translated in chunks of that many lines, each chunk saved
    when done (``.<out>.chunks/``, with the model's SHA-256, the source's and the settings): a killed
    run resumes at the first missing chunk, a changed model, source or setting starts the chunks
    again (logged). Either way each output has exactly one line per source line (checked) and is
    written atomically at the end. ``column``:
    the sources are that 0-based tab-separated column of each line (a corpus shard), not the line.
    """
    import sentencepiece as spm

    t0 = time.monotonic()
    work = Path(workdir)
    manifest = load_manifest(work, verify=True)  # before fairseq unpickles anything
    if chunk_lines is not None and int(chunk_lines) < 1:
        raise NmtError(f"translate: chunk_lines must be at least 1 (got {chunk_lines})")
    if decoder not in DECODERS:
        raise NmtError(f"translate: unknown decoder {decoder!r} (choose from {', '.join(DECODERS)})")
    from marginmine.nmt import ctdecode

    gpu_visible = ctdecode.gpu_visible if decoder == "ctranslate2" else None
    dec = _Decoder(work, manifest, spm.SentencePieceProcessor(model_file=str(work / manifest["files"]["spm"])),
                   resolve_device(device, gpu_visible), int(manifest["params"]["max_positions"]) - 1, int(beam),
                   int(batch_size), int(max_tokens) if max_tokens else None, int(threads), float(lenpen),
                   float(max_len_a), int(max_len_b), decoder)
    outs = [Path(o) for _, o in jobs]
    if len({o.resolve() for o in outs}) != len(outs):
        raise NmtError(f"translate: two jobs write the same file ({', '.join(map(str, outs))})")
    all_lines = [[one_line(x) for x in _source_lines(s, column)] for s, _ in jobs]
    keep = [[i for i, x in enumerate(lines) if x] for lines in all_lines]
    pieces = [spm_pieces(dec.sp, [lines[i] for i in k]) for lines, k in zip(all_lines, keep)]
    stats_list: list[dict[str, Any]] = []
    for (src_file, out), lines, k, p in zip(jobs, all_lines, keep, pieces):
        truncated = sum(1 for x in p if len(x) > dec.max_src)
        if truncated:
            log.warning("translate: %d source sentences of %s are longer than %d pieces; truncated",
                        truncated, src_file, dec.max_src)
        stats_list.append({"src": str(src_file), "hyp": str(out), "lines": len(lines),
                           "empty_sources": len(lines) - len(k), "truncated_sources": truncated,
                           "decoder": dec.decoder, "beam": dec.beam, "batch_size": dec.batch_size,
                           "max_tokens": dec.max_tokens,
                           "lenpen": dec.lenpen, "max_len_a": dec.max_len_a, "max_len_b": dec.max_len_b,
                           "src_lang": manifest["src_lang"], "tgt_lang": manifest["tgt_lang"], "column": column,
                           "files_in_call": len(jobs) if chunk_lines is None else 1})
    for o in outs:
        o.parent.mkdir(parents=True, exist_ok=True)
    hyps = [[""] * len(lines) for lines in all_lines]
    n_decoded = sum(len(k) for k in keep)
    if chunk_lines is None:
        decoded = iter(dec.decode([x for p in pieces for x in p], outs[0].with_name(outs[0].name + ".log"), stats_list))
        for job_hyps, k in zip(hyps, keep):
            for i in k:
                job_hyps[i] = next(decoded)
    else:
        for (src_file, _), out, lines, job_hyps, k, p, st in zip(jobs, outs, all_lines, hyps, keep, pieces, stats_list):
            st["chunks_resumed"], st["chunks"] = _translate_chunks(dec, Path(src_file), out, len(lines), job_hyps, k, p,
                                                                   int(chunk_lines), st)
    seconds = round(time.monotonic() - t0, 2)
    for out, job_hyps, lines, st in zip(outs, hyps, all_lines, stats_list):
        if len(job_hyps) != len(lines):  # cannot happen by construction; the contract is checked anyway
            raise NmtError(f"{out}: {len(job_hyps)} hypotheses for {len(lines)} source lines")
        with open_text_out(out) as fo:  # atomic: a temporary name, renamed when complete
            fo.writelines(one_line(h) + "\n" for h in job_hyps)
        st["empty_hypotheses"] = sum(1 for h in job_hyps if not one_line(h).strip())  # counted, kept as lines
        st["call_seconds"] = seconds
        st["call_sentences_per_s"] = round(n_decoded / max(seconds, 1e-9), 2)
        if chunk_lines is not None:
            shutil.rmtree(_chunk_dir(out), ignore_errors=True)
    log.info("translate: %d file(s), %d lines (%d decoded) in %.1f s (%.1f sentences/s including start-up)",
             len(jobs), sum(len(x) for x in all_lines), n_decoded, seconds, n_decoded / max(seconds, 1e-9))
    return stats_list


def _source_lines(path: str | Path, column: int | None) -> list[str]:
    """The sentences to translate: every line of ``path``, or its ``column`` (a line without it is refused)."""
    lines = read_lines(path)
    if column is None:
        return lines
    out = []
    for n, line in enumerate(lines, 1):
        cols = line.split("\t")
        if column >= len(cols):
            raise InputError(str(path), f"has {len(cols)} column(s), the sentence to translate is column {column}",
                             line=n, hint="give the shard the column belongs to, or the right --column")
        out.append(cols[column])
    return out


def _chunk_dir(out: Path) -> Path:
    return out.with_name(f".{out.name}.chunks")


def _translate_chunks(dec: _Decoder, src_file: Path, out: Path, n_lines: int, hyps: list[str], keep: list[int],
                      pieces: list[list[str]], chunk_lines: int, st: dict[str, Any]) -> tuple[int, int]:
    """Fill ``hyps`` chunk by chunk, reusing the chunks a killed run finished; (resumed, total)."""
    cdir = _chunk_dir(out)
    settings = {**dec.settings(), "source_sha256": sha256_file(src_file), "chunk_lines": chunk_lines,
                "lines": n_lines, "column": st.get("column")}
    meta = cdir / "settings.json"
    if cdir.exists() and (not meta.exists() or json.loads(meta.read_text(encoding="utf-8")) != settings):
        log.warning("translate: %s holds chunks of another model, source or settings; translating again", cdir)
        shutil.rmtree(cdir)
    cdir.mkdir(parents=True, exist_ok=True)
    write_text(meta, json.dumps(settings, sort_keys=True) + "\n")
    by_line = dict(zip(keep, pieces))
    n_chunks = max(1, -(-n_lines // chunk_lines))
    resumed = 0
    for c in range(n_chunks):
        lo, hi = c * chunk_lines, min(n_lines, (c + 1) * chunk_lines)
        path = cdir / f"{c:06d}.txt"
        idx = [i for i in range(lo, hi) if i in by_line]
        if path.exists():
            got = path.read_text(encoding="utf-8").split("\n")[:-1]
            if len(got) == hi - lo:
                hyps[lo:hi] = got
                resumed += 1
                continue
            log.warning("translate: %s has %d lines, not %d (torn); translating that chunk again", path, len(got),
                        hi - lo)
        decoded = dict(zip(idx, dec.decode([by_line[i] for i in idx], out.with_name(out.name + ".log"), [st])))
        chunk = [one_line(decoded.get(i, "")) for i in range(lo, hi)]
        write_text(path, "".join(h + "\n" for h in chunk))
        hyps[lo:hi] = chunk
        log.info("translate: %s chunk %d/%d (lines %d-%d) done", out, c + 1, n_chunks, lo + 1, hi)
    return resumed, n_chunks


def score_bleu(hyp_file: str | Path, ref_file: str | Path, *, lang: str = "en") -> dict[str, Any]:
    """Detokenised sacreBLEU, tokenised (multi-bleu.perl) BLEU and sacreBLEU's chrF of one hypothesis file.

    ``lang`` is the target language (Moses tokenizer rules). The tokenised score is Moses-tokenised
    hypothesis and reference (sacremoses, no escaping), then BLEU over whitespace tokens, case-
    sensitive, no smoothing, as ``multi-bleu.perl`` without ``-lc``. chrF: ``CHRF()`` (character
    n-grams up to 6, no word n-grams, beta 2), ``chrf`` and ``chrf_signature``.
    """
    from sacrebleu.metrics import BLEU, CHRF

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
    chrf = CHRF()
    c = chrf.corpus_score(hyps, [refs])
    return {"bleu": s.score, "signature": str(sacre.get_signature()),
            "chrf": c.score, "chrf_signature": str(chrf.get_signature()),
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
           *([f"  chrF {r['chrf']:.2f}  chrF signature: {r.get('chrf_signature', '?')}"]
             if "chrf" in r else []),  # reports written before chrF have none
           f"  hypotheses {r.get('hyp_file', '?')}  reference {r.get('ref_file', '?')}"]
    if "src" in r:
        out.append(f"  source {r['src']}  (empty {r.get('empty_sources', 0)}, truncated "
                   f"{r.get('truncated_sources', 0)}; {r.get('call_seconds', '?')} s for "
                   f"{r.get('files_in_call', 1)} file(s) in one call)")
    return out


def write_bleu_report(path: str | Path, test: Mapping[str, Any], dev: Mapping[str, Any] | None,
                      extra: Mapping[str, Mapping[str, Any]], meta: Mapping[str, Any]) -> Path:
    """The BLEU report: first line the test sacreBLEU alone (``12.34``), then details (chrF among them);
    plus a JSON sidecar (``path`` with suffix ``.json``) holding the same numbers. Returns the sidecar's path."""
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
    chrf = {"chrf": round(float(test["chrf"]), 2)} if "chrf" in test else {}
    obj = {"bleu": round(float(test["bleu"]), 2), **chrf, "test": dict(test),
           "dev": dict(dev) if dev is not None else None,
           "extra": {k: dict(v) for k, v in extra.items()}, "meta": dict(meta)}
    for target, text in ((sidecar, json.dumps(obj, indent=1, sort_keys=True) + "\n"), (path, "\n".join(lines) + "\n")):
        part = target.with_name(target.name + ".part")
        part.write_text(text, encoding="utf-8")
        part.replace(target)
    return sidecar


__all__ = ["parse_hypotheses", "score_bleu", "translate", "translate_files", "write_bleu_report"]
