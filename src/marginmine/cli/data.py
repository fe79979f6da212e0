"""Subcommands that fetch and build the data: ``download``, ``extract`` (one member of an archive),
``fetch-testset`` (a sacreBLEU set), ``demo-corpus`` and ``scale-corpus`` (the noisy en-de corpora
built from the shared real data), ``tatoeba-share`` (the encoder's share of Tatoeba) and ``heldout``
(a dev or test set as a seeded slice of a larger one)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from marginmine.cli import values as domain
from marginmine.cli.options import Handlers, add_seed
from marginmine.defaults import SCALE_PAIRS
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")


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


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    """``download``, ``extract``, ``fetch-testset``, ``demo-corpus``, ``scale-corpus``, ``tatoeba-share``,
    ``heldout``."""
    p = sub.add_parser("download", help="HTTP(S) download with retries, resume and SHA-256 check")
    p.add_argument("--url", required=True, help="http(s):// or file:// URL, or a local path")
    p.add_argument("--output", required=True,
                   help="destination file (data goes to OUTPUT.part, renamed once complete and verified)")
    p.add_argument("--sha256", default=None,
                   help="expected SHA-256 (64 hex digits): checked after the download; an OUTPUT that "
                        "matches is kept without fetching")
    p.add_argument("--retries", type=domain.Whole(0, 1000), default=5,
                   help="attempts after the first, with growing waits")
    p.add_argument("--timeout", type=domain.Real(0, 7 * 86400, lo_open=True), default=60.0,
                   help="seconds each connect and read may take")
    handlers["download"] = cmd_download

    p = sub.add_parser("extract", help="copy one member of a .tgz/.tar archive to a file")
    p.add_argument("--archive", required=True, help="tar archive (.tgz, .tar.gz, .tar; any compression)")
    p.add_argument("--member", required=True, help="member path or file name")
    p.add_argument("--output", required=True, help="file the member is copied to")
    handlers["extract"] = cmd_extract

    p = sub.add_parser("fetch-testset", help="write a sacreBLEU test set's source and reference")
    p.add_argument("--test-set", required=True, help="e.g. wmt13, wmt14/full")
    p.add_argument("--langpair", required=True, help="e.g. en-de")
    p.add_argument("--src", required=True, help="output: the source side, one sentence per line")
    p.add_argument("--ref", required=True, help="output: the (first) reference, one sentence per line")
    handlers["fetch-testset"] = cmd_fetch_testset

    p = sub.add_parser("demo-corpus", help="build the demo noisy en-de corpus from the shared real data")
    p.add_argument("--data-dir", required=True, help="the shared data folder the real sources are read from")
    p.add_argument("--output", required=True, help="corpus TSV: en, de, id")
    p.add_argument("--labels", required=True, help="sidecar TSV: id, origin, kind, clean")
    add_seed(p, "seed of every component's sample and of the corpus order (default %(default)s)")
    p.add_argument("--scale", type=domain.Real(0, 1000, lo_open=True), default=1.0,
                   help="multiply every component's size")
    p.add_argument("--heldout", type=_split_sizes, default=None, metavar="SPLIT=PAIRS,...",
                   help="clean-mix held-out sets, e.g. dev=1000,test=2000: pairs of every clean origin in the "
                        "corpus' proportions, carved out before the corpus is built")
    p.add_argument("--heldout-prefix", default=None,
                   help="the held-out sets go to PREFIX.<split>.en/.de and PREFIX.<split>.labels.tsv")
    handlers["demo-corpus"] = cmd_demo_corpus

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
    handlers["scale-corpus"] = cmd_scale_corpus

    p = sub.add_parser("tatoeba-share", help="the Tatoeba de-en pairs reserved for encoder training (demo)")
    p.add_argument("--data-dir", required=True, help="the shared data folder (with the Tatoeba de-en pairs)")
    p.add_argument("--en", required=True, help="output: the share's English sentences, one per line")
    p.add_argument("--de", required=True, help="output: their German translations, line-aligned with --en")
    handlers["tatoeba-share"] = cmd_tatoeba_share

    p = sub.add_parser("heldout", help="a dev or test set as a seeded slice of a larger parallel test set")
    p.add_argument("--src", required=True, help="the larger test set's source side, one sentence per line")
    p.add_argument("--tgt", required=True, help="its target side, line-aligned with --src")
    p.add_argument("--start", type=domain.COUNT0, default=0, help="first position in the shuffle")
    p.add_argument("--size", type=domain.COUNT, required=True, help="pairs to take")
    add_seed(p, "the shuffle; slices of one seed never overlap", default=1)
    p.add_argument("--out-src", required=True, help="output: the slice's source sentences")
    p.add_argument("--out-tgt", required=True,
                   help="output: the slice's target sentences, line-aligned with --out-src")
    handlers["heldout"] = cmd_heldout
