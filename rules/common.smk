# Shared settings and input functions. Rules only wire files to the `marginmine` CLI.

import json
import math
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from marginmine.preprocess.shard import shard_ids
from marginmine.scoring.plan import check_scorer_config, check_suite_encoders

# `marginmine` comes from the environment snakemake runs in (make puts .venv/bin on PATH).
if shutil.which("marginmine") is None:
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

EXP = config["experiment"]
RESULTS = config.get("results_dir", f"results/{EXP}")
WORK = f"work/{EXP}"
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
SHARD_SIZE = PRE["shard_size"]
N_SHARDS = max(1, math.ceil(config["corpus"]["expected_pairs"] / SHARD_SIZE))
SHARDS = shard_ids(N_SHARDS)
EVAL_SETS = {
    "dev": config["eval"]["dev"],
    "test": config["eval"]["test"],
    **config["eval"].get("extra", {}),
}
SIZES = config["selection"]["sizes"]
METHODS = config["selection"]["methods"]


wildcard_constraints:
    shard=r"\d\d\d\d+",
    N=r"[0-9.]+[kKmMbB]?",


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
    if kind == "demo":
        return [f"{WORK}/corpus/demo.tsv.gz"]
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


# clean-mix dev/test sets the demo corpus holds out (rule demo_corpus writes them)
CLEAN_MIX = dict(config["corpus"]["source"].get("heldout", {}))
if CLEAN_MIX and config["corpus"]["source"]["kind"] != "demo":
    raise ValueError("corpus.source.heldout: only the demo corpus holds out clean-mix sets")
CLEAN_MIX_PREFIX = f"{WORK}/corpus/heldout"


def clean_mix_files():
    return [f"{CLEAN_MIX_PREFIX}.{s}.{x}" for s in CLEAN_MIX for x in ("en", "de", "labels.tsv")]


def clean_mix_arg():
    if not CLEAN_MIX:
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
for _name, _src in EVAL_SETS.items():
    _unknown_methods = sorted(set(_src.get("methods", [])) - set(METHODS))
    if _unknown_methods:
        raise ValueError(f"eval.extra.{_name}.methods: {_unknown_methods} are not selection methods ({METHODS})")


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
        elif src["kind"] in ("demo", "tatoeba_share"):
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


# --- encoders ---------------------------------------------------------------------------

ENC = config["encoder"]
QUICK = config["quick"]
DEFAULT_ENCODER = ENC["default"]
DEFAULT_ENCODER_DIR = f"{RESULTS}/encoder"
_EXTRA = [] if QUICK else list(ENC["extra"])
ENCODER_DIRS = {DEFAULT_ENCODER: DEFAULT_ENCODER_DIR}
ENCODER_DIRS.update({n: f"{RESULTS}/encoders/{n}" for n in _EXTRA})
if ENC["eval_random_init"] and not QUICK:
    ENCODER_DIRS.update({f"{n}-random": f"{WORK}/encoders-random/{n}" for n in [DEFAULT_ENCODER, *_EXTRA]})
EVALUATED_ENCODERS = list(ENCODER_DIRS)
# the published scorers' suite (`seeds:`, target `seeds`): its own encoders, scorers and NMT methods,
# written beside the experiment's, never into its files (after `seeds`, the experiment's target
# has nothing to do)
PAPERS = config.get("seeds") or {}
PAPER_ENCODERS = list(PAPERS.get("encoders", []))
check_suite_encoders(PAPER_ENCODERS, ENC["models"])
for _name in PAPER_ENCODERS:
    ENCODER_DIRS.setdefault(_name, f"{RESULTS}/encoders/{_name}")
_NAME_OF_DIR = {d: n for n, d in ENCODER_DIRS.items()}


def encoder_name(encdir):
    return _NAME_OF_DIR[encdir]


def is_twin(encdir):
    """A random-init twin: the same network and subwords as its encoder, built untrained by the
    encoder's own trainer (train-encoder --untrained)."""
    name = encoder_name(encdir)
    return name.endswith("-random") and name not in ENC["models"]


def encoder_model(encdir):
    """The models: entry of an encoder directory (a twin's is its encoder's)."""
    name = encoder_name(encdir)
    return ENC["models"][name.removesuffix("-random") if is_twin(encdir) else name]


