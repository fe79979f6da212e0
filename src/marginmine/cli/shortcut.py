"""``marginmine shortcut-check``: each fitted scorer on clean pairs of several domains and their
random re-pairings (:mod:`marginmine.evaluate.shortcut`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from marginmine.cli.options import (
    Handlers,
    add_device,
    add_scorers,
    add_seed,
    encoder_dirs,
    load_encoders,
    named_scorers,
    torch_threads,
)
from marginmine.errors import InputError, MarginmineError

log = logging.getLogger("marginmine")


def cmd_shortcut_check(args: argparse.Namespace) -> int:
    from marginmine.evaluate.shortcut import Group, read_origins, shortcut_rows, write_tables
    from marginmine.io.text import read_lines
    from marginmine.scoring.heads import CHECK_FILE

    torch_threads(args.threads)
    dirs = encoder_dirs(args)
    scorers = named_scorers(args, dirs)
    unfitted = [n for n, (_, kind) in scorers.items() if not getattr(kind, "fitted", False)]
    if unfitted:
        raise MarginmineError(f"--scorers {', '.join(unfitted)}: not fitted (the check reads a head's positives)")
    encoders = load_encoders(dirs, args, {e for e, _ in scorers.values()})
    src_file, tgt_file, labels = args.test
    src_lines = read_lines(src_file)
    origins = read_origins(src_lines, read_lines(tgt_file), labels)
    clean = sum(len(s) for s, _ in origins.values())
    log.info("%s: %d clean pairs in %d origins (%d rows not clean left out)", labels, clean, len(origins),
             len(src_lines) - clean)
    # the origins' embeddings, once per encoder (scorers on one encoder share them)
    by_encoder = {enc: [Group(o, encoder.encode(s, args.src_lang), encoder.encode(t, args.tgt_lang))  # type: ignore[attr-defined]
                        for o, (s, t) in origins.items()] for enc, encoder in encoders.items()}
    rows = []
    for name, (enc, kind) in scorers.items():
        encoder, groups = encoders[enc], by_encoder[enc]
        check_file = Path(kind.head) / CHECK_FILE  # type: ignore[attr-defined]
        if not check_file.is_file():
            raise InputError(str(check_file), f"scorer {name}: its head has no kept-out positives",
                             hint="the head was fitted before heads kept them out: fit it again (rule fit_scorer)")
        check = [line.split("\t") for line in read_lines(check_file)]
        positives = Group("positives (kept out)", encoder.encode([c[0] for c in check], args.src_lang),  # type: ignore[attr-defined]
                          encoder.encode([c[1] for c in check], args.tgt_lang))  # type: ignore[attr-defined]
        for r in shortcut_rows(name, kind.pair_scores, groups, positives, args.seed):  # type: ignore[attr-defined]
            rows.append(r)
            log.info("%s / %s (%d pairs): AUC %.3f, vs the positives' re-paired %.3f (cosine %.3f / %.3f)%s",
                     name, r["group"], r["pairs"], r["auc"], r["auc_vs_positives"], r["cosine_auc"],
                     r["cosine_auc_vs_positives"], f" - {r['flag']}" if r["flag"] else "")
    write_tables(rows, args.tsv, args.md, args.title)
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("shortcut-check", help="fitted scorers on clean pairs per domain vs their re-pairings: "
                                              "do they separate translations, or domains?")
    add_scorers(p, default=None)
    p.add_argument("--encoder", nargs="+", action="extend", default=[], metavar="NAME=DIR",
                   help="an encoder the scorers name; repeatable")
    p.add_argument("--test", nargs=3, required=True, metavar=("SRC", "TGT", "LABELS"),
                   help="a labelled clean set: its two aligned files and its labels TSV (origin, clean columns)")
    p.add_argument("--src-lang", required=True)
    p.add_argument("--tgt-lang", required=True)
    add_seed(p, "seed of the re-pairings (default %(default)s)")
    add_device(p, "CPU threads for the encoders", device_help="cpu or cuda[:N]")
    p.add_argument("--title", default="Shortcut check of the fitted scorers", help="the Markdown table's title")
    p.add_argument("--tsv", required=True, help="output: a row per scorer and group")
    p.add_argument("--md", required=True, help="output: the same as Markdown, with what each column means")
    handlers["shortcut-check"] = cmd_shortcut_check
