"""Subcommands of the scoring stage: ``score``, ``mine``, ``select``, ``export-filtered`` and
``composition`` (what each selection is made of). Listed in :data:`marginmine.cli.main.COMMAND_MODULES`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from marginmine.cli import values as domain
from marginmine.cli.options import (
    ALLOW_EMPTY_HELP,
    Handlers,
    add_filter_settings,
    add_knn,
    add_scorers,
    add_seed,
    column_pair,
    index_spec,
    scorer_spec,
    torch_threads,
)
from marginmine.defaults import BATCH_SIZE
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")


def score_settings(args: argparse.Namespace, batch_size: int | None = None):
    from marginmine.scoring import parse_scorers
    from marginmine.scoring.files import ScoreSettings

    kinds = parse_scorers(scorer_spec(args))
    extra = {} if batch_size is None else {"batch_size": batch_size}
    return ScoreSettings(tuple(kinds.items()), index=index_spec(args), **extra)


def cli_encoder(args: argparse.Namespace):
    from marginmine.encoders.base import load_encoder

    if not args.encoder:
        raise MarginmineError("give --encoder DIR (or precomputed --src-embeddings/--tgt-embeddings)")
    return load_encoder(args.encoder, args.device)


def _check_heads(settings, identity: str | None, what: str) -> None:  # noqa: ANN001
    from marginmine.scoring.heads import check_fitted_on

    for name, kind in settings.scorers:
        check_fitted_on(name, kind, identity, what)


def cmd_score(args: argparse.Namespace) -> int:
    from marginmine.scoring.files import ArrayEmbeddings, EncoderEmbeddings, score_file

    torch_threads(args.threads)
    settings = score_settings(args, args.batch_size)
    if args.src_embeddings or args.tgt_embeddings:
        if not (args.src_embeddings and args.tgt_embeddings):
            raise MarginmineError("give both --src-embeddings and --tgt-embeddings")
        if bool(args.src_translated) != bool(args.tgt_translated):
            raise MarginmineError("give both --src-translated and --tgt-translated (or neither)")
        emb = ArrayEmbeddings.load(args.src_embeddings, args.tgt_embeddings, args.src_translated, args.tgt_translated)
        ident = {"embeddings": [args.src_embeddings, args.tgt_embeddings]}
        from marginmine.encoders.embed import embeddings_identity

        _check_heads(settings, embeddings_identity([args.src_embeddings, args.tgt_embeddings,
                                                    *filter(None, [args.src_translated, args.tgt_translated])]),
                     f"--src-embeddings {args.src_embeddings}")
        if args.src_translated:
            ident["translated"] = [args.src_translated, args.tgt_translated]
    elif args.src_translated or args.tgt_translated:
        raise MarginmineError("--src-translated/--tgt-translated go with --src-embeddings/--tgt-embeddings "
                              "(precomputed embeddings of the input and of its translations)")
    else:
        from marginmine.encoders.base import encoder_identity, read_manifest

        emb = EncoderEmbeddings(cli_encoder(args), args.src_lang, args.tgt_lang)
        ident = {"encoder": read_manifest(args.encoder, verify=False)["sha256"],
                 "langs": [args.src_lang, args.tgt_lang]}
        _check_heads(settings, encoder_identity(args.encoder), f"--encoder {args.encoder}")
    n = score_file(args.input, args.output, emb, settings, tuple(args.columns), ident, args.allow_empty,
                   args.baseline, args.seed)
    log.info("scored %d pairs -> %s (columns: %s)%s", n, args.output, ", ".join(settings.names),
             f"; noise baseline -> {args.baseline}" if args.baseline else "")
    return 0


def cmd_mine(args: argparse.Namespace) -> int:
    from marginmine.preprocess.pipeline import PreprocessSettings
    from marginmine.scoring.mining import Sentences, check_pairs, embed_unique, mine_arrays, write_mined

    settings = None if args.no_checks else PreprocessSettings(  # refused values fail before any work
        args.src_lang, args.tgt_lang, args.min_tokens, args.max_tokens, args.max_overlap, args.max_ratio,
        not args.no_langid, args.langid_min_prob, args.langid_model)
    torch_threads(args.threads)
    spec = index_spec(args)
    src, tgt = Sentences.read_file(args.src), Sentences.read_file(args.tgt)
    log.info("%s: %d distinct sentences of %d lines; %s: %d of %d", args.src, len(src.texts), src.read,
             args.tgt, len(tgt.texts), tgt.read)
    encoder = cli_encoder(args)
    x = embed_unique(encoder, src.texts, args.src_lang)
    y = embed_unique(encoder, tgt.texts, args.tgt_lang)
    mined = mine_arrays(x, y, args.k, args.margin, args.retrieval, spec)
    keep, ledger = check_pairs(mined, src, tgt, settings, args.threshold)
    n = write_mined(args.output, mined, keep, src, tgt)
    if args.ledger:
        ledger.write(args.ledger, Path(args.ledger).with_suffix(".tsv"))
    print(ledger.summary(), file=sys.stderr)
    log.info("mined %d pairs (%s retrieval, %s margin, k=%d) -> %s",
             n, args.retrieval, args.margin, args.k, args.output)
    return 0


def cmd_export_filtered(args: argparse.Namespace) -> int:
    from marginmine.scoring.export import export_filtered

    try:
        si, ti = (int(c) for c in args.columns.split(","))
    except ValueError as exc:
        raise MarginmineError(f"--columns: give two 0-based numbers, e.g. 2,3 (got {args.columns!r})") from exc
    n = export_filtered(args.selection, args.tsv, args.src, args.tgt, (si, ti))
    log.info("exported %d pairs to %s, %s, %s", n, args.tsv, args.src, args.tgt)
    return 0


def cmd_select(args: argparse.Namespace) -> int:
    from marginmine.io.sizes import parse_count
    from marginmine.scoring.selection import Source, select

    if args.scores and len(args.scores) != len(args.pairs):
        raise MarginmineError(f"--scores has {len(args.scores)} files for {len(args.pairs)} --pairs files")
    if args.method in ("random", "unfiltered"):
        sources = [Source(Path(p), None) for p in args.pairs]
    else:
        if not args.scores:
            raise MarginmineError(f"method {args.method} needs --scores (files with a column named {args.method})")
        sources = [Source(Path(p), Path(s)) for p, s in zip(args.pairs, args.scores)]
    n = parse_count(args.n) if args.n else None
    report = select(sources, args.output, args.method, n, args.threshold, args.seed)
    if args.report:
        report.write(args.report)
    return 0


def cmd_composition(args: argparse.Namespace) -> int:
    from marginmine.evaluate.composition import (
        Composition,
        count_groups,
        group_density,
        iter_selection_ids,
        read_groups,
        selection_name,
        write_composition,
    )
    from marginmine.io.items import items_path, write_items

    groups = read_groups(args.labels)
    rows, items = [], []
    names = groups.group_names()
    for path in args.selections:
        method, n = selection_name(path)
        ids = list(iter_selection_ids(path))
        rows.append(Composition(method, n, count_groups(ids, groups)))
        items += [(method, n, names[c], i) for i, c in zip(ids, groups.group_codes(ids).tolist())]
    # each selected pair and its group: the claims' test of two selections' shares (marginmine.evaluate.paired)
    write_items(items_path(args.tsv), ("method", "N", "group", "item"), items)
    if bool(args.pairs) != bool(args.scores) or (args.scores and not args.density_tsv):
        raise MarginmineError("give --pairs and --scores together, with --density-tsv (or neither: --density-tsv "
                              "alone writes an empty table)")
    density = (group_density(args.pairs, args.scores, groups, args.margin, args.margin_column, args.cosine_column)
               if args.scores else [])
    write_composition(rows, args.tsv, args.md, args.title, density, args.density_tsv)
    log.info("composition of %d selections -> %s", len(rows), args.md)
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("score", help="margin-score given pairs in batches (filtering mode)")
    p.add_argument("--input", nargs="+", required=True, metavar="FILE",
                   help="a TSV (source and target in --columns) or two line-aligned files; .gz allowed")
    p.add_argument("--columns", type=column_pair, default=(0, 1), help="0-based source,target columns (default 0,1)")
    p.add_argument("--output", required=True,
                   help="a header naming the scorers, then one line per input line: their scores (.gz allowed)")
    p.add_argument("--encoder", default=None, help="encoder directory (or give precomputed embeddings)")
    p.add_argument("--src-embeddings", default=None, help=".npy of the source side, line-aligned with --input")
    p.add_argument("--tgt-embeddings", default=None, help=".npy of the target side")
    p.add_argument("--src-translated", default=None,
                   help=".npy: the source side translated into the target language, embedded (vote kinds)")
    p.add_argument("--tgt-translated", default=None,
                   help=".npy: the target side translated into the source language, embedded (vote kinds)")
    p.add_argument("--src-lang", default="en",
                   help="the source side's language code, given to --encoder "
                        "(unused with precomputed embeddings)")
    p.add_argument("--tgt-lang", default="de",
                   help="the target side's language code, given to --encoder "
                        "(unused with precomputed embeddings)")
    add_scorers(p)
    p.add_argument("--batch-size", type=domain.COUNT, default=BATCH_SIZE,
                   help="pairs per kNN batch (paper 5M, the default); scores depend on it, nothing else")
    p.add_argument("--allow-empty", action="store_true", help=ALLOW_EMPTY_HELP)
    p.add_argument("--baseline", default=None, metavar="FILE",
                   help="also write the noise baseline here: each batch re-paired at random (seeded by --seed and "
                        "the batch's first line), scored by every scorer against the batch's neighbourhoods, in "
                        "the score file's columns (.gz allowed); `marginmine clean-share` reads it")
    add_seed(p, "the baseline's seed (default %(default)s)")
    add_knn(p, k=False)
    handlers["score"] = cmd_score

    p = sub.add_parser("mine", help="mine parallel sentences from two monolingual files")
    p.add_argument("--src", required=True, help="source-language text, one sentence per line (.gz allowed)")
    p.add_argument("--tgt", required=True, help="target-language text, one sentence per line (.gz allowed)")
    add_filter_settings(p, protect=False)
    p.add_argument("--encoder", required=True, help="encoder directory (with encoder.json)")
    p.add_argument("--margin", default="ratio", choices=["absolute", "distance", "ratio", "eq9", "eq10"],
                   help="margin function of the score: absolute (the cosine), distance, ratio, eq9 or eq10")
    p.add_argument("--retrieval", default="max", choices=["fwd", "bwd", "intersect", "max"],
                   help="candidates: each source's best (fwd), each target's best (bwd), the pairs both "
                        "agree on (intersect), or both, one pair per sentence by descending score (max)")
    p.add_argument("--threshold", type=domain.FINITE, default=None, help="keep pairs scoring at least this")
    p.add_argument("--output", required=True, help="TSV sorted by score: src, tgt, score, src_line, tgt_line")
    p.add_argument("--ledger", default=None, help="JSON ledger of removed candidates (a .tsv beside it)")
    p.add_argument("--no-checks", action="store_true", help="skip the language-id / length / copy / ratio checks")
    add_knn(p)
    handlers["mine"] = cmd_mine

    p = sub.add_parser("select", help="top-N (or threshold) pairs over all shards for one method")
    p.add_argument("--pairs", nargs="+", required=True, help="shard TSVs (src, tgt, ...)")
    p.add_argument("--scores", nargs="*", default=[], help="score files, one per shard, same order")
    p.add_argument("--method", required=True,
                   help="a scorer: the name of a score-file column (e.g. ratio, cosine); or random, unfiltered")
    p.add_argument("-n", default=None, help="how many pairs: 500, 20k, 10M")
    p.add_argument("--threshold", type=domain.FINITE, default=None, help="instead of -n: keep scores >= this")
    add_seed(p, "seed of the random method (default %(default)s)")
    p.add_argument("--output", required=True, help="TSV: src, tgt, score, further shard columns")
    p.add_argument("--report", default=None, help="JSON: counts, threshold, score histogram")
    handlers["select"] = cmd_select

    p = sub.add_parser("export-filtered", help="a selection as the corpus' own TSV columns + score, and aligned text")
    p.add_argument("--selection", required=True, help="TSV written by select (src, tgt, score, carried columns)")
    p.add_argument("--columns", default="0,1", help="the corpus TSV's 0-based source,target columns (default 0,1)")
    p.add_argument("--tsv", required=True, help="output TSV: the corpus' columns in order, the score last")
    p.add_argument("--src", required=True, help="output: source sentences, one per line")
    p.add_argument("--tgt", required=True, help="output: target sentences, line-aligned with --src")
    handlers["export-filtered"] = cmd_export_filtered

    p = sub.add_parser("composition", help="what each selection is made of, by the corpus' pair labels")
    p.add_argument("--labels", required=True, help="sidecar TSV: id, origin, kind, clean (the demo corpus')")
    p.add_argument("--selections", nargs="+", required=True, help="select's <method>.<N>.tsv.gz files")
    p.add_argument("--pairs", nargs="*", default=None, help="the preprocessed shards (pair id in column 3)")
    p.add_argument("--scores", nargs="*", default=None, help="their score files, in shard order")
    p.add_argument("--margin", choices=("ratio", "distance", "absolute"), default="ratio",
                   help="the kind of --margin-column (absolute: no neighbourhood to recover)")
    p.add_argument("--margin-column", default="ratio", help="score-file column of a margin scorer")
    p.add_argument("--cosine-column", default="cosine", help="score-file column of a cosine scorer (same encoder)")
    p.add_argument("--density-tsv", default=None, help="per group: pairs, share, mean cosine, mean kNN similarity")
    p.add_argument("--tsv", required=True, help="output: one row per selection and group: method, N, group, "
                                                 "pairs, share")
    p.add_argument("--md", required=True,
                   help="output: Markdown table of each group's share (%%) per selection")
    p.add_argument("--title", default="", help="appended to the Markdown heading")
    handlers["composition"] = cmd_composition
