"""The config read once (the schema, ``config/schema.yaml``, has filled every default by Snakemake's
``validate``): the experiment's directories, shards, sizes, methods, thresholds, eval sets and
sources, and the plan-time checks that refuse a config with its key named. The base of
:class:`marginmine.workflow.Plan`; the stages' parts build on it."""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from marginmine.io.sizes import check_thresholds, resolve_sizes
from marginmine.preprocess.shard import shard_ids
from marginmine.workflow.checks import expected_kept
from marginmine.workflow.paths import Paths

#: corpora the workflow builds from data_dir, with a labels sidecar naming every pair's origin and kind
BUILT_CORPORA = ("demo", "scale")
#: the keys of a source that only an eval set may have
EVAL_ONLY_KEYS = ("sample", "methods")

Source = Mapping[str, Any]


def quoted(items: Iterable[object]) -> str:
    """Shell words, each quoted."""
    return " ".join(shlex.quote(str(p)) for p in items)


def sacrebleu_id(src: Source) -> str:
    """File-name form of a sacreBLEU set: wmt14/full + en-de -> wmt14_full.en-de."""
    return f"{re.sub(r'[^A-Za-z0-9.-]', '_', src['test_set'])}.{src['langpair']}"


def source_columns(src: Source) -> str:
    return ",".join(str(c) for c in src["columns"])