def _model_downloads():
    """Encoder params given as {url, sha256} (e.g. a released LASER2 checkpoint): fetched by the
    download rule into data/downloads/, the param replaced by the file and its digest pinned."""
    out = {}
    for name, model in ENC["models"].items():
        for key, value in (model.get("params") or {}).items():
            if isinstance(value, dict) and "url" in value:
                if not value.get("sha256"):
                    raise ValueError(
                        f"encoder.models.{name}.params.{key}: a url needs its sha256 (pre-trained files "
                        "are loaded only when the config pins their digest)"
                    )
                out[f"encoder-{name}-{key}"] = {"url": value["url"], "sha256": value["sha256"], "model": name, "key": key}
    return out


MODEL_DOWNLOADS = _model_downloads()
URL_SOURCES.update(MODEL_DOWNLOADS)


def _encoder_refs(value, where):
    """{encoder: NAME} anywhere in an encoder's params (e.g. the model that mines its hard
    negatives): replaced by that encoder's directory, which the training then waits for."""
    if isinstance(value, dict) and set(value) == {"encoder"}:
        name = value["encoder"]
        if name not in ENCODER_DIRS:
            raise ValueError(f"{where}: unknown encoder {name!r} (encoders: {', '.join(ENCODER_DIRS)})")
        return ENCODER_DIRS[name], [f"{ENCODER_DIRS[name]}/encoder.json"]
    if isinstance(value, dict):
        out, deps = {}, []
        for k, v in value.items():
            out[k], d = _encoder_refs(v, f"{where}.{k}")
            deps += d
        return out, deps
    return value, []


def encoder_params(encdir):
    """An encoder's params as its training reads them, and the files that training needs besides its
    data: other encoders named by {encoder: NAME} become their directories (their encoder.json a
    dependency), files given by {url, sha256} their downloads (digest pinned)."""
    model = encoder_model(encdir)
    params, deps = _encoder_refs(model.get("params", {}), f"encoder.models.{encoder_name(encdir)}.params")
    for source, item in MODEL_DOWNLOADS.items():
        if ENC["models"][item["model"]] is model:
            params[item["key"]] = download_path(source)
            params.setdefault("sha256", {})[item["key"]] = item["sha256"]
            deps.append(download_path(source))
    return params, deps


def encoder_params_json(encdir):
    return json.dumps(encoder_params(encdir)[0], sort_keys=True)


def encoder_downloads(encdir):
    return encoder_params(encdir)[1]


def encoder_budget_arg(encdir):
    """--max-minutes of a trained encoder; a twin is built untrained, without a budget."""
    if is_twin(encdir):
        return "--untrained"
    minutes = encoder_model(encdir).get("max_minutes")
    return f"--max-minutes {minutes}" if minutes else ""


def encoder_runtime(encdir):
    minutes = None if is_twin(encdir) else encoder_model(encdir).get("max_minutes")
    return int(minutes * 1.5 + 15) if minutes else 7 * 24 * 60


def encoder_train_files(wildcards=None):
    files = []
    for item in ENC["train"]:
        files += source_files(f"encoder-{item['name']}", item["source"])
    return files


def encoder_sources_json():
    items = [
        {
            "name": item["name"],
            "src_lang": item["src_lang"],
            "tgt_lang": item["tgt_lang"],
            "files": source_files(f"encoder-{item['name']}", item["source"]),
            "columns": item["source"]["columns"],
            "detokenize": item.get("detokenize"),
        }
        for item in ENC["train"]
    ]
    return json.dumps(items)


def intrinsic_files(wildcards=None):
    files = []
    for item in config.get("intrinsic", []):
        files += source_files(f"intrinsic-{item['name']}", item["source"])
    return files


def intrinsic_set_args(wildcards=None):
    args = []
    for item in config.get("intrinsic", []):
        a, b = source_files(f"intrinsic-{item['name']}", item["source"])
        spec = f"{item['name']},{item['kind']},{item['src_lang']},{item['tgt_lang']},{a},{b}"
        args.append(f"--set {shlex.quote(spec)}")
    return " ".join(args)


def encoder_protect_files(wildcards=None):
    """Dev/test sets and the intrinsic-evaluation sets never enter encoder training."""
    return sorted(set(protect_files() + intrinsic_files()))


def encoder_excluded_corpus(wildcards=None):
    return corpus_files() if ENC["exclude_corpus"] else []


def bleu_targets():
    return [f"{RESULTS}/bleu_{n}.txt" for n in SIZES]


# --- scorers, selection and the scorers' evaluations ---------------------------------------
# A scorer (config `scorers:`) is a name, an encoder and a score kind registered in the package
# (marginmine.scoring; `plugins:` modules register more). Each encoder a scorer uses is embedded;
# its scorers share one self-describing score file per shard (a header names the columns).

