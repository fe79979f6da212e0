"""``marginmine clean-share``: each scorer's estimated clean share by N and threshold, from the
score files and their noise baselines (:mod:`marginmine.evaluate.cleanreport`)."""

from __future__ import annotations

import argparse
import logging

from marginmine.cli import values as domain
from marginmine.cli.options import Handlers
from marginmine.defaults import CLEAN_TARGETS
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")


def parse_thresholds(items: list[str]) -> dict[str, list[float]]:
    """``NAME=T[,T...]`` items -> ``{name: [thresholds]}``."""
    out: dict[str, list[float]] = {}
    for item in items:
        name, eq, values = item.partition("=")
        try:
            ts = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            ts = []
        if not eq or not name or not ts:
            raise MarginmineError(f"--thresholds {item!r}: give NAME=T[,T...], e.g. ratio=1.04,1.06")
        out.setdefault(name, []).extend(ts)
    return out


def cmd_clean_share(args: argparse.Namespace) -> int:
    from marginmine.evaluate.cleanreport import clean_share_report, scorer_columns
    from marginmine.io.sizes import parse_count
    from marginmine.report.curves import plot_curves

    for t in args.targets:
        if not 0 < t <= 1:
            raise MarginmineError(f"--targets {t}: a share in (0, 1]")
    columns = scorer_columns(args.scores, args.baselines, args.names)
    thresholds = parse_thresholds(args.thresholds)
    unknown = sorted(set(thresholds) - set(columns))
    if unknown:
        raise MarginmineError(f"--thresholds names {', '.join(unknown)}: not among the scorers ({', '.join(columns)})")
    sizes = {label: parse_count(label) for label in args.sizes}
    estimates = clean_share_report(columns, sizes, thresholds, args.tsv, args.md, args.curve, args.title,
                                   tuple(args.targets))
    if args.png:
        plot_curves(estimates, args.png, args.title)
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("clean-share", help="each scorer's estimated clean share by N and threshold (noise baseline)")
    p.add_argument("--scores", nargs="+", action="append", required=True, metavar="FILE",
                   help="score files, one per shard; repeat the flag per group (encoder)")
    p.add_argument("--baselines", nargs="+", action="append", required=True, metavar="FILE",
                   help="their noise baselines (marginmine score --baseline), in the same groups and order")
    p.add_argument("--names", nargs="*", default=[],
                   help="the scorers to report, in this order (default: every column)")
    p.add_argument("--sizes", nargs="*", default=[], metavar="N",
                   help="the N to estimate the top N's clean share at (20k, 1.5M, ...)")
    p.add_argument("--thresholds", nargs="*", default=[], metavar="NAME=T[,T]",
                   help="score thresholds of a scorer to estimate the clean share at (e.g. ratio=1.04,1.06)")
    p.add_argument("--targets", nargs="*", type=domain.Real(0, 1, lo_open=True), default=list(CLEAN_TARGETS),
                   help="estimated clean shares whose largest N is reported (default %(default)s)")
    p.add_argument("--title", default="", help="the tables' and figure's title")
    p.add_argument("--tsv", required=True, help="output: a row per scorer and N / threshold / target")
    p.add_argument("--md", required=True, help="output: the same as Markdown, with the estimator's assumptions")
    p.add_argument("--curve", default=None, help="output: the retained-count curve (TSV: threshold, kept, noise)")
    p.add_argument("--png", default=None, help="output: the curve drawn, a panel per scorer")
    handlers["clean-share"] = cmd_clean_share
