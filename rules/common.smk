# Shared settings and input functions. Rules only wire files to the `marginmine` CLI.
# This file: the config read once (paths, shards, sizes), the sources and the plan-time checks; the
# stages' helpers follow in encoder_common.smk, score_common.smk, nmt_common.smk and
# translate_common.smk (included in that order, before any rule).

import json
import math
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from marginmine.encoders import TWINLESS as ENCODER_TWINLESS
from marginmine.preprocess.shard import shard_ids
from marginmine.scoring.plan import check_scorer_config, check_suite_encoders, expected_kept
from marginmine.io.sizes import SIZE_PATTERN, check_thresholds, resolve_sizes, threshold_label

# `marginmine` comes from the environment snakemake runs in (make puts .venv/bin on PATH).
if shutil.which("marginmine") is None:
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

EXP = config["experiment"]
RESULTS = config.get("results_dir", f"results/{EXP}")
WORK = f"work/{EXP}"
#: --caps-from of the tables and pages: the directories whose models' time-cap warnings they print
#: (marginmine.timecap; on_time_cap: warn)
CAPS_FROM = " ".join(shlex.quote(d) for d in (RESULTS, WORK))
LOGS = f"{WORK}/logs"
BENCH = f"{WORK}/benchmarks"
SRC = config["src_lang"]
TGT = config["tgt_lang"]
# absolute and normalised: `make demo` (MARGINMINE_DATA_DIR=/abs/path) and a plain `snakemake`
# (data_dir ../shared/data) name the same directory, so they must give the same params (two
# spellings re-ran every rule that reads data_dir)
DATA_DIR = Path(
    os.path.abspath(config.get("data_dir") or os.environ.get("MARGINMINE_DATA_DIR") or "../shared/data")
)
JOB_THREADS = config["job_threads"]


def job_threads(wanted):
    """A rule's threads, capped by the config's job_threads."""
    return max(1, min(int(wanted), JOB_THREADS))


PRE = config["preprocess"]
if PRE["min_tokens"] > PRE["max_tokens"]:
    raise ValueError(f"preprocess.min_tokens {PRE['min_tokens']} > preprocess.max_tokens {PRE['max_tokens']}: "
                     "no pair could be kept")
SHARD_SIZE = PRE["shard_size"]
N_SHARDS = max(1, math.ceil(config["corpus"]["expected_pairs"] / SHARD_SIZE))
SHARDS = shard_ids(N_SHARDS)
EVAL_SETS = {
    "dev": config["eval"]["dev"],
    "test": config["eval"]["test"],
    **config["eval"].get("extra", {}),
}
# N as count labels; a share ("10%") is that share of the pairs expected after preprocessing
#: the pairs expected after preprocessing (corpus.expected_pairs x preprocess.expected_keep)
EXPECTED_KEPT = expected_kept(config["corpus"]["expected_pairs"], PRE["expected_keep"])
SIZES = resolve_sizes(config["selection"]["sizes"], EXPECTED_KEPT)
METHODS = config["selection"]["methods"]
#: scorer -> the score thresholds it also selects by (selection.thresholds): selections {method}.t{T}
THRESHOLDS = {name: [float(t) for t in ts] for name, ts in config["selection"].get("thresholds", {}).items()}


for _name, _ts in THRESHOLDS.items():
    check_thresholds(f"selection.thresholds.{_name}", _ts)

wildcard_constraints:
    shard=r"\d\d\d\d+",
    N=SIZE_PATTERN,


def data_path(rel):
    """A file below data_dir (absolute paths pass through)."""
    p = Path(rel)
    return str(p if p.is_absolute() else DATA_DIR / p)


# --- sources: every url source gets a stable name, so one download rule serves them all -----


def _sources():
    """(config key, name, source) of every configured source; the name keys its downloads."""
    enc, intr = config.get("encoder", {}).get("train", []), config.get("intrinsic", [])
    return (
        [("corpus.source", "corpus", config["corpus"]["source"])]
        + [(f"encoder.train {i['name']}", f"encoder-{i['name']}", i["source"]) for i in enc]
        + [(f"intrinsic {i['name']}", f"intrinsic-{i['name']}", i["source"]) for i in intr]
        + [(f"eval.{name}", f"eval-{name}", src) for name, src in EVAL_SETS.items()]
    )


