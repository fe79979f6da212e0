"""``marginmine eval-filter``: ROC-AUC and precision at top-N of every scorer on human-labelled
pairs (ParaCrawl v3) and on the demo corpus' labels, beside the shipped BiCleaner / Zipporah /
hunalign scores; with noise baselines, the estimated clean share beside the labelled one."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from marginmine.cli import values as domain
from marginmine.cli.options import (
    Handlers,
    add_knn,
    add_scorers,
    add_seed,
    encoder_dirs,
    index_spec,
    load_encoders,
    named_scorers,
    torch_threads,
)
from marginmine.errors import MarginmineError

log = logging.getLogger("marginmine")
CHECK_TITLE = "Estimated (noise baseline) vs labelled clean share"
GROUPS_TITLE = "Each labelled group's scores against the noise baseline"


def _without_own_negatives(args: argparse.Namespace, scores: dict, positive) -> list[dict]:  # noqa: ANN001
    """Rows for the scorers fitted against corpus negatives (``mlp``): the demo corpus without the
    pairs that were its own negatives (chosen again from --corpus, checked against the head)."""
    import numpy as np

    from marginmine.evaluate.filtereval import quality_rows, read_paracrawl_eval
    from marginmine.scoring.heads import CorpusShard, fitted_negatives

    shards: dict[str, list] = {}
    for item in args.corpus:
        enc, sep, triple = item.partition("=")
        if not sep:
            raise MarginmineError(f"--corpus {item!r}: give ENCODER=SHARD_TSV,SRC_NPY,TGT_NPY")
        shards.setdefault(enc, []).append(CorpusShard.parse(triple))
    if not shards:
        return []
    labelled = read_paracrawl_eval(args.paracrawl) if args.paracrawl else None
    exclude = list(zip(labelled.src, labelled.tgt)) if labelled else []
    rows = []
    for name, (enc, kind) in named_scorers(args, encoder_dirs(args)).items():
        if getattr(kind, "corpus_negatives", False) and name in scores and enc in shards:
            idx = fitted_negatives(kind.head, kind, shards[enc], exclude)  # type: ignore[attr-defined]
            keep = np.ones(len(scores[name]), bool)
            keep[idx] = False
            rows += quality_rows("demo corpus, not its own negatives", {name: scores[name][keep]}, positive[keep],
                                 args.top_n, ids=np.flatnonzero(keep))
    return rows


def _columns(groups: list[list[str]]) -> dict:
    """Every named column of the files of ``groups`` (score files or their baselines), the shards of
    a group concatenated in order."""
    import numpy as np

    from marginmine.scoring.files import read_score_names, read_scores

    values: dict[str, list] = {}
    for files in groups:
        for f in files:
            for name in read_score_names(f):
                values.setdefault(name, []).append(read_scores(f, name))
    return {k: np.concatenate(v) for k, v in values.items()}


def cmd_eval_filter(args: argparse.Namespace) -> int:
    import numpy as np

    from marginmine.evaluate.cleanreport import baseline_by_group, labelled_check
    from marginmine.evaluate.filtereval import demo_labels, quality_rows, read_paracrawl_eval, write_quality_table
    from marginmine.scoring.files import EncoderEmbeddings, ScoreSettings, make_batch, score_kinds

    if bool(args.check_tsv) != bool(args.check_md) or bool(args.groups_tsv) != bool(args.groups_md):
        raise MarginmineError("give --check-tsv and --check-md together, and --groups-tsv and --groups-md")
    torch_threads(args.threads)
    rows, checks, by_group = [], [], []
    if args.paracrawl:
        dirs = encoder_dirs(args)
        scorers = named_scorers(args, dirs)
        encoders = load_encoders(dirs, args, {e for e, _ in scorers.values()})
        data = read_paracrawl_eval(args.paracrawl)
        translated = None
        if args.paracrawl_translated:
            from marginmine.errors import InputError
            from marginmine.io.text import read_lines

            translated = tuple(read_lines(p) for p in args.paracrawl_translated)
            for p, lines in zip(args.paracrawl_translated, translated):
                if len(lines) != len(data.src):
                    raise InputError(p, f"has {len(lines)} lines, {args.paracrawl} has {len(data.src)} pairs",
                                     hint="translate the labelled file's column again (one line per pair)")
        scores: dict[str, np.ndarray] = {}
        noise: dict[str, np.ndarray] = {}  # the noise baseline: the file re-paired, as score --baseline does
        for enc_name, encoder in encoders.items():  # one batch: the whole file, as the paper's filtering
            mine = tuple((n, kind) for n, (e, kind) in scorers.items() if e == enc_name)
            emb = EncoderEmbeddings(encoder, args.src_lang, args.tgt_lang, translated=translated)  # type: ignore[arg-type]
            settings = ScoreSettings(mine, batch_size=max(1, len(data.src)), index=index_spec(args))  # type: ignore[arg-type]
            batch = make_batch(data.src, data.tgt, 0, emb, settings)
            scores.update(score_kinds(batch, settings))
            repaired = batch.repaired((args.seed, 0))
            keep = ~repaired.original_pairs()
            noise.update({n: v[keep] for n, v in score_kinds(repaired, settings).items()})
        scores = {n: scores[n] for n in scorers}  # config order
        name = Path(args.paracrawl).parent.name
        labels, codes_pc = np.unique(data.labels, return_inverse=True)
        checks += labelled_check(name, scores, noise, data.positive, args.top_n,
                                 {"labelled translations": np.isin(data.labels, ["V", "MT"])})
        by_group += baseline_by_group(name, scores, noise, codes_pc, [f"label {g}" for g in labels], args.top_n)
        scores.update({f"{k} (shipped)": v for k, v in data.shipped.items()})
        rows += quality_rows(name, scores, data.positive, args.top_n)
    if args.demo_labels:
        groups = args.scores or []
        if not groups:
            raise MarginmineError("--demo-labels needs --scores (one group of shard score files per encoder)")
        for files in groups:
            if len(files) != len(args.pairs):
                raise MarginmineError(f"--scores {files[0]} ...: {len(files)} score files for {len(args.pairs)} "
                                      "--pairs shards (give one group per encoder, one file per shard, shard order)")
        positive, codes, names = demo_labels(args.demo_labels, args.pairs, args.id_column)
        demo_scores = _columns(groups)
        for name, v in demo_scores.items():
            if len(v) != len(positive):
                raise MarginmineError(f"score column {name}: {len(v)} scores for {len(positive)} pairs in --pairs "
                                      "(two score-file groups hold the same column name, or a file is stale)")
        rows += quality_rows("demo corpus (preprocessed)", demo_scores, positive, args.top_n)
        rows += _without_own_negatives(args, demo_scores, positive)
        if args.baselines and (args.check_tsv or args.groups_tsv):
            if len(args.baselines) != len(groups):
                raise MarginmineError(f"{len(args.baselines)} --baselines group(s) for {len(groups)} --scores groups "
                                      "(one baseline per score file, the same groups and order)")
            baseline = _columns(args.baselines)
            from marginmine.data.demo_sources import TRANSLATION_KINDS

            translations = positive | np.isin(codes, [i for i, g in enumerate(names) if g in TRANSLATION_KINDS])
            checks += labelled_check("demo corpus (preprocessed)", demo_scores, baseline, positive, args.top_n,
                                     {"labelled translations": translations})
            by_group += baseline_by_group("demo corpus (preprocessed)", demo_scores, baseline, codes, names,
                                          args.top_n)
    if not rows:
        raise MarginmineError("nothing to evaluate: give --paracrawl and/or --demo-labels")
    write_quality_table(rows, args.tsv, args.md, "Filtering quality (ROC-AUC, precision of the top N)")
    for r in rows:
        log.info("%s / %s: AUC %.3f", r["data"], r["scorer"], r["auc"])
    if args.json:
        from marginmine.io.safe import write_text

        write_text(args.json, json.dumps([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
                                         indent=1) + "\n")
    if args.check_tsv:
        if not checks:
            raise MarginmineError("--check-tsv needs --paracrawl or --demo-labels with --baselines")
        write_quality_table(checks, args.check_tsv, args.check_md, CHECK_TITLE)
    if args.groups_tsv:
        if not by_group:
            raise MarginmineError("--groups-tsv needs --paracrawl, or --demo-labels with --baselines")
        write_quality_table(by_group, args.groups_tsv, args.groups_md, GROUPS_TITLE)
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("eval-filter", help="ROC-AUC / precision@N of every scorer vs BiCleaner/Zipporah")
    p.add_argument("--encoder", nargs="+", action="extend", default=[], metavar="NAME=DIR",
                   help="an encoder the scorers name (for --paracrawl); repeatable")
    add_scorers(p)
    p.add_argument("--paracrawl", default=None, help="ParaCrawl human-evaluation TSV (9 columns)")
    p.add_argument("--corpus", nargs="*", default=[], metavar="ENCODER=SHARD_TSV,SRC_NPY,TGT_NPY",
                   help="the corpus shards (--pairs order) with an encoder's embeddings: scorers fitted against "
                        "corpus negatives (mlp) also get rows without their own negatives")
    p.add_argument("--paracrawl-translated", nargs=2, default=None, metavar=("SRC_TRANSLATED", "TGT_TRANSLATED"),
                   help="its sources translated into the target language and its targets into the source "
                        "language, one line per pair (for vote scorers)")
    p.add_argument("--src-lang", default="en", help="language code of --paracrawl's source side")
    p.add_argument("--tgt-lang", default="de", help="language code of --paracrawl's target side")
    p.add_argument("--demo-labels", default=None, help="demo corpus sidecar labels TSV")
    p.add_argument("--pairs", nargs="*", default=[], help="preprocessed shards (with the id column)")
    p.add_argument("--scores", nargs="+", action="append", default=None, metavar="FILE",
                   help="score files, one per shard in shard order; repeat the flag per encoder's group. Every "
                        "named column becomes a row")
    p.add_argument("--id-column", type=domain.COLUMN, default=2,
                   help="0-based column of --pairs holding the pair id (looked up in --demo-labels)")
    p.add_argument("--top-n", type=domain.COUNT, nargs="+", default=[500, 1000],
                   help="precision is reported for the N best-scored pairs, for each N")
    p.add_argument("--tsv", required=True,
                   help="output: one row per data set and scorer: pairs, positives, ROC-AUC, "
                        "precision at each N")
    p.add_argument("--md", required=True, help="output: the same as a Markdown table")
    p.add_argument("--json", default=None, help="output: the same rows as JSON")
    p.add_argument("--baselines", nargs="+", action="append", default=None, metavar="FILE",
                   help="the noise baselines of --scores (marginmine score --baseline), the same groups and order")
    add_seed(p, "seed of --paracrawl's re-pairing (default %(default)s)")
    p.add_argument("--check-tsv", default=None,
                   help="output: the estimated clean share (noise baseline) beside the labelled one, per data set, "
                        "scorer and N (the whole set, then each --top-n)")
    p.add_argument("--check-md", default=None, help="output: the same as Markdown")
    p.add_argument("--groups-tsv", default=None,
                   help="output: per scorer and labelled group of --demo-labels: median score, share below the "
                        "baseline's median, ROC-AUC against the baseline, share of each top N")
    p.add_argument("--groups-md", default=None, help="output: the same as Markdown")
    add_knn(p, k=False)
    handlers["eval-filter"] = cmd_eval_filter