SCORING = config["scoring"]
MINING_EVAL = config.get("mining_eval")
LABELLED_CORPUS = config["corpus"]["source"]["kind"] == "demo"  # its sidecar names every pair's origin
FILTER_EVAL = config.get("filter_eval")
PLUGINS = list(config.get("plugins", []))
SCORERS = {name: {**s, "encoder": s.get("encoder", DEFAULT_ENCODER)} for name, s in config["scorers"].items()}
PAPER_SCORERS = {name: {**s, "encoder": s.get("encoder", DEFAULT_ENCODER)} for name, s in PAPERS.get("scorers", {}).items()}
PAPER_METHODS = list(PAPERS.get("methods", []))
PAPER_BASELINES = list(PAPERS.get("baselines", []))
ALL_SCORERS = {**SCORERS, **PAPER_SCORERS}


def kind_says(name, attribute, default=False):
    """What a scorer's kind declares about itself (`fitted`, `corpus_negatives`, `mines`): the
    workflow asks the kind, it never knows kinds by name."""
    from marginmine.scoring import KINDS

    return getattr(KINDS[ALL_SCORERS[name]["kind"]], attribute, default)


def is_fitted(name):
    """A scorer whose kind has a head fitted on held-out pairs."""
    return kind_says(name, "fitted")


def score_group(name):
    """The score files a scorer's column is in: its encoder's (work/<exp>/score/<encoder>/), or for a
    `seeds:` scorer the suite's own (work/<exp>/score/seeds/<encoder>/), so the experiment's score
    files never change when the suite is added. A fitted scorer has files of its own
    (.../<encoder>/<name>/): refitting its head rescores nothing else. The scorers that vote over
    translations share files of their own (.../<encoder>/votes/): they wait for the translations,
    no other scorer does, and one job computes the three searches once for all of them."""
    s = ALL_SCORERS[name]
    group = f"seeds/{s['encoder']}" if name in PAPER_SCORERS else s["encoder"]
    if is_fitted(name):
        return f"{group}/{name}"
    return f"{group}/votes" if kind_says(name, "translated") else group


def group_encoder(group):
    return GROUP_ENCODERS[group]


def head_dir(name):
    return f"{WORK}/heads/{name}"


def head_inputs(names):
    """The fitted heads' manifests of the named scorers (none for most)."""
    return [f"{head_dir(n)}/head.json" for n in names if is_fitted(n)]


HEADS = config.get("heads") or {}


def _fit_corpus(name):
    """(shard, src embeddings, tgt embeddings) of the corpus, for a scorer whose negatives come from it."""
    enc = ALL_SCORERS[name]["encoder"]
    return [(rules.preprocess_shard.output.kept.format(shard=s), rules.embed_shard.output.src.format(encoder=enc, shard=s),
             rules.embed_shard.output.tgt.format(encoder=enc, shard=s)) for s in SHARDS]


def fit_corpus_files(wildcards):
    """The corpus files a fitted scorer's negatives come from (none for most), and the labelled
    evaluation file whose pairs are never negatives."""
    if not kind_says(wildcards.name, "corpus_negatives"):
        return []
    files = [f for triple in _fit_corpus(wildcards.name) for f in triple]
    return files + ([data_path(FILTER_EVAL["paracrawl"])] if FILTER_EVAL and FILTER_EVAL.get("paracrawl") else [])


def fit_corpus_args(wildcards):
    if not kind_says(wildcards.name, "corpus_negatives"):
        return ""
    args = "--corpus " + " ".join(shlex.quote(",".join(t)) for t in _fit_corpus(wildcards.name))
    if FILTER_EVAL and FILTER_EVAL.get("paracrawl"):
        args += f" --exclude-pairs {shlex.quote(data_path(FILTER_EVAL['paracrawl']))}"
    return args


def held_out_files(wildcards=None):
    return [data_path(h[side]) for h in HEADS.get("held_out", []) for side in ("src", "tgt")]


def held_out_args(wildcards=None):
    return " ".join(shlex.quote(f"{h['src_lang']},{h['tgt_lang']},{data_path(h['src'])},{data_path(h['tgt'])}")
                    for h in HEADS.get("held_out", []))


