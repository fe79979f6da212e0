"""``marginmine`` command line: one subcommand per workflow stage, usable without Snakemake.

Errors in the input are reported as one line naming the file (and line) and what to do,
with exit status 2; no traceback unless ``--debug``. So is a value out of its option's range (every
number has one: 0 threads, nan, a word where a count belongs are refused as the arguments are read).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Sequence

from marginmine.cli.options import ALLOW_EMPTY_HELP, Handler, add_filter_settings, add_seed, column_pair
from marginmine.defaults import PREPROCESS_CACHE_MB, SCALE_PAIRS
from marginmine.errors import MarginmineError, NotImplementedYet
from marginmine.cli import values as domain

log = logging.getLogger("marginmine")

_HANDLERS: dict[str, Handler] = {}


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


def cmd_download(args: argparse.Namespace) -> int:
    from marginmine.data.download import download

    download(args.url, Path(args.output), sha256=args.sha256, retries=args.retries, timeout=args.timeout)
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    from marginmine.data.archive import extract_member

    extract_member(args.archive, args.member, args.output)
    return 0


def cmd_fetch_testset(args: argparse.Namespace) -> int:
    from marginmine.data.archive import fetch_sacrebleu

    fetch_sacrebleu(args.test_set, args.langpair, args.src, args.ref)
    return 0


def _split_sizes(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in text.split(","):
        name, _, size = item.partition("=")
        if not name or not size.isdigit() or name in out:
            raise argparse.ArgumentTypeError(f"expected SPLIT=PAIRS,... with distinct splits (got {text!r})")
        out[name] = int(size)
    return out


def cmd_demo_corpus(args: argparse.Namespace) -> int:
    from marginmine.data.democorpus import build_demo_corpus

    if args.heldout and not args.heldout_prefix:
        raise MarginmineError("--heldout needs --heldout-prefix (where the held-out sets are written)")
    summary = build_demo_corpus(Path(args.data_dir), Path(args.output), Path(args.labels), seed=args.seed,
                                scale=args.scale, heldout=args.heldout or None,
                                heldout_prefix=Path(args.heldout_prefix) if args.heldout_prefix else None)
    print(json.dumps(summary, indent=1), file=sys.stderr)
    return 0


def cmd_scale_corpus(args: argparse.Namespace) -> int:
    from marginmine.data.scalecorpus import build_scale_corpus

    summary = build_scale_corpus(Path(args.data_dir), Path(args.output), Path(args.labels), pairs=args.pairs,
                                 seed=args.seed, heldout=args.heldout,
                                 heldout_prefix=Path(args.heldout_prefix) if args.heldout_prefix else None)
    print(json.dumps(summary, indent=1), file=sys.stderr)
    return 0


def cmd_check_overlap(args: argparse.Namespace) -> int:
    from marginmine.preprocess.leakage import overlap_report
    from marginmine.io.safe import write_text

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


def cmd_tatoeba_share(args: argparse.Namespace) -> int:
    from marginmine.data.demo_sources import tatoeba_pairs, tatoeba_split
    from marginmine.io.text import open_text_out

    en, de = tatoeba_pairs(Path(args.data_dir))
    _, enc = tatoeba_split(en, de)
    with open_text_out(args.en) as fe, open_text_out(args.de) as fd:
        for i in enc:
            fe.write(en[i] + "\n")
            fd.write(de[i] + "\n")
    log.info("Tatoeba de-en encoder share: %d of %d pairs", len(enc), len(en))
    return 0


def cmd_heldout(args: argparse.Namespace) -> int:
    from marginmine.data.heldout import write_slice

    counts = write_slice(args.src, args.tgt, args.start, args.size, args.seed, args.out_src, args.out_tgt)
    log.info("%s: %d lines, %d distinct pairs; wrote pairs [%d, %d) of seed %d's shuffle: %d",
             args.src, counts["lines"], counts["distinct"], args.start, args.start + args.size, args.seed,
             counts["written"])
    return 0


def _not_implemented(stage: str, issue: int) -> Handler:
    def run(args: argparse.Namespace) -> int:
        raise NotImplementedYet(f"'{stage}' is not implemented yet (planned in issue #{issue})")
    return run


PLANNED: dict[str, int] = {}  # stage -> issue; a placeholder subcommand fails with "not implemented yet"


def build_parser() -> argparse.ArgumentParser:
    ap = domain.OneLineParser(prog="marginmine", description=__doc__.splitlines()[0])
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    ap.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    sub = ap.add_subparsers(dest="command", required=True)

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
    _HANDLERS["preprocess"] = cmd_preprocess

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
    _HANDLERS["split"] = cmd_split

    p = sub.add_parser("ledger", help="chain the split ledger with the sum of per-shard ledgers")
    p.add_argument("--first", required=True, help="ledger of the split step")
    p.add_argument("--shards", nargs="*", default=[], help="per-shard preprocessing ledgers")
    p.add_argument("--output", required=True, help="combined ledger JSON (+ .tsv beside it)")
    _HANDLERS["ledger"] = cmd_ledger

    p = sub.add_parser("download", help="HTTP(S) download with retries, resume and SHA-256 check")
    p.add_argument("--url", required=True, help="http(s):// or file:// URL, or a local path")
    p.add_argument("--output", required=True,
                   help="destination file (data goes to OUTPUT.part, renamed once complete and verified)")
    p.add_argument("--sha256", default=None,
                   help="expected SHA-256 (64 hex digits): checked after the download; an OUTPUT that "
                        "matches is kept without fetching")
    p.add_argument("--retries", type=domain.Whole(0, 1000), default=5, help="attempts after the first, with growing waits")
    p.add_argument("--timeout", type=domain.Real(0, 7 * 86400, lo_open=True), default=60.0, help="seconds each connect and read may take")
    _HANDLERS["download"] = cmd_download

    p = sub.add_parser("extract", help="copy one member of a .tgz/.tar archive to a file")
    p.add_argument("--archive", required=True, help="tar archive (.tgz, .tar.gz, .tar; any compression)")
    p.add_argument("--member", required=True, help="member path or file name")
    p.add_argument("--output", required=True, help="file the member is copied to")
    _HANDLERS["extract"] = cmd_extract

    p = sub.add_parser("fetch-testset", help="write a sacreBLEU test set's source and reference")
    p.add_argument("--test-set", required=True, help="e.g. wmt13, wmt14/full")
    p.add_argument("--langpair", required=True, help="e.g. en-de")
    p.add_argument("--src", required=True, help="output: the source side, one sentence per line")
    p.add_argument("--ref", required=True, help="output: the (first) reference, one sentence per line")
    _HANDLERS["fetch-testset"] = cmd_fetch_testset

    p = sub.add_parser("demo-corpus", help="build the demo noisy en-de corpus from the shared real data")
    p.add_argument("--data-dir", required=True, help="the shared data folder the real sources are read from")
    p.add_argument("--output", required=True, help="corpus TSV: en, de, id")
    p.add_argument("--labels", required=True, help="sidecar TSV: id, origin, kind, clean")
    add_seed(p, "seed of every component's sample and of the corpus order (default %(default)s)")
    p.add_argument("--scale", type=domain.Real(0, 1000, lo_open=True), default=1.0, help="multiply every component's size")
    p.add_argument("--heldout", type=_split_sizes, default=None, metavar="SPLIT=PAIRS,...",
                   help="clean-mix held-out sets, e.g. dev=1000,test=2000: pairs of every clean origin in the "
                        "corpus' proportions, carved out before the corpus is built")
    p.add_argument("--heldout-prefix", default=None,
                   help="the held-out sets go to PREFIX.<split>.en/.de and PREFIX.<split>.labels.tsv")
    _HANDLERS["demo-corpus"] = cmd_demo_corpus

    p = sub.add_parser("scale-corpus", help="build the large noisy en-de corpus (default 5M pairs) from the shared "
                                            "real data, with the demo's sources, noise kinds and held-out sets")
    p.add_argument("--data-dir", required=True, help="the shared data folder the real sources are read from")
    p.add_argument("--output", required=True, help="corpus TSV: en, de, id (.gz: gzip)")
    p.add_argument("--labels", required=True,
                   help="sidecar TSV: id, origin, kind, clean (its .summary.json is written beside it)")
    p.add_argument("--pairs", type=domain.COUNT, default=SCALE_PAIRS,
                   help="corpus pairs; each component is the same share at every size, so 100000 and 1000000 "
                        "are small versions of the default (default %(default)s)")
    add_seed(p, "seed of the clean pool, the held-out sets, every component and the line order "
             "(default %(default)s, the demo's: then the held-out sets are the demo's)")
    p.add_argument("--heldout", type=_split_sizes, default=None, metavar="SPLIT=PAIRS,...",
                   help="clean-mix held-out sets carved out of the clean pool, none of whose sentences the corpus "
                        "holds (default: the demo's sizes, marginmine.data.scalecorpus.HELDOUT; other sizes give "
                        "other sets than the demo's)")
    p.add_argument("--heldout-prefix", default=None,
                   help="write the held-out sets to PREFIX.<split>.en/.de and PREFIX.<split>.labels.tsv")
    _HANDLERS["scale-corpus"] = cmd_scale_corpus

    p = sub.add_parser("check-overlap", help="fail if a corpus shares sentences with dev/test sets")
    p.add_argument("--corpus", nargs="+", required=True,
                   help="TSV files (.gz allowed) with source and target in the first two columns")
    p.add_argument("--protect", nargs="+", required=True,
                   help="dev/test files, one sentence per line: no pair may have a side found in them")
    p.add_argument("--output", required=True, help="report JSON")
    _HANDLERS["check-overlap"] = cmd_check_overlap

    p = sub.add_parser("tatoeba-share", help="the Tatoeba de-en pairs reserved for encoder training (demo)")
    p.add_argument("--data-dir", required=True, help="the shared data folder (with the Tatoeba de-en pairs)")
    p.add_argument("--en", required=True, help="output: the share's English sentences, one per line")
    p.add_argument("--de", required=True, help="output: their German translations, line-aligned with --en")
    _HANDLERS["tatoeba-share"] = cmd_tatoeba_share

    p = sub.add_parser("heldout", help="a dev or test set as a seeded slice of a larger parallel test set")
    p.add_argument("--src", required=True, help="the larger test set's source side, one sentence per line")
    p.add_argument("--tgt", required=True, help="its target side, line-aligned with --src")
    p.add_argument("--start", type=domain.COUNT0, default=0, help="first position in the shuffle")
    p.add_argument("--size", type=domain.COUNT, required=True, help="pairs to take")
    add_seed(p, "the shuffle; slices of one seed never overlap", default=1)
    p.add_argument("--out-src", required=True, help="output: the slice's source sentences")
    p.add_argument("--out-tgt", required=True,
                   help="output: the slice's target sentences, line-aligned with --out-src")
    _HANDLERS["heldout"] = cmd_heldout

    from marginmine.cli.encoders import register as register_encoders

    register_encoders(sub, _HANDLERS)

    from marginmine.cli.score import register as register_scoring

    register_scoring(sub, _HANDLERS)

    from marginmine.cli.nmt import register as register_nmt

    register_nmt(sub, _HANDLERS)

    from marginmine.cli.report import register as register_report

    register_report(sub, _HANDLERS)

    from marginmine.cli.samples import register as register_samples

    register_samples(sub, _HANDLERS)

    from marginmine.cli.cleanshare import register as register_clean_share

    register_clean_share(sub, _HANDLERS)

    from marginmine.cli.shortcut import register as register_shortcut

    register_shortcut(sub, _HANDLERS)

    from marginmine.cli.audit import register as register_audit

    register_audit(sub, _HANDLERS)

    for stage, issue in PLANNED.items():
        p = sub.add_parser(stage, help=f"(not implemented yet: issue #{issue})")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        _HANDLERS[stage] = _not_implemented(stage, issue)
    return ap


def check_outputs(command: str, args: argparse.Namespace) -> None:
    """Refuse, before any work, an output that would overwrite an input or another output."""
    from marginmine.cli.paths import PATHS, roles
    from marginmine.io.safe import check_paths

    if command in PATHS:
        ins, outs = roles(command, args)
        check_paths(ins, outs)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s", stream=sys.stderr)
    try:
        check_outputs(args.command, args)
        return _HANDLERS[args.command](args)
    except MarginmineError as exc:
        if args.debug:
            raise
        print(f"marginmine {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a validated setting (a frozen settings class, a kind's params) refused a value
        if args.debug:
            raise
        print(f"marginmine {args.command}: error: {exc} (--debug shows where)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"marginmine {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
