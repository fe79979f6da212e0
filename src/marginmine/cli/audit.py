"""``marginmine audit-sample``, ``audit-fill`` and ``audit-estimate``: the labelled audit of a
scorer's ranking (:mod:`marginmine.evaluate.audit`): draw a stratified sample and its labelling
page, (for a corpus with its own labels) fill the labels from them, estimate the precision of every
N and threshold with 95% intervals and the largest N at a target."""

from __future__ import annotations

import argparse
import logging

from marginmine.cli import values as domain
from marginmine.cli.options import Handlers, add_seed
from marginmine.defaults import AUDIT_DRAWS, AUDIT_LABELS, AUDIT_STRATA, AUDIT_TARGET

log = logging.getLogger("marginmine")


def cmd_audit_sample(args: argparse.Namespace) -> int:
    from marginmine.evaluate.audit_files import draw_sample
    from marginmine.evaluate.audit_page import audit_page
    from marginmine.io.sizes import parse_count

    sizes = [parse_count(s) for s in args.sizes]
    plan = draw_sample(args.pairs, args.scores, args.scorer, args.labels, args.strata, sizes, args.thresholds,
                       args.seed, args.id_column, args.tsv, args.plan)
    intro = (f"{len(plan.ranks)} pairs drawn from {plan.n:,} ranked by {plan.scorer} (shown in a shuffled order, "
             "without their scores). Mark each pair: good = a translation you would train on; bad = not one "
             "(wrong language, misaligned, partial, machine-translated garbage, copy); unsure = cannot tell. "
             "Marks are kept in this browser; Export labels downloads them for marginmine audit-estimate.")
    audit_page(args.tsv, args.html, f"Audit sample: {plan.scorer}", intro)
    log.info("audit sample: %d pairs of %d in %d strata -> %s, %s", len(plan.ranks), plan.n, len(plan.edges) - 1,
             args.tsv, args.html)
    return 0


def cmd_audit_fill(args: argparse.Namespace) -> int:
    from marginmine.evaluate.audit_report import fill_from_sidecar

    counts = fill_from_sidecar(args.sample, args.labels, args.output)
    log.info("labels from %s: %d good, %d bad -> %s", args.labels, counts["good"], counts["bad"], args.output)
    return 0


def cmd_audit_estimate(args: argparse.Namespace) -> int:
    from marginmine.errors import InputError
    from marginmine.evaluate.audit_files import SamplePlan, read_labels
    from marginmine.evaluate.audit_report import estimate, summary_line, write_estimate
    from marginmine.io.sizes import parse_count

    audit = read_labels(args.labels, args.monotone)
    if not (audit.labels >= 0).any():
        raise InputError(args.labels, "no pair is labelled good or bad", hint="label the sample in its page and "
                         "export the labels (marginmine audit-sample --html)")
    plan = SamplePlan.read(args.plan) if args.plan else None
    scorer = args.scorer or (plan.scorer if plan else "the audited scorer")
    sizes = [parse_count(s) for s in args.sizes] if args.sizes else list(plan.sizes if plan else ())
    thresholds: dict[str, int] = {}
    if plan is not None and plan.matches(audit):
        thresholds = plan.thresholds
    elif plan is not None:
        log.warning("%s is not the plan these labels were drawn with (the sample was drawn again since?): "
                    "estimating at --sizes only, thresholds left out", args.plan)
    result = estimate(audit, scorer, sizes, thresholds, args.target, args.seed, args.draws)
    write_estimate(result, audit, args.tsv, args.md, args.png, args.json, args.note, args.draws, args.seed)
    log.info("%s", summary_line(result))
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("audit-sample", help="draw a stratified sample of a scorer's ranking to label, and its page")
    p.add_argument("--pairs", nargs="+", required=True, help="the corpus' pair shards (src, tgt, id columns), in order")
    p.add_argument("--scores", nargs="+", required=True, help="their score files, one per shard, same order")
    p.add_argument("--scorer", required=True, help="the score column to rank by")
    p.add_argument("--labels", type=domain.COUNT, default=AUDIT_LABELS,
                   help="pairs to draw (default %(default)s)")
    p.add_argument("--strata", type=domain.Whole(1, 30), default=AUDIT_STRATA,
                   help="rank strata doubling from the top (default %(default)s); every --sizes N and --thresholds "
                        "value is a stratum edge too")
    p.add_argument("--sizes", nargs="*", default=[], metavar="N", help="the N (20k, 1.5M, ...) to estimate at")
    p.add_argument("--thresholds", nargs="*", type=domain.FINITE, default=[], metavar="T",
                   help="score thresholds of --scorer to estimate at")
    add_seed(p, "seed of the draw (default %(default)s)")
    p.add_argument("--id-column", type=domain.COLUMN, default=2, help="0-based column of --pairs holding the pair id")
    p.add_argument("--tsv", required=True, help="output: the sample (item, rank, stratum, score, id, src, tgt, label)")
    p.add_argument("--plan", required=True,
                   help="output: the sample's plan (JSON: strata, ranks; audit-estimate reads it)")
    p.add_argument("--html", required=True, help="output: the labelling page (self-contained HTML)")
    handlers["audit-sample"] = cmd_audit_sample

    p = sub.add_parser("audit-fill", help="fill an audit sample's labels from a corpus' label sidecar")
    p.add_argument("--sample", required=True, help="the sample TSV (audit-sample --tsv)")
    p.add_argument("--labels", required=True, help="the label sidecar (id, origin, kind, clean)")
    p.add_argument("--output", required=True, help="output: the sample with its label column filled")
    handlers["audit-fill"] = cmd_audit_fill

    p = sub.add_parser("audit-estimate", help="precision of every N with intervals from the labelled sample")
    p.add_argument("--labels", required=True, help="the labelled sample (the page's export, or a copy of the "
                   "sample TSV with its label column filled): an audit on its own")
    p.add_argument("--plan", default=None, help="the sample's plan (audit-sample --plan): its sizes and thresholds, "
                   "used where it is the plan the labels were drawn with")
    p.add_argument("--sizes", nargs="*", default=[], metavar="N", help="the N to estimate at (default: the plan's)")
    p.add_argument("--scorer", default=None, help="the audited scorer's name for the tables (default: the plan's)")
    p.add_argument("--target", type=domain.Real(0, 1, lo_open=True), default=AUDIT_TARGET,
                   help="precision whose largest N is reported (default %(default)s)")
    p.add_argument("--draws", type=domain.Whole(100, 1_000_000), default=AUDIT_DRAWS,
                   help="posterior draws (default %(default)s)")
    add_seed(p, "seed of the draws (default %(default)s)")
    p.add_argument("--monotone", action="store_true",
                   help="fit the strata's rates to not rise with the rank (narrower; wrong where a scorer ranks "
                        "noise on top: docs/choosing-n.md)")
    p.add_argument("--note", default="", help="a sentence written under the summary (e.g. who labelled)")
    p.add_argument("--tsv", required=True, help="output: a row per N and threshold")
    p.add_argument("--md", required=True, help="output: the same as Markdown, with the summary line")
    p.add_argument("--json", required=True, help="output: the whole result as JSON")
    p.add_argument("--png", required=True, help="output: precision against N with its band")
    handlers["audit-estimate"] = cmd_audit_estimate