class Config:
    """The config's derived values and the sources' files (the base part of the plan)."""

    config: Mapping[str, Any]

    def _init_config(self, config: Mapping[str, Any], environ: Mapping[str, str]) -> None:
        self.config = config
        self.exp = config["experiment"]
        self.results = config.get("results_dir", f"results/{self.exp}")
        self.work = f"work/{self.exp}"
        #: --caps-from of the tables and pages: the directories whose models' time-cap warnings they
        #: print (marginmine.timecap; on_time_cap: warn)
        self.caps_from = quoted((self.results, self.work))
        self.logs = f"{self.work}/logs"
        self.bench = f"{self.work}/benchmarks"
        self.src, self.tgt = config["src_lang"], config["tgt_lang"]
        self.paths = Paths(self.work, self.results, self.src, self.tgt)
        # absolute and normalised: `make demo` (MARGINMINE_DATA_DIR=/abs/path) and a plain `snakemake`
        # (data_dir ../shared/data) name the same directory, so they give the same params
        self.data_dir = Path(os.path.abspath(os.path.expanduser(
            config.get("data_dir") or environ.get("MARGINMINE_DATA_DIR") or "../shared/data")))
        self.max_job_threads = config["job_threads"]
        pre = self.pre = config["preprocess"]
        if pre["min_tokens"] > pre["max_tokens"]:
            raise ValueError(f"preprocess.min_tokens {pre['min_tokens']} > preprocess.max_tokens "
                             f"{pre['max_tokens']}: no pair could be kept")
        self.langid_args = self._langid_args()
        self.shard_size = pre["shard_size"]
        self.n_shards = max(1, math.ceil(config["corpus"]["expected_pairs"] / self.shard_size))
        self.shards = shard_ids(self.n_shards)
        self.eval_sets = {"dev": config["eval"]["dev"], "test": config["eval"]["test"],
                          **config["eval"].get("extra", {})}
        #: the pairs expected after preprocessing (corpus.expected_pairs x preprocess.expected_keep)
        self.expected_kept = expected_kept(config["corpus"]["expected_pairs"], pre["expected_keep"])
        #: N as count labels; a share ("10%") is that share of the pairs expected after preprocessing
        self.sizes = resolve_sizes(config["selection"]["sizes"], self.expected_kept)
        self.methods = config["selection"]["methods"]
        #: scorer -> the score thresholds it also selects by (selection.thresholds): selections {method}.t{T}
        self.thresholds = {name: [float(t) for t in ts]
                           for name, ts in config["selection"].get("thresholds", {}).items()}
        for name, ts in self.thresholds.items():
            check_thresholds(f"selection.thresholds.{name}", ts)
        self.sources = self._sources()
        self.url_sources = self._url_sources()
        # clean-mix dev/test sets the demo or scale corpus holds out (rules demo_corpus, scale_corpus)
        self.clean_mix = dict(config["corpus"]["source"].get("heldout", {}))
        if self.clean_mix and config["corpus"]["source"]["kind"] not in BUILT_CORPORA:
            raise ValueError("corpus.source.heldout: only the demo and scale corpora hold out clean-mix sets")
        self.clean_mix_prefix = f"{self.work}/corpus/heldout"
        self.sacrebleu_sets = {sacrebleu_id(s): s for s in [*self.eval_sets.values(),
                                                             *(i["source"] for i in config.get("intrinsic", []))]
                               if s["kind"] == "sacrebleu"}
        #: eval sets taken as a seeded slice of a larger test set (`sample:`), written by rule heldout_set
        self.heldout = [name for name, src in self.eval_sets.items() if "sample" in src]
        self._check_eval_sets()
        self._check_data_dir()

    def _langid_args(self) -> str:
        """``marginmine preprocess``'s language-id options: --no-langid, nothing for the default
        identifier, else --langid-model (a model file under data_dir); the corpus' languages checked."""
        from marginmine.errors import MarginmineError
        from marginmine.preprocess.langid import FASTTEXT, HELIPORT, check_language
        from marginmine.workflow.checks import cached_labels

        pre = self.config["preprocess"]
        if not pre["langid"]:
            return "--no-langid"
        model = pre["langid_model"]
        path = model if model in (FASTTEXT, HELIPORT) else self.data_path(model)
        if path not in (FASTTEXT, HELIPORT) and not Path(path).is_file():
            raise ValueError(f"preprocess.langid_model: {path} does not exist (fasttext, heliport or a fastText "
                             "model file; relative paths are read under data_dir)")
        labels = None if path in (FASTTEXT, HELIPORT) else cached_labels(Path(path))
        for lang in (self.src, self.tgt):
            try:
                check_language(lang, path, labels)
            except MarginmineError as exc:
                raise ValueError(f"preprocess.langid_model: {exc}") from exc
        return "" if model == FASTTEXT else f"--langid-model {quoted([path])}"

    # --- helpers every stage uses -------------------------------------------------------------

    def job_threads(self, wanted: int) -> int:
        """A rule's threads, capped by the config's job_threads."""
        return max(1, min(int(wanted), self.max_job_threads))

    def data_path(self, rel: str) -> str:
        """A file below data_dir (absolute paths, ``~`` expanded, pass through)."""
        p = Path(rel).expanduser()
        return str(p if p.is_absolute() else self.data_dir / p)

    def langs_arg(self) -> str:
        return f"--src-lang {self.src} --tgt-lang {self.tgt}"

    # --- sources: every url source gets a stable name, so one download rule serves them all ----

    def _sources(self) -> list[tuple[str, str, Source]]:
        """(config key, name, source) of every configured source; the name keys its downloads."""
        config = self.config
        enc, intr = config.get("encoder", {}).get("train", []), config.get("intrinsic", [])
        return ([("corpus.source", "corpus", config["corpus"]["source"])]
                + [(f"encoder.train {i['name']}", f"encoder-{i['name']}", i["source"]) for i in enc]
                + [(f"intrinsic {i['name']}", f"intrinsic-{i['name']}", i["source"]) for i in intr]
                + [(f"eval.{name}", f"eval-{name}", src) for name, src in self.eval_sets.items()])

    def _url_sources(self) -> dict[str, Source]:
        flat: dict[str, Source] = {}
        for _, name, src in self.sources:
            if src["kind"] != "url":
                continue
            if "urls" in src:  # two separately downloaded sides
                flat.update({f"{name}-{side}": {"url": src["urls"][side]} for side in ("src", "tgt")})
            else:
                flat[name] = src
        return flat

    def download_path(self, name: str) -> str:
        return f"data/downloads/{name}/{Path(self.url_sources[name]['url']).name}"

    def download_sha256_arg(self, name: str) -> str:
        sha = self.url_sources[name].get("sha256")
        return f"--sha256 {sha}" if sha else ""

    def source_files(self, name: str, src: Source) -> list[str]:
        """The local files a source resolves to: [tsv] or [src, tgt]."""
        kind = src["kind"]
        if kind == "local":
            if "path" in src:
                return [self.data_path(src["path"])]
            return [self.data_path(src["src"]), self.data_path(src["tgt"])]
        if kind == "url":
            if "urls" in src:
                return [self.download_path(f"{name}-{side}") for side in ("src", "tgt")]
            if "members" in src:
                return [f"data/sources/{name}/{src['members'][s]}" for s in ("src", "tgt")]
            return [self.download_path(name)]
        if kind in BUILT_CORPORA:
            return [f"{self.work}/corpus/{kind}.tsv.gz"]
        if kind == "heldout":
            if src["split"] not in self.clean_mix:
                raise ValueError(f"{name}: heldout split {src['split']!r} is not one of corpus.source.heldout "
                                 f"({', '.join(self.clean_mix) or 'none configured'})")
            return [f"{self.clean_mix_prefix}.{src['split']}.{lang}" for lang in ("en", "de")]
        if kind == "tatoeba_share":
            return [f"{self.work}/encoder/sources/tatoeba-share.{lang}" for lang in ("en", "de")]
        if kind == "sacrebleu":
            stem = f"data/sacrebleu/{sacrebleu_id(src)}"
            return [f"{stem}.src", f"{stem}.ref"]
        raise ValueError(f"unknown source kind {kind!r} for {name}")

    def corpus_files(self) -> list[str]:
        return self.source_files("corpus", self.config["corpus"]["source"])

    def corpus_columns(self) -> str:
        return source_columns(self.config["corpus"]["source"])

    def clean_mix_files(self, built_by: str | None = None) -> list[str]:
        """The held-out files; ``built_by`` (a built corpus' kind): only if that corpus is this config's."""
        if built_by is not None and built_by != self.config["corpus"]["source"]["kind"]:
            return []
        return [f"{self.clean_mix_prefix}.{s}.{x}" for s in self.clean_mix for x in ("en", "de", "labels.tsv")]

    def clean_mix_arg(self, built_by: str | None = None) -> str:
        if not self.clean_mix_files(built_by):
            return ""
        sizes = ",".join(f"{s}={n}" for s, n in self.clean_mix.items())
        return f"--heldout {sizes} --heldout-prefix {shlex.quote(self.clean_mix_prefix)}"

    def eval_files(self, name: str) -> list[str]:
        """(source, reference) of an eval set: a seeded slice's, or its source's files."""
        if name not in self.eval_sets:
            raise ValueError(f"protect: {name!r} is neither an eval set nor a file below data_dir")
        if name in self.heldout:
            return [f"{self.work}/eval/{name}.{self.src}", f"{self.work}/eval/{name}.{self.tgt}"]
        return self.source_files(f"eval-{name}", self.eval_sets[name])

    def heldout_inputs(self, name: str) -> dict[str, str]:
        src, tgt = self.source_files(f"eval-{name}", self.eval_sets[name])
        return {"src": src, "tgt": tgt}

    def heldout_args(self, name: str) -> str:
        sample = self.eval_sets[name]["sample"]
        return f"--start {sample.get('start', 0)} --size {sample['size']} --seed {sample.get('seed', 1)}"

    def protect_files(self) -> list[str]:
        """Files whose sentences must never enter the corpus: eval sets by name, or data_dir paths."""
        out: list[str] = []
        for item in self.config.get("protect", []):
            out += self.eval_files(item) if item in self.eval_sets else [self.data_path(item)]
        return out

    # --- plan-time checks: a bad key or a missing data_dir or local file fails `snakemake -n` --

    def _check_eval_sets(self) -> None:
        config = self.config
        for name, src in [("corpus", config["corpus"]["source"]),
                          *((f"encoder.train {i['name']}", i["source"])
                            for i in config.get("encoder", {}).get("train", [])),
                          *((f"intrinsic {i['name']}", i["source"]) for i in config.get("intrinsic", []))]:
            if any(k in src for k in EVAL_ONLY_KEYS):
                raise ValueError(f"{name}: 'sample' and 'methods' apply to eval sets only")
        for name in ("dev", "test"):
            if "methods" in self.eval_sets[name]:
                raise ValueError(f"eval.{name}: every system decodes dev and test; "
                                 "'methods' applies to eval.extra only")
        # a method with no system in this run is harmless (e.g. a published baseline outside `make published`)
        systems = [*self.methods, *config.get("scorers", {}), *(config.get("published") or {}).get("scorers", {}),
                   "random", "unfiltered"]
        for name, src in self.eval_sets.items():
            unknown = sorted(set(src.get("methods", [])) - set(systems))
            if unknown:
                raise ValueError(f"eval.extra.{name}.methods: {unknown} are neither selection methods nor "
                                 f"scorers ({', '.join(dict.fromkeys(systems))})")

    def _data_dir_readers(self) -> list[tuple[str, str | None]]:
        """(config key, path) of every input file the config names (relative paths are below data_dir:
        docs/configuration.md, "Paths"; a pre-trained encoder's files: marginmine.encoders.INPUT_PATHS);
        (key, None) for the builders that read data_dir themselves (the demo corpus, the Tatoeba share)."""
        config = self.config
        out: list[tuple[str, str | None]] = []
        for key, _, src in self.sources:
            if src["kind"] == "local":
                out += [(key, src[f]) for f in ("path", "src", "tgt") if f in src]
            elif src["kind"] in (*BUILT_CORPORA, "tatoeba_share"):
                out.append((key, None))
        out += [("protect", p) for p in config.get("protect", []) if p not in self.eval_sets]
        e = config.get("mining_eval")
        if e:
            out += [("mining_eval", p[s]) for p in e["gold_train"] + e["gold_test"] for s in ("src", "tgt")]
            out += [("mining_eval", p) for p in e["mono_src"] + e["mono_tgt"]]
        if (config.get("filter_eval") or {}).get("paracrawl"):
            out.append(("filter_eval.paracrawl", config["filter_eval"]["paracrawl"]))
        heads = config.get("heads") or {}
        out += [("heads.held_out", h[s]) for h in heads.get("held_out", []) for s in ("src", "tgt")]
        positives = [("heads.positives", heads.get("positives") or {})]
        positives += [(f"{where}.{name}.positives", sc.get("positives") or {})
                      for where, group in (("scorers", config.get("scorers") or {}),
                                           ("published.scorers", (config.get("published") or {}).get("scorers", {})))
                      for name, sc in group.items()]
        out += [(key, f[s]) for key, p in positives for f in p.get("files", []) for s in ("src", "tgt")]
        if (config.get("audit") or {}).get("labels_file"):
            out.append(("audit.labels_file", config["audit"]["labels_file"]))
        return out

    def _check_data_dir(self) -> None:
        readers = self._data_dir_readers()
        below = [key for key, rel in readers if rel is None or not Path(rel).expanduser().is_absolute()]
        if below and not self.data_dir.is_dir():
            raise ValueError(f"data_dir: {self.data_dir} does not exist (or is not a directory), but {below[0]} reads "
                             "from it (set data_dir in the config, --config data_dir=DIR, or MARGINMINE_DATA_DIR)")
        for key, rel in readers:
            if rel is not None and not Path(self.data_path(rel)).is_file():
                what = (f"{rel!r} is neither an eval set ({', '.join(self.eval_sets)}) nor a file: "
                        if key == "protect" else "")
                raise ValueError(f"{key}: {what}{self.data_path(rel)} does not exist (data_dir: {self.data_dir})")
