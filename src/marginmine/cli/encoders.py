"""Subcommands of the encoders stage: ``encoder-data``, ``train-encoder``, ``export-encoder``,
``embed``, ``eval-encoder``, ``encoder-report``. Listed in :data:`marginmine.cli.main.COMMAND_MODULES`."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from marginmine.cli import values as domain
from marginmine.cli.options import ALLOW_EMPTY_HELP, Handlers, add_device, add_seed, torch_threads
from marginmine.defaults import ON_TIME_CAP, K
from marginmine.errors import MarginmineError
from marginmine.timecap import POLICIES

log = logging.getLogger("marginmine")


def cmd_encoder_data(args: argparse.Namespace) -> int:
    from marginmine.encoders.data import TrainingSource, prepare
    from marginmine.io.safe import read_json

    if args.sources.endswith(".json"):
        spec = read_json(args.sources, "--sources", hint="a JSON list of {name, src_lang, tgt_lang, files}")
    else:
        try:
            spec = json.loads(args.sources)
        except json.JSONDecodeError as exc:
            raise MarginmineError(f"--sources: neither a .json file nor JSON ({exc.msg}): give a JSON list of "
                                  "{name, src_lang, tgt_lang, files} or a .json file holding one") from None
    sources = [TrainingSource(s["name"], s["src_lang"], s["tgt_lang"], tuple(s["files"]),
                              tuple(s.get("columns", (0, 1))), s.get("detokenize")) for s in spec]
    prepare(sources, args.outdir, args.protect, args.exclude_corpus)
    return 0


def cmd_train_encoder(args: argparse.Namespace) -> int:
    from marginmine.encoders import kind_module
    from marginmine.encoders.base import read_training_data

    module = kind_module(args.kind, "--kind")
    params = json.loads(args.params) if args.params else {}
    if args.threads and "threads" not in params:
        params["threads"] = args.threads
    out = Path(args.output)
    work = Path(args.workdir) if args.workdir else out
    module.train(read_training_data(args.data), work, params, seed=args.seed, max_minutes=args.max_minutes,
                 untrained=args.untrained)
    if args.max_minutes is not None and not args.untrained:
        from marginmine.encoders.base import check_time_cap

        check_time_cap(work, f"encoder {out} (trained in {work})", args.on_time_cap, args.max_minutes)
    if work != out:
        from marginmine.encoders.base import export_encoder

        export_encoder(work, out)
    return 0


def cmd_export_encoder(args: argparse.Namespace) -> int:
    if args.format == "laser":
        from marginmine.encoders.laser_format import export_laser

        for path in export_laser(args.encoder, args.output):
            log.info("wrote %s", path)
        return 0
    from marginmine.encoders.base import export_encoder

    export_encoder(args.encoder, args.output)
    return 0


def embed_sides(args: argparse.Namespace) -> list[tuple[str, int | None, str]]:
    """(language, column, output) of each side ``embed`` writes: the i-th --lang and --column go with
    the i-th --output (--column omitted: whole lines for every side)."""
    langs, outputs, columns = args.lang, args.output, args.column
    if len(outputs) > 1 and not columns:
        raise MarginmineError(f"{len(outputs)} --output and no --column would embed the same whole lines into "
                              "each: give a --column per --output")
    columns = columns or [None]
    if not len(langs) == len(outputs) == len(columns):
        raise MarginmineError(f"give one --lang{' and one --column' if args.column else ''} per --output "
                              f"(got {len(langs)} --lang, {len(args.column or [])} --column, {len(outputs)} --output)")
    return list(zip(langs, columns, outputs))


def cmd_embed(args: argparse.Namespace) -> int:
    from marginmine.encoders.embed import embed_file

    sides = embed_sides(args)
    torch_threads(args.threads)
    from marginmine.encoders.base import encoder_identity, load_encoder

    encoder, identity = load_encoder(args.encoder, args.device), encoder_identity(args.encoder)  # once for every side
    for lang, column, output in sides:
        embed_file(encoder, lang, args.input, output, column=column, dtype=args.dtype,
                   chunk_size=args.chunk_size, encoder_id=identity, allow_empty=args.allow_empty)
    return 0


def cmd_eval_encoder(args: argparse.Namespace) -> int:
    from marginmine.encoders.base import load_encoder, read_manifest
    from marginmine.encoders.intrinsic import GoldSet, evaluate
    from marginmine.io.safe import write_text

    torch_threads(args.threads)
    sets = []
    for item in args.set:
        parts = item.split(",")
        if len(parts) != 6 or not all(parts):
            raise MarginmineError(f"--set {item!r}: give NAME,KIND,SRC_LANG,TGT_LANG,SRC_FILE,TGT_FILE")
        name, kind, sl, tl, a, b = parts
        sets.append(GoldSet(name, sl, tl, Path(a), Path(b), kind))
    from marginmine.search.margin import MARGINS

    margins = [m for m in args.margins.split(",") if m]
    unknown = [m for m in margins if m not in MARGINS]
    if unknown or not margins:
        raise MarginmineError(f"--margins: {unknown or 'none given'} (choose from {', '.join(MARGINS)})")
    rows = evaluate(load_encoder(args.encoder, args.device), sets, k=args.k, seed=args.seed, margins=margins)
    info = read_manifest(args.encoder, verify=False).get("info", {})
    result = {"encoder": args.name, "dir": args.encoder, "info": info, "rows": rows}
    write_text(args.output, json.dumps(result, indent=1) + "\n")
    for r in rows:
        log.info("%s %s %s: %.1f%% / %.1f%% (avg %.1f%%)", args.name, r["set"], r["margin"], r["err_src2tgt"],
                 r["err_tgt2src"], r["err_avg"])
    return 0


def cmd_encoder_report(args: argparse.Namespace) -> int:
    from marginmine.encoders.intrinsic import write_report

    write_report([Path(p) for p in args.inputs], Path(args.tsv), Path(args.md),
                 Path(args.votes) if args.votes else None)
    return 0


def register(sub: argparse._SubParsersAction, handlers: Handlers) -> None:
    p = sub.add_parser("encoder-data", help="clean encoder training data and remove dev/test leakage")
    p.add_argument("--sources", required=True,
                   help="JSON list (or .json file) of {name, src_lang, tgt_lang, files, columns, detokenize}")
    p.add_argument("--outdir", required=True,
                   help="where <name>.<lang> text files, manifest.json and report.json go")
    p.add_argument("--protect", nargs="*", default=[], help="dev/test files whose sentences must not be trained on")
    p.add_argument("--exclude-corpus", nargs="*", default=[], help="corpus TSVs the encoder will score")
    handlers["encoder-data"] = cmd_encoder_data

    p = sub.add_parser("train-encoder", help="train a sentence encoder (or import a pre-trained one)")
    p.add_argument("--kind", required=True,
                   help="dual | laser | laser-pretrained | sentence-transformers | trained | use-multilingual "
                        "(the last four import)")
    p.add_argument("--data", required=True, help="manifest.json written by encoder-data")
    p.add_argument("--output", required=True, help="encoder directory")
    p.add_argument("--workdir", default=None,
                   help="where training runs and checkpoints live (resumable); default: --output")
    p.add_argument("--params", default=None, help="JSON dict of hyper-parameters")
    add_seed(p, "the encoder's seed: initialisation and batch order (default %(default)s)")
    p.add_argument("--max-minutes", type=domain.MINUTES, default=None, help="wall-clock budget")
    p.add_argument("--on-time-cap", choices=POLICIES, default=ON_TIME_CAP,
                   help="when --max-minutes ends training before its steps: error (rerun resumes) or warn "
                        "(the warning goes into the manifest and every table built on it)")
    p.add_argument("--threads", type=domain.THREADS, default=None, help="CPU threads for training")
    p.add_argument("--untrained", action="store_true",
                   help="the random-init twin: the same subwords and network, not trained (what training buys)")
    handlers["train-encoder"] = cmd_train_encoder

    p = sub.add_parser("export-encoder", help="copy an encoder, or write our laser kind in LASER's own format")
    p.add_argument("--encoder", required=True, help="encoder directory (with encoder.json)")
    p.add_argument("--format", choices=["marginmine", "laser"], default="marginmine",
                   help="marginmine: the directory as is; laser: OUTPUT.pt/.spm/.cvocab for LASER's code")
    p.add_argument("--output", required=True, help="directory (marginmine) or file prefix (laser), e.g. out/mine")
    handlers["export-encoder"] = cmd_export_encoder

    p = sub.add_parser("embed", help="embed a text file (or TSV columns) into memory-mapped .npy files",
                       description="Embed the lines of --input, or its TSV --column, into --output. Repeat "
                                   "--lang, --column and --output to embed several columns (a shard's two "
                                   "sides) with one load of the encoder: the i-th of each go together.")
    p.add_argument("--encoder", required=True, help="encoder directory (with encoder.json)")
    p.add_argument("--lang", required=True, action="append",
                   help="language code of the input's sentences, e.g. en (one per --output)")
    p.add_argument("--input", required=True,
                   help="one sentence per line, or a TSV with --column (.gz allowed)")
    p.add_argument("--output", required=True, action="append", help=".npy file (repeatable)")
    p.add_argument("--column", type=domain.COLUMN, default=None, action="append",
                   help="0-based TSV column (default: whole line; one per --output when given)")
    p.add_argument("--dtype", default="float16", choices=["float16", "float32"],
                   help="float type of the stored vectors")
    p.add_argument("--chunk-size", type=domain.COUNT, default=50_000, help="sentences per written chunk")
    add_device(p, "torch CPU threads (default: torch's choice)")
    p.add_argument("--allow-empty", action="store_true", help=ALLOW_EMPTY_HELP)
    handlers["embed"] = cmd_embed

    p = sub.add_parser("eval-encoder", help="Tatoeba retrieval / newstest alignment error rates")
    p.add_argument("--encoder", required=True, help="encoder directory (with encoder.json)")
    p.add_argument("--name", required=True, help="the encoder's name in the JSON (its row in encoder-report)")
    p.add_argument("--set", action="append", required=True, metavar="NAME,KIND,SRC_LANG,TGT_LANG,SRC,TGT",
                   help="a gold set; KIND is tatoeba or alignment; repeatable")
    p.add_argument("-k", type=domain.K, default=K, help="neighbours per sentence of the margins (default %(default)s)")
    add_seed(p, "seed of the shuffle of an alignment set's candidates (default %(default)s)")
    add_device(p, "torch CPU threads")
    p.add_argument("--output", required=True, help="JSON")
    p.add_argument("--margins", default="absolute,ratio",
                   help="comma list: absolute (cosine), distance, ratio, eq9, eq10 (default: the paper's two)")
    handlers["eval-encoder"] = cmd_eval_encoder

    p = sub.add_parser("encoder-report", help="one TSV + Markdown table of encoder evaluations")
    p.add_argument("--inputs", nargs="+", required=True,
                   help="JSON files written by eval-encoder (or eval-similarity)")
    p.add_argument("--tsv", required=True,
                   help="output: one row per encoder, set and margin: error rates (%%) and training minutes")
    p.add_argument("--md", required=True, help="output: Markdown table, one row per encoder")
    p.add_argument("--votes", default=None, help="vote-report TSV: the votes' F1 on the same sets, below the table")
    handlers["encoder-report"] = cmd_encoder_report