SOURCES = _sources()


def _url_sources():
    flat = {}
    for _, name, src in SOURCES:
        if src["kind"] != "url":
            continue
        if "urls" in src:  # two separately downloaded sides
            flat.update({f"{name}-{side}": {"url": src["urls"][side]} for side in ("src", "tgt")})
        else:
            flat[name] = src
    return flat


URL_SOURCES = _url_sources()


def download_path(name):
    return f"data/downloads/{name}/{Path(URL_SOURCES[name]['url']).name}"


#: corpora the workflow builds from data_dir, with a labels sidecar naming every pair's origin and kind
BUILT_CORPORA = ("demo", "scale")


def source_files(name, src):
    """The local files a source resolves to: [tsv] or [src, tgt]."""
    kind = src["kind"]
    if kind == "local":
        if "path" in src:
            return [data_path(src["path"])]
        return [data_path(src["src"]), data_path(src["tgt"])]
    if kind == "url":
        if "urls" in src:
            return [download_path(f"{name}-{side}") for side in ("src", "tgt")]
        if "members" in src:
            return [f"data/sources/{name}/{src['members'][s]}" for s in ("src", "tgt")]
        return [download_path(name)]
    if kind in BUILT_CORPORA:
        return [f"{WORK}/corpus/{kind}.tsv.gz"]
    if kind == "heldout":
        if src["split"] not in CLEAN_MIX:
            raise ValueError(
                f"{name}: heldout split {src['split']!r} is not one of corpus.source.heldout "
                f"({', '.join(CLEAN_MIX) or 'none configured'})"
            )
        return [f"{CLEAN_MIX_PREFIX}.{src['split']}.{lang}" for lang in ("en", "de")]
    if kind == "tatoeba_share":
        return [f"{WORK}/encoder/sources/tatoeba-share.{lang}" for lang in ("en", "de")]
    if kind == "sacrebleu":
        stem = f"data/sacrebleu/{sacrebleu_id(src)}"
        return [f"{stem}.src", f"{stem}.ref"]
    raise ValueError(f"unknown source kind {kind!r} for {name}")


# clean-mix dev/test sets the demo or scale corpus holds out (rules demo_corpus, scale_corpus)
CLEAN_MIX = dict(config["corpus"]["source"].get("heldout", {}))
if CLEAN_MIX and config["corpus"]["source"]["kind"] not in BUILT_CORPORA:
    raise ValueError("corpus.source.heldout: only the demo and scale corpora hold out clean-mix sets")
CLEAN_MIX_PREFIX = f"{WORK}/corpus/heldout"


def clean_mix_files(built_by=None):
    """The held-out files; ``built_by`` (a built corpus' kind): only if that corpus is this config's."""
    if built_by is not None and built_by != config["corpus"]["source"]["kind"]:
        return []
    return [f"{CLEAN_MIX_PREFIX}.{s}.{x}" for s in CLEAN_MIX for x in ("en", "de", "labels.tsv")]


def clean_mix_arg(built_by=None):
    if not clean_mix_files(built_by):
        return ""
    sizes = ",".join(f"{s}={n}" for s, n in CLEAN_MIX.items())
    return f"--heldout {sizes} --heldout-prefix {shlex.quote(CLEAN_MIX_PREFIX)}"


def sacrebleu_id(src):
    """File-name form of a sacreBLEU set: wmt14/full + en-de -> wmt14_full.en-de."""
    return f"{re.sub(r'[^A-Za-z0-9.-]', '_', src['test_set'])}.{src['langpair']}"


SACREBLEU_SETS = {
    sacrebleu_id(s): s
    for s in [*EVAL_SETS.values(), *(i["source"] for i in config.get("intrinsic", []))]
    if s["kind"] == "sacrebleu"
}


def source_columns(src):
    return ",".join(str(c) for c in src["columns"])


def corpus_files(wildcards=None):
    return source_files("corpus", config["corpus"]["source"])


# eval sets taken as a seeded slice of a larger test set (`sample:`), written by rule heldout_set
HELDOUT = [name for name, src in EVAL_SETS.items() if "sample" in src]
_EVAL_ONLY_KEYS = ("sample", "methods")
for _name, _src in [("corpus", config["corpus"]["source"]),
                    *((f"encoder.train {i['name']}", i["source"]) for i in config.get("encoder", {}).get("train", [])),
                    *((f"intrinsic {i['name']}", i["source"]) for i in config.get("intrinsic", []))]:
    if any(k in _src for k in _EVAL_ONLY_KEYS):
        raise ValueError(f"{_name}: 'sample' and 'methods' apply to eval sets only")