def _check_scorers():
    """Plan-time errors naming the config key (marginmine.scoring.plan): an unknown encoder, kind or
    param, a method that names no scorer, a suite scorer or baseline that does not fit."""
    check_scorer_config(SCORERS, METHODS, list(ENCODER_DIRS), plugins=PLUGINS, suite=PAPERS,
                        suite_scorers=PAPER_SCORERS, held_out=HEADS.get("held_out", []))


_check_scorers()
# every scorer gets a selection per N; NMT trains selection.methods only
SELECTED = METHODS + [name for name in SCORERS if name not in METHODS]
PAPER_SELECTED = PAPER_METHODS + [name for name in PAPER_SCORERS if name not in PAPER_METHODS]
SCORED_ENCODERS = list(dict.fromkeys(s["encoder"] for s in SCORERS.values()))
ALL_SCORED_ENCODERS = list(dict.fromkeys(s["encoder"] for s in ALL_SCORERS.values()))
ALL_GROUPS = list(dict.fromkeys(score_group(n) for n in ALL_SCORERS))
GROUP_ENCODERS = {score_group(n): s["encoder"] for n, s in ALL_SCORERS.items()}
FITTED = [n for n in ALL_SCORERS if is_fitted(n)]
#: score groups whose scorers vote over translations (rule score_translated, translate.smk)
TRANSLATED_GROUPS = [score_group(n) for n in ALL_SCORERS if kind_says(n, "translated")]

#: what each target's tables hold: the experiment (`demo`, `all` ...), and the published scorers'
#: suite (`seeds`) with the experiment's baselines (their scorers, selections and systems) beside
SUITES = {
    "main": {"scorers": list(SCORERS), "selected": SELECTED, "methods": METHODS,
             "encoders": EVALUATED_ENCODERS},
    "seeds": {"scorers": [m for m in PAPER_BASELINES if m in SCORERS] + list(PAPER_SCORERS),
              "selected": PAPER_BASELINES + PAPER_SELECTED, "methods": PAPER_BASELINES + PAPER_METHODS,
              "encoders": [DEFAULT_ENCODER, *PAPER_ENCODERS]},
}


def seeds_margin_args():
    """--margins of the suite's intrinsic evaluation: cosine, ratio, and each margin function a suite
    scorer's kind mines with (Eq. 9 / 10), as the kinds declare (`mines`)."""
    from marginmine.scoring.margin import MARGINS

    margins = ["absolute", "ratio"]
    for name in SUITES["seeds"]["scorers"]:
        m = kind_says(name, "mines", None)
        if m in MARGINS and m not in margins:
            margins.append(m)
    return f"--margins {','.join(margins)}"


def similarity_scorers():
    """The suite's selection methods whose kind scores every pair of two sets (`pair_matrix`, e.g.
    mlp): the intrinsic table also retrieves with them (seeds_eval_similarity)."""
    return [n for n in PAPER_METHODS if n in PAPER_SCORERS and kind_says(n, "pair_matrix", None)]


def pair_intrinsic_set_args(wildcards=None):
    """--set of the intrinsic sets in the experiment's language pair (either orientation)."""
    args = []
    for item in config.get("intrinsic", []):
        if {item["src_lang"], item["tgt_lang"]} == {SRC, TGT}:
            a, b = source_files(f"intrinsic-{item['name']}", item["source"])
            spec = f"{item['name']},{item['kind']},{item['src_lang']},{item['tgt_lang']},{a},{b}"
            args.append(f"--set {shlex.quote(spec)}")
    return " ".join(args)


def suite_groups(suite):
    return list(dict.fromkeys(score_group(n) for n in SUITES[suite]["scorers"]))


def suite_encoders(suite):
    """The encoders a suite's scorers use."""
    return list(dict.fromkeys(ALL_SCORERS[n]["encoder"] for n in SUITES[suite]["scorers"]))


def scorers_json(names):
    """{name: {kind, encoder, params...}} of the named scorers, as the CLI takes it; a fitted
    scorer's head directory is its `head` param."""
    return json.dumps({name: {"kind": ALL_SCORERS[name]["kind"], "encoder": ALL_SCORERS[name]["encoder"],
                              **ALL_SCORERS[name].get("params", {}),
                              **({"head": head_dir(name)} if is_fitted(name) else {})} for name in names})


def group_scorers_json(group):
    return scorers_json([n for n in ALL_SCORERS if score_group(n) == group])


def encoder_json(name):
    return f"{ENCODER_DIRS[name]}/encoder.json"


def scored_encoder_args(suite):
    return [f"{name}={ENCODER_DIRS[name]}" for name in suite_encoders(suite)]


