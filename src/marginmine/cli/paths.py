"""Which arguments of each subcommand are inputs and which are outputs, so that
:func:`marginmine.io.safe.check_paths` can refuse an output that would overwrite an input (or another
output) before the command does any work.

Every subcommand has an entry (a test checks it). Roles: ``in`` / ``indir`` are read, ``out`` /
``outdir`` are written; ``outdir`` means the command fills the directory, so no input may lie in it
(``train-nmt --workdir`` resumes from its own directory and is therefore ``out`` with its derived
files, not ``outdir``). Files a command derives from an output (the ``.tsv`` written beside a ledger, the BLEU
report's ``.json`` sidecar, an embedding's ``.npy.json`` record, the shard files of ``split``) are outputs too.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, Iterator

from marginmine.io.safe import Role

Derived = Callable[[argparse.Namespace], Iterator[Role]]


def _ledger_tsv(dest: str) -> Derived:
    def derive(args: argparse.Namespace) -> Iterator[Role]:
        from marginmine.preprocess.ledger import Ledger

        value = getattr(args, dest)
        if value:
            yield Role(f"(the .tsv written beside --{dest} {value})", Ledger.tsv_path(value))
    return derive


def _split_shards(args: argparse.Namespace) -> Iterator[Role]:
    from marginmine.preprocess.shard import shard_ids

    for i in shard_ids(args.shards):
        yield Role("--outdir (shard file)", Path(args.outdir) / f"{args.prefix}{i}.tsv.gz")


def _bleu_sidecar(args: argparse.Namespace) -> Iterator[Role]:
    out = Path(args.output)
    yield Role(f"(the .json sidecar of --output {out})", out.with_suffix(".json"))
    yield Role("--hyp-dir", Path(args.hyp_dir) if args.hyp_dir else out.with_name(out.stem + ".hyp"), True)


def _demo_summary(args: argparse.Namespace) -> Iterator[Role]:
    yield Role(f"(the summary of --labels {args.labels})", Path(args.labels).with_suffix(".summary.json"))
    for split in (args.heldout or {}):
        for suffix in ("en", "de", "labels.tsv"):
            yield Role(f"--heldout-prefix ({split})", Path(f"{args.heldout_prefix}.{split}.{suffix}"))


def _scale_summary(args: argparse.Namespace) -> Iterator[Role]:
    yield Role(f"(the summary of --labels {args.labels})", Path(args.labels).with_suffix(".summary.json"))
    if args.heldout_prefix:
        from marginmine.data.scalecorpus import HELDOUT

        for split in (args.heldout or HELDOUT):
            for suffix in ("en", "de", "labels.tsv"):
                yield Role(f"--heldout-prefix ({split})", Path(f"{args.heldout_prefix}.{split}.{suffix}"))


def _report_files(args: argparse.Namespace) -> Iterator[Role]:
    from dataclasses import astuple

    from marginmine.report.figures import ReportOutputs

    for path in astuple(ReportOutputs.in_dir(args.outdir)):
        yield Role("--outdir (report file)", path)


def _bucc_files(args: argparse.Namespace) -> Iterator[Role]:
    from marginmine.evaluate.bucc import benchmark_files

    for path in benchmark_files(args.output_dir):
        yield Role("--output-dir (benchmark file)", path)


def _embedding_record(args: argparse.Namespace) -> Iterator[Role]:
    from marginmine.encoders.embed import provenance_path

    for output in args.output:
        yield Role(f"(the record of --output {output})", provenance_path(output))


def _encoder_workdir(args: argparse.Namespace) -> Iterator[Role]:
    if args.workdir and Path(args.workdir) != Path(args.output):
        yield Role("--workdir", Path(args.workdir), True)


def _export_files(args: argparse.Namespace) -> Iterator[Role]:
    out = Path(args.output)
    if args.format == "laser":  # a prefix: <prefix>.pt, .spm, .cvocab
        for ext in (".pt", ".spm", ".cvocab"):
            yield Role("--output (LASER file)", out.with_name(out.name + ext))
    else:
        yield Role("--output", out, True)


#: command -> ((dest, role), ...), derived outputs
PATHS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[Derived, ...]]] = {
    "preprocess": ((("input", "in"), ("protect", "in"), ("langid_model", "in"), ("output", "out"),
                    ("rejects", "out"), ("ledger", "out")), (_ledger_tsv("ledger"),)),
    "split": ((("input", "in"), ("rejects", "out"), ("ledger", "out")), (_ledger_tsv("ledger"), _split_shards)),
    "ledger": ((("first", "in"), ("shards", "in"), ("output", "out")), (_ledger_tsv("output"),)),
    "download": ((("output", "out"),), ()),
    "extract": ((("archive", "in"), ("output", "out")), ()),
    "fetch-testset": ((("src", "out"), ("ref", "out")), ()),
    "demo-corpus": ((("data_dir", "indir"), ("output", "out"), ("labels", "out")), (_demo_summary,)),
    "scale-corpus": ((("data_dir", "indir"), ("output", "out"), ("labels", "out")), (_scale_summary,)),
    "check-overlap": ((("corpus", "in"), ("protect", "in"), ("output", "out")), ()),
    "tatoeba-share": ((("data_dir", "indir"), ("en", "out"), ("de", "out")), ()),
    "heldout": ((("src", "in"), ("tgt", "in"), ("out_src", "out"), ("out_tgt", "out")), ()),
    "encoder-data": ((("protect", "in"), ("exclude_corpus", "in"), ("outdir", "outdir")), ()),
    "train-encoder": ((("data", "in"), ("output", "outdir")), (_encoder_workdir,)),
    "export-encoder": ((("encoder", "indir"),), (_export_files,)),
    "embed": ((("encoder", "indir"), ("input", "in"), ("output", "out")), (_embedding_record,)),
    "eval-encoder": ((("encoder", "indir"), ("output", "out")), ()),
    "encoder-report": ((("inputs", "in"), ("votes", "in"), ("tsv", "out"), ("md", "out")), ()),
    "score": ((("input", "in"), ("encoder", "indir"), ("src_embeddings", "in"), ("tgt_embeddings", "in"),
               ("src_translated", "in"), ("tgt_translated", "in"), ("output", "out"), ("baseline", "out")), ()),
    "mine": ((("src", "in"), ("tgt", "in"), ("encoder", "indir"), ("output", "out"), ("ledger", "out")),
             (_ledger_tsv("ledger"),)),
    "select": ((("pairs", "in"), ("scores", "in"), ("output", "out"), ("report", "out")), ()),
    "claims": ((("results", "indir"), ("tables", "in"), ("tsv", "out"), ("md", "out")), ()),
    "shortcut-check": ((("encoder", "indir"), ("test", "in"), ("tsv", "out"), ("md", "out")), ()),
    "clean-share": ((("scores", "in"), ("baselines", "in"), ("tsv", "out"), ("md", "out"), ("curve", "out"),
                     ("png", "out")), ()),
    "audit-sample": ((("pairs", "in"), ("scores", "in"), ("tsv", "out"), ("plan", "out"), ("html", "out")), ()),
    "audit-fill": ((("sample", "in"), ("labels", "in"), ("output", "out")), ()),
    "audit-estimate": ((("plan", "in"), ("labels", "in"), ("tsv", "out"), ("md", "out"), ("json", "out"),
                        ("png", "out")), ()),
    "export-filtered": ((("selection", "in"), ("tsv", "out"), ("src", "out"), ("tgt", "out")), ()),
    "composition": ((("labels", "in"), ("selections", "in"), ("pairs", "in"), ("scores", "in"), ("tsv", "out"),
                     ("md", "out"), ("density_tsv", "out")), ()),
    "bucc-data": ((("mono_src", "in"), ("mono_tgt", "in")), (_bucc_files,)),
    "eval-mining": ((("encoder", "indir"), ("data", "indir"), ("tsv", "out"), ("md", "out")), ()),
    "eval-filter": ((("encoder", "indir"), ("paracrawl", "in"), ("paracrawl_translated", "in"), ("demo_labels", "in"),
                     ("pairs", "in"), ("scores", "in"), ("baselines", "in"), ("tsv", "out"), ("md", "out"),
                     ("json", "out"), ("check_tsv", "out"), ("check_md", "out"), ("groups_tsv", "out"),
                     ("groups_md", "out")), ()),
    "fit-scorer": ((("encoder", "indir"), ("protect", "in"), ("encoder_data", "in"), ("exclude_pairs", "in"),
                    ("output", "outdir")), ()),
    "train-nmt": ((("train", "in"), ("dev_src", "in"), ("dev_ref", "in"), ("workdir", "out")), ()),
    "evaluate": ((("workdir", "indir"), ("test_src", "in"), ("test_ref", "in"), ("dev_src", "in"),
                  ("dev_ref", "in"), ("output", "out")), (_bleu_sidecar,)),
    "translate": ((("workdir", "indir"), ("input", "in"), ("output", "out"), ("stats", "out")), ()),
    "translator-data": ((("encoder_data", "in"), ("output", "out"), ("report", "out")), ()),
    "vote-report": ((("encoder", "indir"), ("tsv", "out"), ("md", "out")), ()),
    "eval-similarity": ((("encoder", "indir"), ("output", "out")), ()),
    "compare": ((("inputs", "in"), ("tsv", "out"), ("md", "out"), ("runs", "out"), ("png", "out")), ()),
    "headline": ((("inputs", "in"), ("output", "out")), ()),
    "summary": ((("intrinsic", "in"), ("bucc", "in"), ("quality", "in"), ("comparison", "in"), ("runs", "in"),
                 ("select", "in"),
                 ("tsv", "out"), ("md", "out")), ()),
    "wall-times": ((("tsv", "in"), ("md", "out")), ()),
    # --readme and --page are rewritten in place: outputs (their text outside the blocks is kept)
    "docs-results": ((("results", "indir"), ("published", "indir"), ("output", "out"), ("readme", "out"),
                      ("page", "out")), ()),
    # --work, --results, --benchmarks are where it looks for files, not inputs as a whole
    "report-figures": ((("ledger", "in"), ("select", "in"), ("tables", "in")), (_report_files,)),
    "removed-sample": ((("rejects", "in"), ("output", "out")), ()),
    "report-samples": ((("pairs", "in"), ("removed", "in"), ("split_rejects", "in"), ("html", "out"),
                        ("scores_tsv", "out"), ("disagree_tsv", "out"), ("removed_tsv", "out")), ()),
}

#: commands whose ``--gold-*`` / ``--extra`` values pack several paths into one argument
_PACKED = {"bucc-data": ("gold_train", "gold_test"), "evaluate": ("extra",), "compare": ("subsets",),
           "fit-scorer": ("held_out", "positives_files", "corpus")}
#: ... or name their paths: ``NAME=FILE[,FILE...]`` (files after the ``=``), ``NAME,FILE,FILE...``
_NAMED = {"eval-mining": ("translated",), "vote-report": ("translator", "stats", "scores"), "eval-filter": ("corpus",),
          "report-samples": ("scores",)}
_NAMED_CSV = {"vote-report": ("set",)}


def _values(value: object) -> list[str]:
    if value is None or value is False:
        return []
    if isinstance(value, (list, tuple)):  # flag repeated with nargs (action="append"): lists of lists
        return [x for v in value for x in (_values(v) if isinstance(v, (list, tuple)) else [str(v)] if v else [])]
    return [str(value)]


def roles(command: str, args: argparse.Namespace) -> tuple[list[Role], list[Role]]:
    """The (inputs, outputs) of one parsed command line."""
    spec, derived = PATHS[command]
    ins: list[Role] = []
    outs: list[Role] = []
    for dest, role in spec:
        for v in _values(getattr(args, dest, None)):
            if dest == "encoder" and "=" in v:  # NAME=DIR (the evaluations name their encoders)
                v = v.partition("=")[2]
            r = Role(f"--{dest.replace('_', '-')}", Path(v), role.endswith("dir"))
            (ins if role.startswith("in") else outs).append(r)
    for dest in _PACKED.get(command, ()):
        for item in getattr(args, dest, None) or []:
            # evaluate's --extra parses to (name, src, ref), compare's --subsets to (name, labels);
            # bucc-data's --gold-* are "SRC,TGT" strings
            # fit-scorer's --held-out and --positives-files parse to a HeldOut (.src, .tgt), --corpus to a CorpusShard
            fields = ([item.src, item.tgt] if hasattr(item, "tgt_lang") else [item.pairs, item.src, item.tgt]
                      if hasattr(item, "pairs") else
                      list(item[1:]) if isinstance(item, (list, tuple)) else str(item).split(","))
            ins.extend(Role(f"--{dest.replace('_', '-')}", Path(f)) for f in fields if f)
    for dest in _NAMED.get(command, ()):
        for item in getattr(args, dest, None) or []:
            ins.extend(Role(f"--{dest}", Path(f)) for f in str(item).partition("=")[2].split(",") if f)
    for dest in _NAMED_CSV.get(command, ()):
        for item in getattr(args, dest, None) or []:
            ins.extend(Role(f"--{dest}", Path(f)) for f in str(item).split(",")[1:] if f)
    for derive in derived:
        outs.extend(derive(args))
    return ins, outs
