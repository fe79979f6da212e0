"""Subcommands of the NMT stage (issue #5): ``train-nmt``, ``evaluate``; translate-then-vote's
``translator-data`` and ``translate``. Listed in :data:`marginmine.cli.main.COMMAND_MODULES`."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from marginmine.cli import values as domain
from marginmine.cli.options import Handlers, add_seed
from marginmine.defaults import BEAM, CHUNK_LINES, DECODERS, DEFAULT_DECODER, ON_TIME_CAP, SEED
from marginmine.errors import MarginmineError
from marginmine.timecap import POLICIES

log = logging.getLogger("marginmine")


def _params(text: str | None) -> dict[str, Any]:
    """``--params``: a JSON object, inline or in a ``.json`` file."""
    if not text:
        return {}
    src = text
    if text.endswith(".json") and not text.lstrip().startswith("{"):
        try:
            src = Path(text).read_text(encoding="utf-8")
        except OSError as exc:
            raise MarginmineError(f"{text}: cannot read --params file ({exc.strerror or exc})") from exc
    try:
        params = json.loads(src)
    except json.JSONDecodeError as exc:
        raise MarginmineError(f"--params is not valid JSON ({exc}); e.g. '{{\"max_epoch\": 5}}'") from exc
    if not isinstance(params, dict):
        raise MarginmineError("--params must be a JSON object, e.g. '{\"max_epoch\": 5}'")
    return params


def cmd_train_nmt(args: argparse.Namespace) -> int:
    from marginmine.nmt.train import train_nmt

    params = _params(args.params)
    if args.arch:
        params["arch"] = args.arch
    out = train_nmt(args.train, args.dev_src, args.dev_ref, args.workdir, args.src_lang, args.tgt_lang, params,
                    threads=args.threads or 0, max_minutes=args.max_minutes, seed=args.seed,
                    on_time_cap=args.on_time_cap)
    print(out)
    return 0


def _extra(text: str) -> tuple[str, str, str]:
    parts = text.split(",")
    if len(parts) != 3 or not all(parts):
        raise argparse.ArgumentTypeError(f"expected NAME,SRC,REF (got {text!r})")
    return parts[0], parts[1], parts[2]


def cmd_evaluate(args: argparse.Namespace) -> int:
    from marginmine.machine import machine
    from marginmine.nmt.evaluate import score_bleu, translate_files, write_bleu_report
    from marginmine.nmt.train import load_manifest

    manifest = load_manifest(args.workdir, verify=True)
    tgt = manifest["tgt_lang"]
    sets: list[tuple[str, str, str]] = [("test", args.test_src, args.test_ref)]
    if bool(args.dev_src) != bool(args.dev_ref):
        raise MarginmineError("give both --dev-src and --dev-ref, or neither")
    if args.dev_src:
        sets.append(("dev", args.dev_src, args.dev_ref))
    sets += list(args.extra)
    names = [name for name, _, _ in sets]
    if len(set(names)) != len(names):
        raise MarginmineError(f"set names must be unique (got {', '.join(names)}; 'test' and 'dev' are taken)")
    out = Path(args.output)
    hyp_dir = Path(args.hyp_dir) if args.hyp_dir else out.with_name(out.stem + ".hyp")
    results: dict[str, dict[str, Any]] = {}
    hyps = [hyp_dir / f"{name}.{tgt}" for name, _, _ in sets]
    stats = translate_files(args.workdir, [(src, hyp) for (_, src, _), hyp in zip(sets, hyps)], beam=args.beam,
                            batch_size=args.batch_size, max_tokens=args.max_tokens, threads=args.threads or 0,
                            device=args.device, lenpen=args.lenpen, max_len_a=args.max_len_a,
                            max_len_b=args.max_len_b, decoder=args.decoder)
    for (name, _, ref), hyp, st in zip(sets, hyps, stats):
        results[name] = {**st, **score_bleu(hyp, ref, lang=tgt)}
        log.info("evaluate: %s sacreBLEU %.2f, tokenised BLEU %.2f, chrF %.2f", name, results[name]["bleu"],
                 results[name]["tok_bleu"], results[name]["chrf"])
    info = manifest["info"]
    p = manifest["params"]
    meta = {"workdir": str(args.workdir), "direction": f"{manifest['src_lang']}-{tgt}", "arch": manifest["arch"],
            "model_sizes": {k: p[k] for k in ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim",
                                              "encoder_attention_heads", "decoder_layers", "decoder_embed_dim")
                            if p.get(k) is not None},
            "train_tsv": info.get("train_tsv"), "train_pairs": info.get("train_pairs"),
            "bpe_vocab": info.get("bpe_vocab"), "epoch": info.get("epoch"), "num_updates": info.get("num_updates"),
            "averaged": info.get("averaged"), "dev_loss": info.get("dev_loss"),
            "stopped_by_time": info.get("stopped_by_time"), "early_stop": info.get("early_stop"),
            "time_cap": info.get("time_cap"),
            "train_seconds_total": info.get("train_seconds_total"), "seed": info.get("seed"),
            "train_machine": info.get("machine"), "machine": machine(),
            "decoding": {"decoder": args.decoder, "beam": args.beam, "lenpen": args.lenpen,
                         "max_len_a": args.max_len_a, "max_len_b": args.max_len_b}}
    write_bleu_report(out, results["test"], results.get("dev"),
                      {name: results[name] for name, _, _ in sets if name not in ("test", "dev")}, meta)
    log.info("evaluate: test sacreBLEU %.2f, chrF %.2f -> %s", results["test"]["bleu"], results["test"]["chrf"], out)
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    """One file (or one column of a shard) translated by a model of the expected direction,
    resumably in chunks; the stats (lines, empty sources and hypotheses, sentences/s) as JSON."""
    from marginmine.io.safe import write_text
    from marginmine.nmt.evaluate import translate_files
    from marginmine.nmt.train import load_manifest

    manifest = load_manifest(args.workdir, verify=False)
    have = (manifest["src_lang"], manifest["tgt_lang"])
    if have != (args.src_lang, args.tgt_lang):
        raise MarginmineError(f"translate: {args.workdir} translates {have[0]}>{have[1]}, not "
                              f"{args.src_lang}>{args.tgt_lang}: give the translator of that direction")
    stats = translate_files(args.workdir, [(args.input, args.output)], beam=args.beam, batch_size=args.batch_size,
                            threads=args.threads or 0, device=args.device, lenpen=args.lenpen,
                            max_len_a=args.max_len_a, max_len_b=args.max_len_b, chunk_lines=args.chunk_lines,
                            decoder=args.decoder, column=args.column)[0]
    if args.stats:
        write_text(args.stats, json.dumps(stats, indent=1, sort_keys=True) + "\n")
    log.info("translate: %d lines (%d empty sources, %d empty translations, kept as lines) -> %s; %.1f sentences/s",
             stats["lines"], stats["empty_sources"], stats["empty_hypotheses"], args.output,
             stats["call_sentences_per_s"])
    return 0


def cmd_translator_data(args: argparse.Namespace) -> int:
    from marginmine.nmt.translators import translator_pairs

    r = translator_pairs(args.encoder_data, args.src_lang, args.tgt_lang, args.output, args.report,
                         max_pairs=args.max_pairs, seed=args.seed)
    log.info("translator-data: %d %s>%s pairs (of %d) from %d data sets -> %s", r["pairs"], args.src_lang,
             args.tgt_lang, r["available"], len(r["sources"]), args.output)
    return 0


def _decoding_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=domain.Whole(1, 1000), default=BEAM, help="beam size")
    p.add_argument("--batch-size", type=domain.COUNT, default=64, help="sentences per decoding batch")
    p.add_argument("--lenpen", type=domain.Real(0, 10), default=1.0, help="length penalty of the beam search")
    p.add_argument("--max-len-a", type=domain.Real(0, 1000), default=1.5, help="hypothesis <= a * source pieces + b")
    p.add_argument("--max-len-b", type=domain.Whole(0, 1_000_000), default=10, help="the b of --max-len-a's bound")
    p.add_argument("--threads", type=domain.THREADS, default=None, help="CPU threads of the decoder")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (fails if no GPU is visible)")
    p.add_argument("--decoder", default=DEFAULT_DECODER, choices=DECODERS,
                   help="beam search by CTranslate2 (default; the checkpoint converted once) or fairseq-generate")


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("train-nmt", help="BPE + fairseq transformer on selected pairs, last checkpoints averaged")
    p.add_argument("--train", required=True, help="TSV (.gz allowed): source and target in the first two columns")
    p.add_argument("--dev-src", required=True, help="dev source (validation loss, early stopping)")
    p.add_argument("--dev-ref", required=True, help="dev reference, line-aligned with --dev-src")
    p.add_argument("--workdir", required=True, help="model directory (resumable; evaluate needs only it)")
    p.add_argument("--src-lang", required=True, help="source language code (first column of --train)")
    p.add_argument("--tgt-lang", required=True, help="target language code (second column of --train)")
    p.add_argument("--params", default=None, help="JSON object (inline or a .json file) of NMT params")
    p.add_argument("--arch", default=None, help="fairseq arch (overrides params' arch; default transformer)")
    p.add_argument("--threads", type=domain.THREADS, default=None, help="CPU threads (OMP/MKL, sentencepiece)")
    p.add_argument("--max-minutes", type=domain.MINUTES, default=None, help="wall-clock budget; rerunning continues")
    p.add_argument("--on-time-cap", choices=POLICIES, default=ON_TIME_CAP,
                   help="when --max-minutes ends training before its updates/epochs: error (rerun resumes) or "
                        "warn (the warning goes into the manifest, the BLEU report and every table built on it)")
    add_seed(p, "fairseq's training seed (default %(default)s)", default=1)
    handlers["train-nmt"] = cmd_train_nmt

    p = sub.add_parser("evaluate", help="beam-search test (and dev, extra) sets; sacreBLEU + tokenised BLEU")
    p.add_argument("--workdir", required=True, help="directory written by train-nmt")
    p.add_argument("--test-src", required=True, help="test source, one sentence per line")
    p.add_argument("--test-ref", required=True, help="test reference, line-aligned with --test-src")
    p.add_argument("--dev-src", default=None, help="dev source (with --dev-ref; optional)")
    p.add_argument("--dev-ref", default=None, help="dev reference, line-aligned with --dev-src")
    p.add_argument("--extra", type=_extra, nargs="*", default=[], metavar="NAME,SRC,REF",
                   help="further test sets, e.g. newstest2014,nt14.en,nt14.de")
    p.add_argument("--output", required=True, help="report: first line the test sacreBLEU (a .json beside it)")
    p.add_argument("--hyp-dir", default=None, help="hypotheses (default: OUTPUT without suffix + .hyp/)")
    p.add_argument("--max-tokens", type=domain.COUNT, default=None, help="source tokens per decoding batch")
    _decoding_args(p)
    handlers["evaluate"] = cmd_evaluate

    p = sub.add_parser("translate", help="translate a file (or a shard's column) with a trained model, resumably")
    p.add_argument("--workdir", required=True, help="the translator: a directory written by train-nmt")
    p.add_argument("--src-lang", required=True, help="the language of the input (checked against the model)")
    p.add_argument("--tgt-lang", required=True, help="the language to translate into (checked against the model)")
    p.add_argument("--input", required=True, help="one sentence per line, or a TSV with --column (.gz allowed)")
    p.add_argument("--column", type=domain.COLUMN, default=None, help="0-based column of a TSV input to translate")
    p.add_argument("--output", required=True, help="one translation per input line (.gz allowed); empty lines kept")
    p.add_argument("--stats", default=None, help="JSON: lines, empty sources/translations, sentences/s")
    p.add_argument("--chunk-lines", type=domain.COUNT, default=CHUNK_LINES,
                   help="lines per saved chunk: a killed run resumes at the first missing one (default %(default)s)")
    _decoding_args(p)
    handlers["translate"] = cmd_translate

    p = sub.add_parser("translator-data",
                       help="a translator's training TSV: the encoder data's pairs of one language pair")
    p.add_argument("--encoder-data", required=True, help="manifest.json of marginmine encoder-data")
    p.add_argument("--src-lang", required=True,
                   help="language code of the first column written (either column order in the data)")
    p.add_argument("--tgt-lang", required=True, help="language code of the second column written")
    p.add_argument("--output", required=True, help="TSV (.gz allowed): source, target")
    p.add_argument("--report", default=None, help="JSON: pairs per data set")
    p.add_argument("--max-pairs", type=domain.COUNT0, default=0, help="a uniform sample of this many pairs (0 = all)")
    add_seed(p, f"the sample's seed (the same rows for both directions; default {SEED}, the workflow's seed)")
    handlers["translator-data"] = cmd_translator_data
