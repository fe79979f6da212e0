"""Subcommands ``removed-sample`` (a seeded sample of one rejects file's pairs per preprocessing
step) and ``report-samples`` (the report's page of pairs to read: removed per step, at score
quantiles and the top-N boundary per scorer, where two scorers disagree; TSVs beside it).
Listed in :data:`marginmine.cli.main.COMMAND_MODULES`."""

from __future__ import annotations

import argparse
import logging

from marginmine.cli import values as domain
from marginmine.cli.options import Handlers, add_seed
from marginmine.defaults import PER_BOUNDARY, PER_DISAGREE, PER_QUANTILE, PER_STEP
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")


def cmd_removed_sample(args: argparse.Namespace) -> int:
    from marginmine.preprocess.removed import sample_rejects, write_sample

    rows = sample_rejects(args.rejects, args.shard, args.seed, args.per_step)
    write_sample(rows, args.output)
    log.info("%d removed pairs sampled from %s", len(rows), args.rejects)
    return 0


def _named_files(text: str) -> tuple[str, list[str]]:
    name, _, files = text.partition("=")
    if not name or not files:
        raise MarginmineError(f"--scores: expected SCORER=FILE[,FILE...] (got {text!r})")
    return name, files.split(",")


def cmd_report_samples(args: argparse.Namespace) -> int:
    import numpy as np

    from marginmine.io.sizes import parse_count
    from marginmine.preprocess.removed import merged_sample
    from marginmine.report import sample_pages as pages
    from marginmine.report.samples import draw_disagreement, draw_scorer, fetch_pairs, ranking
    from marginmine.scoring.files import read_scores

    sizes = [(label, parse_count(label)) for label in args.sizes]
    scorers = [_named_files(t) for t in args.scores]
    names = [n for n, _ in scorers]
    if len(set(names)) != len(names):
        raise MarginmineError(f"--scores names a scorer twice: {names}")
    compare = args.compare or names[:2]
    if args.compare and (not set(compare) <= set(names) or compare[0] == compare[1]):
        raise MarginmineError(f"--compare needs two different scorers of --scores ({', '.join(names)})")
    counts: list[int] | None = None
    drawn, kept_for_compare = [], {}
    for name, files in scorers:
        if len(files) != len(args.pairs):
            raise MarginmineError(f"--scores {name}: {len(files)} score files for {len(args.pairs)} --pairs files")
        shards = [read_scores(f, name) for f in files]
        if counts is None:
            counts = [len(s) for s in shards]
        elif counts != [len(s) for s in shards]:
            raise MarginmineError(f"--scores {name}: the shards' score counts differ from {names[0]}'s")
        scores = np.concatenate(shards) if shards else np.empty(0)
        order = ranking(scores)
        drawn += draw_scorer(name, scores, sizes, per_quantile=args.per_quantile, per_boundary=args.per_boundary,
                             order=order)
        if name in compare:
            kept_for_compare[name] = (scores, order)
    disagree = []
    if len(compare) == 2:  # one scorer: nothing to compare
        (sa, oa), (sb, ob) = kept_for_compare[compare[0]], kept_for_compare[compare[1]]
        disagree = draw_disagreement(compare[0], sa, compare[1], sb, sizes, args.seed, args.per_disagree, (oa, ob))
    del kept_for_compare
    texts = fetch_pairs(args.pairs, counts or [], {d.index for d in drawn + disagree})
    removed = (merged_sample(args.split_rejects, args.removed, args.seed, len(args.pairs), args.block,
                             args.per_step) if args.removed or args.split_rejects else [])
    score_rows, disagree_rows = pages.score_rows(drawn, texts), pages.score_rows(disagree, texts)
    removed_rows = pages.removed_rows(removed)
    pages.write_tsv(args.scores_tsv, pages.SCORE_HEADER, score_rows)
    pages.write_tsv(args.disagree_tsv, pages.SCORE_HEADER, disagree_rows)
    pages.write_tsv(args.removed_tsv, pages.REMOVED_HEADER, removed_rows)
    from marginmine.io.safe import write_text

    write_text(args.html, pages.samples_html(args.title, score_rows, disagree_rows, removed_rows, args.sizes))
    log.info("samples: %d by score, %d disagreements, %d removed pairs; page %s", len(score_rows),
             len(disagree_rows), len(removed_rows), args.html)
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("removed-sample", help="a seeded sample of a rejects file's pairs, per preprocessing step "
                                              "(the same after any repeated run, whatever the file's order)")
    p.add_argument("--rejects", required=True, help="a rejects file of marginmine preprocess or split")
    p.add_argument("--shard", type=domain.Whole(-1, 1_000_000, "-1: split's rejects"), required=True,
                   help="the shard's index (0, 1, ...; -1 for split's rejects): with --seed, what the sample draws")
    add_seed(p, "the run's seed (with --shard, what the sample draws)")
    p.add_argument("--per-step", type=domain.COUNT, default=PER_STEP, help="pairs per step")
    p.add_argument("--output", required=True, help="TSV: priority, file, line, step, reason, src, tgt, extra")
    handlers["removed-sample"] = cmd_removed_sample

    p = sub.add_parser("report-samples", help="the report's page of pairs to read (HTML) and its TSVs: removed "
                                              "per preprocessing step, by score, where two scorers disagree")
    p.add_argument("--pairs", nargs="+", required=True, help="the preprocessed shards (kept pairs), in shard order")
    p.add_argument("--scores", nargs="+", required=True, metavar="SCORER=FILE[,FILE...]",
                   help="each scorer's score files, one per --pairs file in the same order (a column named after "
                        "the scorer)")
    p.add_argument("--sizes", nargs="*", default=[], help="the selections' N (20k, 1M, ...): their boundaries")
    p.add_argument("--compare", nargs=2, default=None, metavar=("A", "B"),
                   help="the two scorers whose disagreements are sampled (default: the first two of --scores)")
    p.add_argument("--removed", nargs="*", default=[], help="the shards' removed-sample files")
    p.add_argument("--split-rejects", default=None,
                   help="split's rejects: its read / dedup steps are sampled, and the shards' lines are "
                        "traced to the raw corpus's (the shard count is that of --pairs)")
    p.add_argument("--block", type=domain.COUNT, default=10_000, help="split's --block")
    add_seed(p, "the run's seed: the samples of removed pairs and of disagreements")
    p.add_argument("--per-step", type=domain.COUNT, default=PER_STEP, help="removed pairs per step")
    p.add_argument("--per-quantile", type=domain.COUNT, default=PER_QUANTILE,
                   help="pairs at each score quantile (1%%, 5%%, 10%%, 25%%, 50%%, 75%%, 90%%, 95%%, 99%%)")
    p.add_argument("--per-boundary", type=domain.COUNT, default=PER_BOUNDARY,
                   help="pairs either side of each N's boundary")
    p.add_argument("--per-disagree", type=domain.COUNT, default=PER_DISAGREE, help="pairs each way per N")
    p.add_argument("--title", default="Samples", help="the page's title")
    p.add_argument("--html", required=True, help="output: the page")
    p.add_argument("--scores-tsv", required=True, help="output: pairs at quantiles and boundaries")
    p.add_argument("--disagree-tsv", required=True, help="output: pairs one scorer keeps and the other drops")
    p.add_argument("--removed-tsv", required=True, help="output: removed pairs per step")
    handlers["report-samples"] = cmd_report_samples
