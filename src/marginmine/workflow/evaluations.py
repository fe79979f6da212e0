"""The evaluation stage's plan (rules/evaluate.smk and the published suite's tables): the clean share,
the composition, the mining benchmark, the filtering quality, the shortcut check and the labelled
audit; what each reads and the options that name it."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from marginmine.io.sizes import resolve_sizes
from marginmine.workflow.config import quoted
from marginmine.workflow.paths import expand


class Evaluations:
    """Part of :class:`marginmine.workflow.Plan` (after the scoring part)."""

    def _init_evaluations(self) -> None:
        audit = self.audit = self.config["audit"]
        #: the audited scorer: audit.scorer, else the first scorer among selection.methods
        self.audit_scorer = audit["scorer"] or next((m for m in self.methods if m in self.scorers), None)
        if audit["scorer"] and audit["scorer"] not in self.scorers:
            raise ValueError(f"audit.scorer: {audit['scorer']!r} is not a scorer of `scorers:` "
                             f"({', '.join(self.scorers)})")
        self.audit_sizes = resolve_sizes(audit["sizes"], self.expected_kept) if audit["sizes"] else self.sizes
        #: a person's exported labels (audit.labels_file, an input: relative paths under data_dir), or None
        self.audit_labels = self.data_path(audit["labels_file"]) if audit["labels_file"] else None

    @property
    def filter_table(self) -> bool:
        """Whether a run has a filtering-quality table (ParaCrawl's labels or a labelled corpus)."""
        return bool(self.filter_eval or self.labelled_corpus)

    # --- the clean share and the composition ---------------------------------------------------

    def clean_share_inputs(self) -> dict[str, list[str]]:
        groups = self.suite_groups("main")
        return {"scores": [f for g in groups for f in self.score_files(g)],
                "baselines": [f for g in groups for f in self.baseline_files(g)]}

    def clean_share_args(self) -> str:
        """--scores / --baselines per score group of the main suite, sizes and thresholds."""
        out = []
        for g in self.suite_groups("main"):
            out += [f"--scores {quoted(self.score_files(g))}", f"--baselines {quoted(self.baseline_files(g))}"]
        out.append(f"--names {quoted(self.suites['main']['scorers'])} --sizes {quoted(self.sizes)}")
        if self.thresholds:
            pairs = quoted(f"{m}={','.join(f'{t:g}' for t in ts)}" for m, ts in self.thresholds.items())
            out.append(f"--thresholds {pairs}")
        return " ".join(out)

    def density_scorers(self) -> tuple[str, str, str] | None:
        """(margin scorer, its margin, cosine scorer) over one encoder for composition's density
        section: the first scorer among the methods (then the scorers) whose kind mines with a kNN
        margin that composition can recompute (ratio, distance), with a scorer beside it whose kind
        mines with the plain cosine (the kinds declare it: `mines`)."""
        for name in [*self.methods, *self.scorers]:
            margin = self.kind_says(name, "mines", None) if name in self.scorers else None
            if margin in ("ratio", "distance"):
                for other, t in self.scorers.items():
                    if (self.kind_says(other, "mines", None) == "absolute"
                            and self.score_group(other) == self.score_group(name)
                            and t["encoder"] == self.scorers[name]["encoder"]):  # a column of the same files
                        return name, margin, other
        return None

    def composition_inputs(self, suite: str) -> dict[str, Any]:
        out: dict[str, Any] = {"labels": self.corpus_labels,
                               "selections": expand(self.paths.select_pairs, method=self.suites[suite]["selected"],
                                                    N=self.sizes)}
        if suite == "main" and self.density_scorers():
            out["pairs"] = self.kept_files()
            out["scores"] = self.scorer_score_files(self.density_scorers()[0])
        return out

    def composition_density_args(self, input: Mapping[str, Any], output: Mapping[str, Any]) -> str:
        """``input``, ``output``: the composition job's (Snakemake's named lists, or dicts)."""
        if "scores" not in input.keys():  # no margin + cosine scorer pair over one encoder: an empty table
            return f"--density-tsv {shlex.quote(output['density'])}"
        margin, kind, cosine = self.density_scorers()
        return (f"--pairs {quoted(input['pairs'])} --scores {quoted(input['scores'])} --margin {kind} "
                f"--margin-column {shlex.quote(margin)} --cosine-column {shlex.quote(cosine)} "
                f"--density-tsv {shlex.quote(output['density'])}")

    # --- the mining benchmark and the filtering quality ----------------------------------------

    def pair_args(self, items: list[dict[str, str]]) -> list[str]:
        """SRC,TGT arguments (a list: the shell command quotes each with :q)."""
        return [f"{self.data_path(p['src'])},{self.data_path(p['tgt'])}" for p in items]

    def mining_mono(self, side: str) -> list[str]:
        """The mining benchmark's monolingual pools of one side (``src`` or ``tgt``), under data_dir."""
        return [self.data_path(p) for p in self.mining_eval[f"mono_{side}"]]

    def mining_eval_files(self) -> list[str]:
        e = self.mining_eval
        files = [self.data_path(p[s]) for p in e["gold_train"] + e["gold_test"] for s in ("src", "tgt")]
        return files + self.mining_mono("src") + self.mining_mono("tgt")

    def negatives_corpus(self, suite: str) -> dict[str, list[tuple[str, str, str]]]:
        """encoder -> the corpus (shard, embeddings) triples of the suite's scorers fitted against
        corpus negatives (mlp): the quality table also scores them without their own negatives."""
        names = [n for n in self.suites[suite]["scorers"] if self.kind_says(n, "corpus_negatives")]
        return {self.all_scorers[n]["encoder"]: self.fit_corpus(n) for n in names}

    def filter_eval_inputs(self, suite: str) -> dict[str, Any]:
        out: dict[str, Any] = {"encoders": [self.encoder_json(e) for e in self.suite_encoders(suite)]}
        heads = self.head_inputs(self.suites[suite]["scorers"])
        if heads:
            out["heads"] = heads
        if self.filter_eval and self.filter_eval.get("paracrawl"):
            out["paracrawl"] = self.data_path(self.filter_eval["paracrawl"])
            if self.suite_votes(suite):
                out["paracrawl_translated"] = self.text_translations("paracrawl.")
        if self.labelled_corpus:
            out["labels"] = self.corpus_labels
            out["pairs"] = self.kept_files()
            out["scores"] = [f for g in self.suite_groups(suite) for f in self.score_files(g)]
            out["baselines"] = [f for g in self.suite_groups(suite) for f in self.baseline_files(g)]
            corpus = self.negatives_corpus(suite)
            if corpus:
                out["corpus"] = [f for triples in corpus.values() for t in triples for f in t]
        return out

    def filter_eval_args(self, suite: str, input: Mapping[str, Any]) -> str:
        """Options with paths, each quoted (the shell command uses them as they are); ``input``: the
        job's (filter_eval_inputs)."""
        out = []
        keys = input.keys()
        if "paracrawl" in keys:
            out.append(f"--paracrawl {shlex.quote(input['paracrawl'])}")
        if "paracrawl_translated" in keys:
            out.append(f"--paracrawl-translated {quoted(input['paracrawl_translated'])}")
        if "labels" in keys:
            out.append(f"--demo-labels {shlex.quote(input['labels'])} --pairs {quoted(input['pairs'])}")
            out += [f"--scores {quoted(self.score_files(g))}" for g in self.suite_groups(suite)]
            out += [f"--baselines {quoted(self.baseline_files(g))}" for g in self.suite_groups(suite)]
            corpus = self.negatives_corpus(suite)
            if corpus:
                triples = quoted(f"{e}={','.join(t)}" for e, ts in corpus.items() for t in ts)
                out.append(f"--corpus {triples}")
        return " ".join(out)

    def filter_top_n_arg(self) -> str:
        return f"--top-n {' '.join(map(str, self.filter_eval['top_n']))}" if self.filter_eval else ""

    # --- the published suite's intrinsic table -------------------------------------------------

    def published_margin_args(self) -> str:
        """--margins of the suite's intrinsic evaluation: cosine, ratio, and each margin function a
        suite scorer's kind mines with (Eq. 9 / 10), as the kinds declare (`mines`)."""
        from marginmine.search.margin import MARGINS

        margins = ["absolute", "ratio"]
        for name in self.suites["published"]["scorers"]:
            m = self.kind_says(name, "mines", None)
            if m in MARGINS and m not in margins:
                margins.append(m)
        return f"--margins {','.join(margins)}"

    def similarity_scorers(self) -> list[str]:
        """The suite's selection methods whose kind scores every pair of two sets (`pair_matrix`, e.g.
        mlp): the intrinsic table also retrieves with them (published_eval_similarity)."""
        return [n for n in self.paper_methods if n in self.paper_scorers and self.kind_says(n, "pair_matrix", None)]

    # --- the shortcut check of fitted scorers --------------------------------------------------

    def shortcut_scorers(self, suite: str = "published") -> list[str]:
        """A suite's fitted scorers the shortcut check reads (none without a clean-mix set to group by origin)."""
        return [n for n in self.suites[suite]["scorers"] if self.is_fitted(n)] if self.clean_mix else []

    def shortcut_test_files(self) -> list[str]:
        """The clean-mix set the shortcut check groups by origin: the test split (else the first), src, tgt, labels."""
        split = "test" if "test" in self.clean_mix else next(iter(self.clean_mix))
        return [f"{self.clean_mix_prefix}.{split}.{x}" for x in (self.src, self.tgt, "labels.tsv")]

    def shortcut_encoders(self, suite: str = "published") -> list[str]:
        """The encoders of a suite's fitted scorers (the shortcut check's)."""
        return list(dict.fromkeys(self.all_scorers[n]["encoder"] for n in self.shortcut_scorers(suite)))

    # --- the labelled audit (docs/choosing-n.md) ----------------------------------------------

    def audit_estimated(self) -> bool:
        """Whether the audit has labels to estimate from (a person's file or the corpus' sidecar)."""
        return bool(self.audit_scorer is not None and (self.audit["labels_file"] or self.labelled_corpus))

    def audit_thresholds(self) -> list[str]:
        """The audited scorer's score thresholds (selection.thresholds) as the sample's arguments."""
        return [f"{t:g}" for t in self.thresholds.get(self.audit_scorer, [])]

    def audit_note(self) -> str:
        return "Labels: " + (f"{self.audit['labels_file']} (a person's)." if self.audit["labels_file"] else
                             "the corpus' own label sidecar (clean = good) stands in for a person.")
