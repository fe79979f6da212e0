"""Subcommands that evaluate the scorers: ``bucc-data``, ``eval-mining`` (the BUCC-style mining
benchmark), ``fit-scorer`` (a fitted kind's head), ``vote-report`` and ``eval-similarity``.
Listed in :data:`marginmine.cli.main.COMMAND_MODULES`."""

from __future__ import annotations

import argparse
import json
import logging

from marginmine.cli import values as domain
from marginmine.cli.options import (
    Handlers,
    add_device,
    add_knn,
    add_scorers,
    add_seed,
    encoder_dirs,
    load_encoders,
    named_scorers,
    scorer_spec,
    torch_threads,
)
from marginmine.defaults import (
    BUCC_DISTRACTORS,
    BUCC_MONO_MAX,
    BUCC_SHARE,
    HEAD_POSITIVES,
    HEAD_POSITIVES_SIZE,
    POSITIVE_SOURCES,
    K,
)
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")


def cmd_bucc_data(args: argparse.Namespace) -> int:
    from marginmine.evaluate.bucc import build_benchmark
    from marginmine.io.text import read_lines

    def pairs(items: list[str]) -> list[tuple[str, str]]:
        out = []
        for item in items:
            a, _, b = item.partition(",")
            if not b:
                raise MarginmineError(f"--gold-train/--gold-test take SRC,TGT file pairs, got {item!r}")
            out.append((a, b))
        return out

    mono_src = [t for p in args.mono_src for t in read_lines(p)]
    mono_tgt = [t for p in args.mono_tgt for t in read_lines(p)]
    summary = build_benchmark({"train": pairs(args.gold_train), "test": pairs(args.gold_test)}, mono_src, mono_tgt,
                              args.output_dir, args.share, args.distractors, args.seed, args.mono_max)
    for split in ("train", "test"):
        s = summary[split]
        log.info("%s: %d src, %d tgt sentences, %d gold pairs (%.1f%%)", split, s["src"], s["tgt"], s["gold"],
                 100 * s["gold_share_src"])
    return 0


def cmd_eval_mining(args: argparse.Namespace) -> int:
    from marginmine.evaluate.bucc import evaluate, write_table

    torch_threads(args.threads)
    dirs = encoder_dirs(args)
    scorers = named_scorers(args, dirs)
    encoders = load_encoders(dirs, args, {e for e, _ in scorers.values()})
    translated = {}
    for item in args.translated:
        key, sep, path = item.partition("=")
        if not sep or key not in {f"{sp}.{side}" for sp in ("train", "test") for side in ("src", "tgt")}:
            raise MarginmineError(f"--translated {item!r}: give SPLIT.SIDE=FILE, e.g. test.src=test.src.de")
        translated[key] = path
    rows, cannot = evaluate(encoders, scorers, args.data, args.src_lang, args.tgt_lang, K, translated)
    title = f"BUCC-style mining, {args.src_lang}-{args.tgt_lang} (test split; thresholds from train)"
    write_table(rows, args.tsv, args.md, title, cannot)
    for r in rows:
        log.info("%s (%s)/%s: P %.1f R %.1f F1 %.1f", r.scorer, r.encoder, r.retrieval, 100 * r.precision,
                 100 * r.recall, 100 * r.f1)
    return 0


def cmd_fit_scorer(args: argparse.Namespace) -> int:
    from marginmine.scoring import parse_scorers
    from marginmine.scoring.heads import Positives, fit_head

    torch_threads(args.threads)
    kinds = parse_scorers(scorer_spec(args))
    if args.name not in kinds:
        raise MarginmineError(f"--name {args.name}: not among --scorers ({', '.join(kinds)})")
    exclude: list[tuple[str, str]] = []
    if args.exclude_pairs:
        from marginmine.evaluate.filtereval import read_paracrawl_eval

        labelled = read_paracrawl_eval(args.exclude_pairs)
        exclude = list(zip(labelled.src, labelled.tgt))
    fit_head(args.name, kinds[args.name], args.encoder, args.held_out, args.src_lang, args.tgt_lang, args.output,
             protect=args.protect, encoder_data=args.encoder_data, seed=args.seed, device=args.device,
             corpus=args.corpus, exclude=exclude,
             positives=Positives(args.positives, args.positives_size, tuple(args.positives_files)),
             encoder_trained=not args.pretrained)
    return 0


