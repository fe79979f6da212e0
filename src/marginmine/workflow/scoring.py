"""The scoring stage's plan (rules/score.smk): scorers and their score groups, fitted scorers' heads,
selections, the suites (the experiment's and the published scorers'), and the plan-time checks of
the scorers and of the run's scale.

A scorer (config ``scorers:``) is a name, an encoder and a score kind registered in the package
(marginmine.scoring; ``plugins:`` modules register more). Each encoder a scorer uses is embedded;
its scorers share one self-describing score file per shard (a header names the columns)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

from marginmine.io.sizes import threshold_label
from marginmine.workflow.checks import check_scale, check_scorer_config, planned_dim
from marginmine.workflow.config import BUILT_CORPORA
from marginmine.workflow.paths import expand


class Scoring:
    """Part of :class:`marginmine.workflow.Plan` (after the encoders' part)."""

    def _init_scoring(self, note: Callable[[str], None]) -> None:
        config = self.config
        self.scoring = config["scoring"]
        self.mining_eval = config.get("mining_eval")
        self.filter_eval = config.get("filter_eval")
        #: a corpus the workflow builds: its sidecar names every pair's origin
        self.labelled_corpus = config["corpus"]["source"]["kind"] in BUILT_CORPORA
        self.corpus_labels = f"{self.work}/corpus/{config['corpus']['source']['kind']}.labels.tsv"
        self.plugins = list(config.get("plugins", []))
        self.heads = config.get("heads") or {}
        default = self.default_encoder
        self.scorers = {name: {**s, "encoder": s.get("encoder", default)} for name, s in config["scorers"].items()}
        self.paper_scorers = {name: {**s, "encoder": s.get("encoder", default)}
                              for name, s in self.papers.get("scorers", {}).items()}
        self.paper_methods = list(self.papers.get("methods", []))
        self.paper_baselines = list(self.papers.get("baselines", []))
        #: further methods the suite's systems are tested against (published_compare_versus)
        self.paper_references = list(self.papers.get("references", []))
        self.all_scorers = {**self.scorers, **self.paper_scorers}
        # plan-time errors naming the config key (marginmine.workflow.checks)
        check_scorer_config(self.scorers, self.methods, list(self.encoder_dirs), plugins=self.plugins,
                            suite=self.papers, suite_scorers=self.paper_scorers,
                            held_out=self.heads.get("held_out", []), positives=self.heads.get("positives", {}))
        #: (N, methods) of published.small: a smaller N at which a few suite methods are also trained
        self.paper_small = self._paper_small()
        # every scorer gets a selection per N; NMT trains selection.methods only
        self.selected = self.methods + [n for n in self.scorers if n not in self.methods]
        self.paper_selected = self.paper_methods + [n for n in self.paper_scorers if n not in self.paper_methods]
        #: every method select_top serves
        self.selectable = list(dict.fromkeys(self.selected + self.paper_baselines + self.paper_selected))
        self.scored_encoders = list(dict.fromkeys(s["encoder"] for s in self.scorers.values()))
        self.all_scored_encoders = list(dict.fromkeys(s["encoder"] for s in self.all_scorers.values()))
        self.all_groups = list(dict.fromkeys(self.score_group(n) for n in self.all_scorers))
        self.group_encoders = {self.score_group(n): s["encoder"] for n, s in self.all_scorers.items()}
        self.fitted = [n for n in self.all_scorers if self.is_fitted(n)]
        #: score groups whose scorers vote over translations (rule score_translated)
        self.translated_groups = [self.score_group(n) for n in self.all_scorers if self.kind_says(n, "translated")]
        #: the score groups rule score_shard writes (the others: score_translated)
        self.untranslated_groups = [g for g in self.all_groups if g not in self.translated_groups]
        for line in self._check_scale():
            note(line)
        #: what each target's tables hold: the experiment (`demo`, `all` ...), and the published scorers'
        #: suite (`published`) with the experiment's baselines (their scorers, selections and systems) beside
        self.suites = {
            "main": {"scorers": list(self.scorers), "selected": self.selected, "methods": self.methods,
                     "encoders": self.evaluated_encoders},
            "published": {"scorers": [m for m in self.paper_baselines if m in self.scorers] + list(self.paper_scorers),
                          "selected": self.paper_baselines + self.paper_selected,
                          "methods": self.paper_baselines + self.paper_methods,
                          "encoders": [default, *self.paper_encoders]},
        }
        unknown = [m for m in self.thresholds if m not in self.scorers]
        if unknown:
            raise ValueError(f"selection.thresholds: {unknown} are not scorers of this config "
                             f"({', '.join(self.scorers)}): a threshold belongs to one scorer's scores")

    def _paper_small(self) -> tuple[str, list[str]] | None:
        from marginmine.io.sizes import resolve_sizes

        small = self.papers.get("small")
        if not small:
            return None
        known = self.paper_methods + self.paper_baselines
        unknown = [m for m in small["methods"] if m not in known]
        if unknown:
            raise ValueError(f"published.small.methods: {unknown} are not of published.methods or published.baselines "
                             f"({', '.join(known)})")
        (size,) = resolve_sizes([small["size"]], self.expected_kept)
        if size in self.sizes:
            raise ValueError(f"published.small.size: {small['size']} is already one of selection.sizes")
        return size, list(small["methods"])

    def _check_scale(self) -> list[str]:
        """Plan-time refusals of a run that cannot be meant (N >= the pairs expected after
        preprocessing; a scoring batch above scoring.max_cpu_hours on a CPU), naming the keys, and
        each scored encoder's scoring estimate and shard-size note (lines for `snakemake -n`)."""
        dims = {name: planned_dim(self.encoder_model(self.encoder_dirs[name])) for name in self.all_scored_encoders}
        s, spec = self.scoring, self.index_spec()
        return check_scale(expected_pairs=self.config["corpus"]["expected_pairs"],
                           expected_keep=self.pre["expected_keep"], sizes=self.sizes, shard_size=self.shard_size,
                           batch_size=s["batch_size"], spec=spec, dims=dims, device=s["device"],
                           max_cpu_hours=s["max_cpu_hours"], k=s["k"])

    def index_spec(self) -> Any:
        """The kNN index the scoring jobs search with (scoring.index, nlist, nprobe, refine, device)."""
        from marginmine.search.knn import IndexSpec

        s = self.scoring
        return IndexSpec(kind=s["index"], nlist=s["nlist"], nprobe=s["nprobe"], refine=s["refine"], device=s["device"])

    # --- scorers and their score files ---------------------------------------------------------

    def kind_says(self, name: str, attribute: str, default: Any = False) -> Any:
        """What a scorer's kind declares about itself (`fitted`, `corpus_negatives`, `mines`,
        `translated`, `pair_matrix`): the workflow asks the kind, it never knows kinds by name."""
        from marginmine.scoring import KINDS

        return getattr(KINDS[self.all_scorers[name]["kind"]], attribute, default)

    def is_fitted(self, name: str) -> bool:
        """A scorer whose kind has a head fitted on its positives (heads.positives)."""
        return self.kind_says(name, "fitted")

    def score_group(self, name: str) -> str:
        """The score files a scorer's column is in: its encoder's (work/<exp>/score/<encoder>/), or for
        a `published:` scorer the suite's own (work/<exp>/score/published/<encoder>/), so the
        experiment's score files never change when the suite is added. A fitted scorer has files of
        its own (.../<encoder>/<name>/): refitting its head rescores nothing else. The scorers that vote
        over translations share files of their own (.../<encoder>/votes/): they wait for the
        translations, no other scorer does, and one job computes the three searches once for all."""
        s = self.all_scorers[name]
        group = f"published/{s['encoder']}" if name in self.paper_scorers else s["encoder"]
        if self.is_fitted(name):
            return f"{group}/{name}"
        return f"{group}/votes" if self.kind_says(name, "translated") else group

    def group_encoder(self, group: str) -> str:
        return self.group_encoders[group]

    def group_scorers(self, group: str) -> list[str]:
        return [n for n in self.all_scorers if self.score_group(n) == group]

    def scorers_json(self, names: list[str]) -> str:
        """{name: {kind, encoder, params...}} of the named scorers, as the CLI takes it; a fitted
        scorer's head directory is its `head` param."""
        return json.dumps({name: {"kind": self.all_scorers[name]["kind"], "encoder": self.all_scorers[name]["encoder"],
                                  **self.all_scorers[name].get("params", {}),
                                  **({"head": self.head_dir(name)} if self.is_fitted(name) else {})}
                           for name in names})

    def plugin_args(self) -> str:
        return " ".join(f"--plugin {shlex.quote(m)}" for m in self.plugins)

    def score_files(self, group: str) -> list[str]:
        return expand(self.paths.scores, group=[group], shard=self.shards)

    def baseline_files(self, group: str) -> list[str]:
        """The noise baselines written beside score_files(group), same order."""
        return expand(self.paths.baseline, group=[group], shard=self.shards)

    def scorer_score_files(self, name: str) -> list[str]:
        return self.score_files(self.score_group(name))

    def scorers_score_files(self, names: list[str]) -> list[str]:
        """The score files of the named scorers, each once (scorers of one group share files)."""
        return list(dict.fromkeys(f for n in names for f in self.scorer_score_files(n)))

    def scorer_files_args(self, names: list[str]) -> str:
        """NAME=FILE,FILE... of the named scorers' score files (their groups' shards), each quoted."""
        return " ".join(shlex.quote(f"{n}=" + ",".join(self.scorer_score_files(n))) for n in names)

    def kept_files(self) -> list[str]:
        """Every preprocessed shard."""
        return expand(self.paths.kept, shard=self.shards)

    def suite_groups(self, suite: str) -> list[str]:
        return list(dict.fromkeys(self.score_group(n) for n in self.suites[suite]["scorers"]))

    def suite_encoders(self, suite: str) -> list[str]:
        """The encoders a suite's scorers use."""
        return list(dict.fromkeys(self.all_scorers[n]["encoder"] for n in self.suites[suite]["scorers"]))

    def scored_encoder_args(self, suite: str) -> list[str]:
        return self.encoder_args(self.suite_encoders(suite))

    def suite_scorers_json(self, suite: str) -> str:
        return self.scorers_json(self.suites[suite]["scorers"])

    # --- fitted scorers' heads -----------------------------------------------------------------

    def head_dir(self, name: str) -> str:
        return self.paths.head.format(name=name).removesuffix("/head.json")

    def head_inputs(self, names: list[str]) -> list[str]:
        """The fitted heads' manifests of the named scorers (none for most)."""
        return [self.paths.head.format(name=n) for n in names if self.is_fitted(n)]

    def fit_corpus(self, name: str) -> list[tuple[str, str, str]]:
        """(shard, src embeddings, tgt embeddings) of the corpus, for a scorer whose negatives come from it."""
        enc = self.all_scorers[name]["encoder"]
        return [(self.paths.kept.format(shard=s), self.paths.embed_src.format(encoder=enc, shard=s),
                 self.paths.embed_tgt.format(encoder=enc, shard=s)) for s in self.shards]

    def _paracrawl(self) -> str | None:
        return self.data_path(self.filter_eval["paracrawl"]) if self.filter_eval and self.filter_eval.get("paracrawl") \
            else None

    def fit_corpus_files(self, name: str) -> list[str]:
        """The corpus files a fitted scorer's negatives come from (none for most), and the labelled
        evaluation file whose pairs are never negatives."""
        if not self.kind_says(name, "corpus_negatives"):
            return []
        files = [f for triple in self.fit_corpus(name) for f in triple]
        return files + ([self._paracrawl()] if self._paracrawl() else [])

    def fit_corpus_args(self, name: str) -> str:
        if not self.kind_says(name, "corpus_negatives"):
            return ""
        args = "--corpus " + " ".join(shlex.quote(",".join(t)) for t in self.fit_corpus(name))
        if self._paracrawl():
            args += f" --exclude-pairs {shlex.quote(self._paracrawl())}"
        return args

    def fit_protect_files(self) -> list[str]:
        """What a head's positives and held-out pairs must not hold: the encoder data's protected
        sets and the mining benchmark's files."""
        return sorted(set(self.encoder_protect_files() + (self.mining_eval_files() if self.mining_eval else [])))

    def held_out_files(self) -> list[str]:
        return [self.data_path(h[side]) for h in self.heads.get("held_out", []) for side in ("src", "tgt")]

    def file_pair_args(self, pairs: list[dict[str, str]]) -> str:
        return " ".join(shlex.quote(f"{h['src_lang']},{h['tgt_lang']},"
                                    f"{self.data_path(h['src'])},{self.data_path(h['tgt'])}")
                        for h in pairs)

    def held_out_args(self) -> str:
        return self.file_pair_args(self.heads.get("held_out", []))

    def head_positives(self, name: str) -> dict[str, Any]:
        """A fitted scorer's positives: heads.positives (the schema's default: a sample of the
        encoder data), each key of the scorer's own `positives` over it."""
        return {**self.heads.get("positives", {}), **self.all_scorers[name].get("positives", {})}

    def positives_files(self, name: str) -> list[str]:
        """The files a fitted scorer's positives come from (positives.from: files), else none."""
        p = self.head_positives(name)
        if p.get("from") != "files":
            return []
        return [self.data_path(h[side]) for h in p.get("files", []) for side in ("src", "tgt")]

    def fit_pretrained_arg(self, name: str) -> str:
        """fit-scorer's ``--pretrained`` (with a trailing space) when the scorer's encoder is of a kind
        that does not train on the encoder data (e.g. use-multilingual): its pairs then stay in the
        held-out pairs and the positives files (news test sets the DAN trains on are fair positives
        over USE); '' otherwise."""
        from marginmine.encoders import TRAINED_ON_DATA

        model = self.enc["models"].get(self.all_scorers[name]["encoder"])
        return "--pretrained " if model is not None and model["kind"] not in TRAINED_ON_DATA else ""

    def positives_args(self, name: str) -> str:
        """fit-scorer's --positives options (an unset key: the CLI's default, marginmine.defaults)."""
        p = self.head_positives(name)
        args = [f"--positives {shlex.quote(p['from'])}"] if "from" in p else []
        args += [f"--positives-size {int(p['size'])}"] if "size" in p and p.get("from") != "held_out" else []
        if p.get("from") == "files":
            args.append(f"--positives-files {self.file_pair_args(p.get('files', []))}")
        return " ".join(args)

    # --- selections ----------------------------------------------------------------------------

    def select_scores(self, method: str) -> list[str]:
        return self.scorer_score_files(method) if method in self.all_scorers else []

    def select_args(self, method: str, n: str) -> str:
        if method == "unfiltered":
            return "--method unfiltered"
        if n.startswith("t"):  # a selection by threshold (selection.thresholds)
            return f"--method {shlex.quote(method)} --threshold {shlex.quote(n[1:])}"
        return f"--method {shlex.quote(method)} -n {n}"

    def threshold_selections(self, outputs: list[str] | str) -> list[str]:
        """``outputs`` (a rule's output patterns over {method} and {N}) of every selection by
        threshold (selection.thresholds)."""
        templates = [outputs] if isinstance(outputs, str) else list(outputs)
        return [f for m, ts in self.thresholds.items() for t in ts for f in
                [x for tpl in templates for x in expand(tpl, method=[m], N=[threshold_label(t)])]]