def score_files(group):
    return expand(rules.score_shard.output, group=group, shard=SHARDS)


def select_scores(wildcards):
    return score_files(score_group(wildcards.method)) if wildcards.method in ALL_SCORERS else []


def select_args(wildcards):
    if wildcards.method == "unfiltered":
        return "--method unfiltered"
    return f"--method {shlex.quote(wildcards.method)} -n {wildcards.N}"


def density_scorers():
    """(margin scorer, its kind, cosine scorer) over one encoder for composition's density section:
    the first margin scorer among the methods (then the scorers) with a cosine scorer beside it."""
    for name in [*METHODS, *SCORERS]:
        s = SCORERS.get(name)
        if s and s["kind"] in ("ratio", "distance"):
            for other, t in SCORERS.items():
                if t["encoder"] == s["encoder"] and t["kind"] in ("cosine", "absolute"):
                    return name, s["kind"], other
    return None


def _pair_arg(items):
    """SRC,TGT arguments (a list: the shell command quotes each with :q)."""
    return [f"{data_path(p['src'])},{data_path(p['tgt'])}" for p in items]


def mining_eval_files(wildcards=None):
    e = MINING_EVAL
    files = [data_path(p[s]) for p in e["gold_train"] + e["gold_test"] for s in ("src", "tgt")]
    return files + [data_path(p) for p in e["mono_src"] + e["mono_tgt"]]


def filter_eval_inputs(suite):
    def inputs(wildcards=None):
        out = {"encoders": [encoder_json(e) for e in suite_encoders(suite)]}
        heads = head_inputs(SUITES[suite]["scorers"])
        if heads:
            out["heads"] = heads
        if FILTER_EVAL and FILTER_EVAL.get("paracrawl"):
            out["paracrawl"] = data_path(FILTER_EVAL["paracrawl"])
            if suite_votes(suite):
                out["paracrawl_translated"] = text_translations("paracrawl.")
        if LABELLED_CORPUS:
            out["labels"] = f"{WORK}/corpus/demo.labels.tsv"
            out["pairs"] = expand(rules.preprocess_shard.output.kept, shard=SHARDS)
            out["scores"] = [f for g in suite_groups(suite) for f in score_files(g)]
            corpus = negatives_corpus(suite)
            if corpus:
                out["corpus"] = [f for triples in corpus.values() for t in triples for f in t]
        return out

    return inputs


def negatives_corpus(suite):
    """encoder -> the corpus (shard, embeddings) triples of the suite's scorers fitted against corpus
    negatives (mlp): the quality table also scores them without their own negatives."""
    names = [n for n in SUITES[suite]["scorers"] if kind_says(n, "corpus_negatives")]
    return {ALL_SCORERS[n]["encoder"]: _fit_corpus(n) for n in names}


def _quoted(paths):
    return " ".join(shlex.quote(str(p)) for p in paths)


def filter_eval_args(suite):
    """Options with paths, each quoted (the shell command uses them as they are)."""

    def args(wildcards, input):
        out = []
        if "paracrawl" in input.keys():
            out.append(f"--paracrawl {shlex.quote(input.paracrawl)}")
        if "paracrawl_translated" in input.keys():
            out.append(f"--paracrawl-translated {_quoted(input.paracrawl_translated)}")
        if "labels" in input.keys():
            out.append(f"--demo-labels {shlex.quote(input.labels)} --pairs {_quoted(input.pairs)}")
            out += [f"--scores {_quoted(score_files(g))}" for g in suite_groups(suite)]
            corpus = negatives_corpus(suite)
            if corpus:
                triples = _quoted(f"{e}={','.join(t)}" for e, ts in corpus.items() for t in ts)
                out.append(f"--corpus {triples}")
        return " ".join(out)

    return args


def composition_inputs(suite):
    def inputs(wildcards=None):
        out = {"labels": f"{WORK}/corpus/demo.labels.tsv",
               "selections": expand(rules.select_top.output.pairs, method=SUITES[suite]["selected"], N=SIZES)}
        if suite == "main" and density_scorers():
            out["pairs"] = expand(rules.preprocess_shard.output.kept, shard=SHARDS)
            out["scores"] = score_files(score_group(density_scorers()[0]))
        return out

    return inputs