def _named_files(items: list[str], flag: str) -> dict[str, list[str]]:
    """``NAME=FILE[,FILE...]`` items -> {NAME: [FILE, ...]} (repeated names extend)."""
    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, files = item.partition("=")
        if not sep or not name or not files:
            raise MarginmineError(f"{flag} {item!r}: give NAME=FILE[,FILE...]")
        out.setdefault(name, []).extend(files.split(","))
    return out


def cmd_vote_report(args: argparse.Namespace) -> int:
    from marginmine.encoders.base import load_encoder
    from marginmine.evaluate.votereport import VoteSet, corpus_sizes, intrinsic_rows, translator_rows, write_report

    torch_threads(args.threads)
    if not (args.set or args.translator or args.scores):
        raise MarginmineError("vote-report: nothing to report; give --set, --translator or --scores")
    sets = []
    for item in args.set:
        parts = item.split(",")
        if len(parts) != 5:
            raise MarginmineError(f"--set {item!r}: give NAME,SRC,TGT,SRC_TRANSLATED,TGT_TRANSLATED")
        sets.append(VoteSet(*parts))
    intrinsic = intrinsic_rows(load_encoder(args.encoder, args.device), sets, args.src_lang, args.tgt_lang, args.k) \
        if sets else []
    bleu = {d: f[0] for d, f in _named_files(args.translator, "--translator").items()}
    write_report(translator_rows(bleu, _named_files(args.stats, "--stats")), intrinsic,
                 corpus_sizes(_named_files(args.scores, "--scores")), args.tsv, args.md, args.title)
    for r in intrinsic:
        log.info("%s / %s: P %.3f R %.3f F1 %.3f", r["set"], r["rule"], r["precision"], r["recall"], r["f1"])
    return 0


def cmd_eval_similarity(args: argparse.Namespace) -> int:
    """A learned similarity (a scorer whose kind has ``pair_matrix``, e.g. mlp) as the retrieval
    score of the intrinsic sets, all n x n pairs; the eval-encoder JSON format."""
    from pathlib import Path as P

    from marginmine.encoders.base import load_encoder
    from marginmine.encoders.intrinsic import GoldSet, evaluate_similarity
    from marginmine.io.safe import write_text

    torch_threads(args.threads)
    dirs = encoder_dirs(args)
    scorers = named_scorers(args, dirs)
    if args.name not in scorers:
        raise MarginmineError(f"--name {args.name}: not among --scorers ({', '.join(scorers)})")
    enc_name, kind = scorers[args.name]
    if not callable(getattr(kind, "pair_matrix", None)):
        raise MarginmineError(f"scorer {args.name}: its kind has no pair_matrix (a similarity of every pair)")
    sets = [GoldSet(name, sl, tl, P(a), P(b), k) for name, k, sl, tl, a, b in (item.split(",") for item in args.set)]
    rows = evaluate_similarity(load_encoder(dirs[enc_name], args.device), sets, kind.pair_matrix,  # type: ignore[attr-defined]
                               args.src_lang, label=args.label, seed=args.seed)
    write_text(args.output, json.dumps({"encoder": f"{args.name} ({enc_name})", "dir": dirs[enc_name], "info": {},
                                        "rows": rows}, indent=1) + "\n")
    for r in rows:
        log.info("%s %s: %.1f%% / %.1f%% (avg %.1f%%)", args.name, r["set"], r["err_src2tgt"], r["err_tgt2src"],
                 r["err_avg"])
    return 0


def _held_out(text: str):  # noqa: ANN202 - a HeldOut; its module (numpy) is imported when a value is read
    """``SL,TL,SRC,TGT``: a :class:`marginmine.scoring.heads.HeldOut` (fit-scorer --held-out, --positives-files)."""
    from marginmine.scoring.heads import HeldOut

    return HeldOut.parse(text)


