"""Subcommands of the preprocessing stage: ``preprocess`` (the paper's filters), ``split`` (read,
deduplicate and deal the corpus to shards), ``ledger`` (the split's ledger chained with the shards')
and ``check-overlap`` (no corpus pair may share a side with a dev/test set)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from marginmine.cli import values as domain
from marginmine.cli.options import ALLOW_EMPTY_HELP, Handlers, add_filter_settings, column_pair
from marginmine.defaults import PREPROCESS_CACHE_MB
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")


def _add_input(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", nargs="+", required=True, metavar="FILE",
                   help="one TSV file (source and target in --columns, default 0,1; further columns "
                        "are carried through) or two line-aligned files (source, target); .gz allowed")
    p.add_argument("--columns", type=column_pair, default=(0, 1),
                   help="0-based source,target columns of a TSV input (ParaCrawl/BiCleaner: 2,3)")
    p.add_argument("--max-chars", type=domain.COUNT, default=10_000,
                   help="longer sides are rejected as too_long (default 10000)")


def _spec(args: argparse.Namespace):  # noqa: ANN202 - InputSpec, imported lazily
    from marginmine.preprocess.pipeline import InputSpec

    if len(args.input) > 2:
        raise MarginmineError("--input takes one TSV file or two aligned files")
    return InputSpec(tuple(args.input), tuple(args.columns))


def cmd_preprocess(args: argparse.Namespace) -> int:
    from marginmine.preprocess.leakage import protected_keys
    from marginmine.preprocess.pipeline import PreprocessSettings, preprocess

    settings = PreprocessSettings(
        args.src_lang, args.tgt_lang, args.min_tokens, args.max_tokens, args.max_overlap, args.max_ratio,
        not args.no_langid, args.langid_min_prob, args.langid_model, args.max_chars,
        protected_keys(args.protect))
    ledger = preprocess(_spec(args), args.output, args.rejects, args.ledger, settings,
                        dedup=not args.no_dedup, workers=args.workers, shard_size=args.shard_size,
                        dedup_mem_mb=args.dedup_mem_mb, tmpdir=args.tmpdir, allow_empty=args.allow_empty,
                        cache_mb=args.cache_mb)
    print(ledger.summary(), file=sys.stderr)
    return 0


def cmd_split(args: argparse.Namespace) -> int:
    from marginmine.preprocess.shard import shard_ids, split_corpus

    paths = [Path(args.outdir) / f"{args.prefix}{i}.tsv.gz" for i in shard_ids(args.shards)]
    split_corpus(_spec(args), paths, args.rejects, args.ledger, block=args.block,
                 max_chars=args.max_chars, dedup_mem_mb=args.dedup_mem_mb, tmpdir=args.tmpdir)
    return 0


def cmd_ledger(args: argparse.Namespace) -> int:
    from marginmine.preprocess.ledger import Ledger

    first = Ledger.read(args.first)
    later = Ledger()
    for p in args.shards:
        later.merge(Ledger.read(p))
    total = first.then(later) if args.shards else first
    total.write(args.output)
    print(total.summary(), file=sys.stderr)
    return 0


def cmd_check_overlap(args: argparse.Namespace) -> int:
    from marginmine.io.safe import write_text
    from marginmine.preprocess.leakage import overlap_report

    report = overlap_report(args.corpus, args.protect)
    write_text(args.output, json.dumps(report, indent=1) + "\n")
    bad = report.get("overlapping_pairs", 0)
    if bad:
        sets = ", ".join(f"{name} ({n})" for name, n in report["by_file"].items())
        raise MarginmineError(f"{', '.join(args.corpus)}: {bad} of {report['pairs']} pairs have a side in a "
                              f"protected dev/test set: {sets}; first at {report['examples'][0]} "
                              f"(details in {args.output}); remove them before training")
    log.info("no overlap: %d pairs checked against %d protected files", report["pairs"], len(args.protect))
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    """``preprocess``, ``split``, ``ledger``, ``check-overlap``."""
    p = sub.add_parser("preprocess", help="the paper's preprocessing: dedup, langid, length, overlap, ratio")
    _add_input(p)
    add_filter_settings(p)
    p.add_argument("--output", required=True, help="kept pairs (TSV; .gz allowed)")
    p.add_argument("--rejects", required=True, help="removed pairs: line, step, reason, source, target, ...")
    p.add_argument("--ledger", required=True, help="ledger JSON (a .tsv is written beside it)")
    p.add_argument("--no-dedup", action="store_true", help="skip exact dedup (input already deduplicated)")
    p.add_argument("--shard-size", type=domain.COUNT, default=None,
                   help="split kept pairs into files of this many pairs (OUTPUT.00000.tsv, ...)")
    p.add_argument("--workers", type=domain.THREADS, default=1, help="filter processes (default 1)")
    p.add_argument("--cache-mb", type=domain.COUNT0, default=PREPROCESS_CACHE_MB,
                   help="RAM (MB) for what the filters found out about the sentences seen so far, so that a "
                        "sentence that recurs is processed once; 0 = no cache; the outputs do not depend on it "
                        "(default %(default)s)")
    p.add_argument("--dedup-mem-mb", type=domain.COUNT, default=1024, help="RAM for dedup keys before spilling to disk")
    p.add_argument("--tmpdir", default=None, help="where dedup spills (default: system temp)")
    p.add_argument("--allow-empty", action="store_true", help=ALLOW_EMPTY_HELP)
    handlers["preprocess"] = cmd_preprocess

    p = sub.add_parser("split", help="read + global exact dedup, then deal pairs to N shard files")
    _add_input(p)
    p.add_argument("--shards", type=domain.Whole(1, 1_000_000), required=True, help="number of shard files")
    p.add_argument("--block", type=domain.COUNT, default=10_000, help="consecutive pairs per shard turn")
    p.add_argument("--outdir", required=True, help="directory of the shard files")
    p.add_argument("--prefix", default="shard", help="shard file names: PREFIX0000.tsv.gz ...")
    p.add_argument("--rejects", required=True,
                   help="removed pairs (unreadable, duplicate): line, step, reason, source, target, ...")
    p.add_argument("--ledger", required=True,
                   help="ledger JSON of the read and dedup steps (a .tsv is written beside it)")
    p.add_argument("--dedup-mem-mb", type=domain.COUNT, default=1024,
                   help="RAM for dedup keys before spilling to disk")
    p.add_argument("--tmpdir", default=None, help="where dedup spills (default: system temp)")
    handlers["split"] = cmd_split

    p = sub.add_parser("ledger", help="chain the split ledger with the sum of per-shard ledgers")
    p.add_argument("--first", required=True, help="ledger of the split step")
    p.add_argument("--shards", nargs="*", default=[], help="per-shard preprocessing ledgers")
    p.add_argument("--output", required=True, help="combined ledger JSON (+ .tsv beside it)")
    handlers["ledger"] = cmd_ledger

    p = sub.add_parser("check-overlap", help="fail if a corpus shares sentences with dev/test sets")
    p.add_argument("--corpus", nargs="+", required=True,
                   help="TSV files (.gz allowed) with source and target in the first two columns")
    p.add_argument("--protect", nargs="+", required=True,
                   help="dev/test files, one sentence per line: no pair may have a side found in them")
    p.add_argument("--output", required=True, help="report JSON")
    handlers["check-overlap"] = cmd_check_overlap