def composition_density_args(wildcards, input, output):
    if "scores" not in input.keys():  # no margin + cosine scorer pair over one encoder: an empty table
        return f"--density-tsv {shlex.quote(output.density)}"
    margin, kind, cosine = density_scorers()
    return (f"--pairs {_quoted(input.pairs)} --scores {_quoted(input.scores)} --margin {kind} "
            f"--margin-column {shlex.quote(margin)} --cosine-column {shlex.quote(cosine)} "
            f"--density-tsv {shlex.quote(output.density)}")


def plugin_args(wildcards=None):
    return " ".join(f"--plugin {shlex.quote(m)}" for m in PLUGINS)


def scoring_targets():
    """Selections for every scorer, method and size, and the scorers' evaluations where configured."""
    out = expand(rules.select_top.output.report, method=SELECTED, N=SIZES)
    if MINING_EVAL:
        out += rules.eval_mining.output
    if FILTER_EVAL or LABELLED_CORPUS:
        out += rules.eval_filter.output
    if LABELLED_CORPUS:
        out += rules.selection_composition.output
    return out


def seeds_targets():
    """What `seeds` builds: the suite's tables and summary (nothing when the config has no `seeds:`)."""
    if not PAPERS:
        return []
    out = [rules.seeds_encoder_report.output.md, rules.seeds_compare.output.md, rules.seeds_summary.output.md]
    if MINING_EVAL:
        out.append(rules.seeds_eval_mining.output.md)
    if FILTER_EVAL or LABELLED_CORPUS:
        out.append(rules.seeds_eval_filter.output.md)
    if LABELLED_CORPUS:
        out.append(rules.seeds_composition.output.md)
    if suite_votes("seeds"):
        out.append(rules.seeds_vote_report.output.md)
    return out


# --- NMT ----------------------------------------------------------------------------------

NMT = config["nmt"]
DEFAULT_METHOD = METHODS[0]
EXTRA_EVAL = list(config["eval"].get("extra", {}))


def _method_seeds():
    """Training seeds per selection method (nmt.seeds, nmt.method_seeds overriding), validated."""
    from marginmine.nmt.significance import validate_seeds

    default = validate_seeds(NMT["seeds"], "nmt.seeds")
    overrides = NMT.get("method_seeds", {})
    known = [*ALL_SCORERS, "random", "unfiltered"]  # an entry for a method not trained now is harmless
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(f"nmt.method_seeds: {unknown} are neither scorers nor random/unfiltered ({', '.join(known)})")
    return {m: validate_seeds(overrides[m], f"nmt.method_seeds.{m}") if m in overrides else default
            for m in METHODS + PAPER_METHODS}


SEEDS = _method_seeds()


def nmt_systems(methods=None):
    """(method, N, seed) of every NMT system to train."""
    return [(m, n, s) for m in (methods or METHODS) for n in SIZES for s in SEEDS[m]]


def nmt_params_json(wildcards=None):
    return json.dumps({"arch": NMT["arch"], **NMT.get("params", {})}, sort_keys=True)


def nmt_budget_arg(wildcards=None):
    minutes = NMT.get("max_minutes")
    return f"--max-minutes {minutes}" if minutes else ""


def nmt_runtime(wildcards=None):
    minutes = NMT.get("max_minutes")
    return int(minutes * 1.5 + 15) if minutes else 3 * 24 * 60


def extra_eval_sets(wildcards):
    """The extra test sets this method's system decodes (an extra set's `methods`, default all)."""
    return [n for n in EXTRA_EVAL if wildcards.method in EVAL_SETS[n].get("methods", METHODS + PAPER_METHODS)]


def extra_eval_files(wildcards):
    return [f for name in extra_eval_sets(wildcards) for f in eval_files(name)]


def extra_eval_args(wildcards):
    args = [f"{name},{','.join(eval_files(name))}" for name in extra_eval_sets(wildcards)]
    return f"--extra {_quoted(args)}" if args else ""


def _labels_of(name):
    src = EVAL_SETS[name]
    if src["kind"] == "heldout":
        return f"{CLEAN_MIX_PREFIX}.{src['split']}.labels.tsv"
    return None


def subset_labels():
    """Test sets held out from the labelled corpus, with their labels (BLEU per clean origin; dev is
    not a test set)."""
    return {name: _labels_of(name) for name in EVAL_SETS if name != "dev" and _labels_of(name)}


def subset_args(wildcards=None):
    args = [f"{name}={path}" for name, path in subset_labels().items()]
    return f"--subsets {_quoted(args)}" if args else ""


def nmt_targets():
    """The headline BLEU files and the method comparison."""
    return bleu_targets() + [f"{RESULTS}/comparison.tsv"]