def _corpus_shard(text: str):  # noqa: ANN202 - a CorpusShard, imported as _held_out's
    """``TSV,SRC_NPY,TGT_NPY``: a :class:`marginmine.scoring.heads.CorpusShard` (fit-scorer --corpus)."""
    from marginmine.scoring.heads import CorpusShard

    return CorpusShard.parse(text)


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("bucc-data", help="build the BUCC-style mining benchmark from real text")
    p.add_argument("--gold-train", nargs="+", required=True, metavar="SRC,TGT",
                   help="line-aligned source,target files: the train split's gold pairs and distractors")
    p.add_argument("--gold-test", nargs="+", required=True, metavar="SRC,TGT",
                   help="line-aligned source,target files: the test split's gold pairs and distractors")
    p.add_argument("--mono-src", nargs="+", required=True,
                   help="source-language text files: the unpaired lines of the source pools")
    p.add_argument("--mono-tgt", nargs="+", required=True,
                   help="target-language text files: the unpaired lines of the target pools")
    p.add_argument("--share", type=domain.SHARE, default=BUCC_SHARE, help="gold share of each pool (BUCC: 2-3%%)")
    p.add_argument("--distractors", type=domain.COUNT0, default=BUCC_DISTRACTORS,
                   help="unpaired gold-domain lines per side")
    p.add_argument("--mono-max", type=domain.COUNT0, default=BUCC_MONO_MAX,
                   help="the first this many distinct monolingual lines per side (0 = all; half per split)")
    add_seed(p, "which gold pairs and distractors are drawn, and the pools' order "
             "(default %(default)s)")
    p.add_argument("--output-dir", required=True,
                   help="where train/test .src, .tgt, .gold (1-based line pairs) and summary.json "
                        "are written")
    handlers["bucc-data"] = cmd_bucc_data

    p = sub.add_parser("eval-mining", help="P/R/F1 of every scorer x retrieval on the BUCC-style benchmark")
    p.add_argument("--encoder", nargs="+", action="extend", required=True, metavar="NAME=DIR",
                   help="an encoder the scorers name; repeatable")
    add_scorers(p)
    p.add_argument("--data", required=True, help="directory written by bucc-data")
    p.add_argument("--translated", nargs="*", default=[], metavar="SPLIT.SIDE=FILE",
                   help="the pools translated into the other language, line for line (vote scorers): "
                        "train.src=F train.tgt=F test.src=F test.tgt=F")
    p.add_argument("--src-lang", required=True, help="language code of the benchmark's source pools")
    p.add_argument("--tgt-lang", required=True, help="language code of the benchmark's target pools")
    p.add_argument("--tsv", required=True,
                   help="output: one row per scorer and retrieval: P, R, F1 on test at the threshold "
                        "from train")
    p.add_argument("--md", required=True, help="output: the same as a Markdown table")
    add_knn(p, k=False)
    handlers["eval-mining"] = cmd_eval_mining

    p = sub.add_parser("fit-scorer", help="fit a fitted score kind's head (e.g. calibrated) on its positives "
                                            "(--positives), checked on held-out pairs")
    add_scorers(p, default=None)
    p.add_argument("--name", required=True, help="the scorer (of --scorers) to fit")
    p.add_argument("--encoder", required=True, help="the encoder directory whose embeddings it scores")
    p.add_argument("--held-out", nargs="+", required=True, type=_held_out, metavar="SL,TL,SRC,TGT",
                   help="held-out clean pairs that check the fit: languages and two aligned files; repeatable")
    p.add_argument("--positives", choices=POSITIVE_SOURCES, default=HEAD_POSITIVES,
                   help="the fit's positives: a sample of the encoder's training pairs (--encoder-data), "
                        "--positives-files, or the held-out pairs (default %(default)s)")
    p.add_argument("--positives-size", type=domain.COUNT0, default=HEAD_POSITIVES_SIZE,
                   help="positive pairs sampled (seeded) from the encoder data or files; 0 = all "
                        "(default %(default)s)")
    p.add_argument("--positives-files", nargs="*", default=[], type=_held_out, metavar="SL,TL,SRC,TGT",
                   help="clean parallel files the positives come from (with --positives files)")
    p.add_argument("--src-lang", required=True, help="the corpus' source language (pairs are oriented to it)")
    p.add_argument("--tgt-lang", required=True, help="the corpus' target language")
    p.add_argument("--protect", nargs="*", default=[], help="sets no held-out pair may share a side with")
    p.add_argument("--encoder-data", default=None, help="the encoder's training-data manifest.json (its pairs "
                                                         "are not held out)")
    p.add_argument("--pretrained", action="store_true",
                   help="the encoder did not train on --encoder-data (a pre-trained kind): its pairs stay in the "
                        "held-out pairs and the positives files; --encoder-data only gives encoder_data positives")
    p.add_argument("--corpus", nargs="*", default=[], type=_corpus_shard, metavar="TSV,SRC_NPY,TGT_NPY",
                   help="the corpus' shards and their embeddings (kinds whose negatives come from the corpus)")
    p.add_argument("--exclude-pairs", default=None, help="a human-labelled evaluation TSV (ParaCrawl format): "
                                                          "its pairs are never negatives")
    add_seed(p, "seed of the fit and of the choice of corpus negatives (default %(default)s)")
    add_device(p, "CPU threads for the encoder and FAISS")
    p.add_argument("--output", required=True, help="the head's directory")
    handlers["fit-scorer"] = cmd_fit_scorer

    p = sub.add_parser("vote-report", help="translate-then-vote: translators' BLEU and speed, intrinsic P/R/F1, "
                                          "voted-set sizes")
    p.add_argument("--encoder", required=True, help="the vote scorers' encoder directory")
    p.add_argument("--set", action="append", default=[], metavar="NAME,SRC,TGT,SRC_TRANSLATED,TGT_TRANSLATED",
                   help="an intrinsic set oriented src->tgt and both sides' translations; repeatable")
    p.add_argument("--translator", nargs="*", default=[], metavar="DIRECTION=BLEU_JSON",
                   help="a translator's evaluate JSON (dev and test BLEU) by direction, e.g. en-de=FILE")
    p.add_argument("--stats", nargs="*", default=[], metavar="DIRECTION=STATS_JSON[,...]",
                   help="translate --stats files of the corpus shards")
    p.add_argument("--scores", nargs="*", default=[], metavar="SCORER=FILE[,...]",
                   help="a vote scorer's shard score files")
    p.add_argument("-k", type=domain.K, default=K,
                   help="neighbours per sentence of the intrinsic sets' ratio margin (default %(default)s)")
    p.add_argument("--src-lang", required=True, help="language code of the sets' source side")
    p.add_argument("--tgt-lang", required=True, help="language code of the sets' target side")
    p.add_argument("--title", default="Translate-then-vote", help="the Markdown report's heading")
    p.add_argument("--tsv", required=True,
                   help="output: one line per row: its section (translators, intrinsic, corpus), a tab, "
                        "the row as JSON")
    p.add_argument("--md", required=True, help="output: the three sections as Markdown tables")
    add_device(p, "CPU threads for the encoder and FAISS")
    handlers["vote-report"] = cmd_vote_report

    p = sub.add_parser("eval-similarity", help="intrinsic retrieval error with a learned similarity (e.g. mlp) "
                                              "over all n x n pairs")
    p.add_argument("--encoder", nargs="+", action="extend", required=True, metavar="NAME=DIR",
                   help="an encoder the scorers name; repeatable")
    add_scorers(p)
    p.add_argument("--name", required=True, help="the scorer whose similarity retrieves")
    p.add_argument("--set", action="append", required=True, metavar="NAME,KIND,SRC_LANG,TGT_LANG,SRC,TGT",
                   help="a gold set; KIND is tatoeba or alignment; repeatable")
    p.add_argument("--src-lang", required=True, help="the language of the similarity's first input")
    p.add_argument("--label", default="similarity", help="the margin column's name in the report")
    add_seed(p, "seed of the shuffle of an alignment set's candidates (default %(default)s)")
    add_device(p, "CPU threads for the encoder")
    p.add_argument("--output", required=True, help="JSON (eval-encoder's format)")
    handlers["eval-similarity"] = cmd_eval_similarity