for _name in ("dev", "test"):
    if "methods" in EVAL_SETS[_name]:
        raise ValueError(f"eval.{_name}: every system decodes dev and test; 'methods' applies to eval.extra only")
# a method with no system in this run is harmless (e.g. a published baseline outside `make published`)
_SYSTEMS = [*METHODS, *config.get("scorers", {}), *(config.get("published") or {}).get("scorers", {}), "random",
            "unfiltered"]
for _name, _src in EVAL_SETS.items():
    _unknown_methods = sorted(set(_src.get("methods", [])) - set(_SYSTEMS))
    if _unknown_methods:
        raise ValueError(f"eval.extra.{_name}.methods: {_unknown_methods} are neither selection methods nor "
                         f"scorers ({', '.join(dict.fromkeys(_SYSTEMS))})")


def eval_files(name):
    if name not in EVAL_SETS:
        raise ValueError(f"protect: {name!r} is neither an eval set nor a file below data_dir")
    if name in HELDOUT:
        return [f"{WORK}/eval/{name}.{SRC}", f"{WORK}/eval/{name}.{TGT}"]
    return source_files(f"eval-{name}", EVAL_SETS[name])


def heldout_inputs(wildcards):
    src, tgt = source_files(f"eval-{wildcards.name}", EVAL_SETS[wildcards.name])
    return {"src": src, "tgt": tgt}


def heldout_args(wildcards):
    sample = EVAL_SETS[wildcards.name]["sample"]
    return f"--start {sample.get('start', 0)} --size {sample['size']} --seed {sample.get('seed', 1)}"


def protect_files(wildcards=None):
    """Files whose sentences must never enter the corpus: eval sets by name, or data_dir paths."""
    out = []
    for item in config.get("protect", []):
        out += eval_files(item) if item in EVAL_SETS else [data_path(item)]
    return out


# --- plan-time checks: a missing data_dir or local file fails `snakemake -n` in one line -------


def _data_dir_readers():
    """(config key, path) of every file the config reads from disk, relative paths below data_dir;
    (key, None) for the builders that read data_dir themselves (the demo corpus, the Tatoeba share)."""
    out = []
    for key, _, src in SOURCES:
        if src["kind"] == "local":
            out += [(key, src[f]) for f in ("path", "src", "tgt") if f in src]
        elif src["kind"] in (*BUILT_CORPORA, "tatoeba_share"):
            out.append((key, None))
    out += [("protect", p) for p in config.get("protect", []) if p not in EVAL_SETS]
    e = config.get("mining_eval")
    if e:
        out += [("mining_eval", p[s]) for p in e["gold_train"] + e["gold_test"] for s in ("src", "tgt")]
        out += [("mining_eval", p) for p in e["mono_src"] + e["mono_tgt"]]
    if (config.get("filter_eval") or {}).get("paracrawl"):
        out.append(("filter_eval.paracrawl", config["filter_eval"]["paracrawl"]))
    out += [("heads.held_out", h[s]) for h in (config.get("heads") or {}).get("held_out", []) for s in ("src", "tgt")]
    return out


_readers = _data_dir_readers()
_below_data_dir = [key for key, rel in _readers if rel is None or not Path(rel).is_absolute()]
if _below_data_dir and not DATA_DIR.is_dir():
    raise ValueError(
        f"data_dir: {DATA_DIR} does not exist (or is not a directory), but {_below_data_dir[0]} reads from it "
        "(set data_dir in the config, --config data_dir=DIR, or MARGINMINE_DATA_DIR)"
    )
for _key, _rel in _readers:
    if _rel is not None and not Path(data_path(_rel)).is_file():
        _what = f"{_rel!r} is neither an eval set ({', '.join(EVAL_SETS)}) nor a file: " if _key == "protect" else ""
        raise ValueError(f"{_key}: {_what}{data_path(_rel)} does not exist (data_dir: {DATA_DIR})")


def archive_of(wildcards):
    return download_path(wildcards.source)
