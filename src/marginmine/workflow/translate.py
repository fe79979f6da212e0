"""Translate-then-vote's plan (rules/translate.smk): which scorers vote, the translators' directions
and settings, the evaluation texts they translate, and the inputs and options of the rules that use
translations (score_translated, eval_mining / eval_filter, published_vote_report)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from marginmine.workflow.paths import expand


class Translate:
    """Part of :class:`marginmine.workflow.Plan` (after the scoring and NMT parts)."""

    def _init_translate(self) -> None:
        self.translators = self.config["translators"]
        #: the scorers that vote over translations
        self.translated = [n for n in self.all_scorers if self.kind_says(n, "translated")]
        self.directions = [f"{self.src}-{self.tgt}", f"{self.tgt}-{self.src}"]
        self.translator_seed = self.translators.get("seed", self.config["seed"])
        if self.translated:
            self._check_params("translators.params", self.translator_params())
        #: name -> (file, 0-based column or None, language) of each evaluation text a vote scorer needs
        #: translated: ParaCrawl's labelled pairs, the mining benchmark's pools, the intrinsic sets
        self.translated_texts = self._translated_texts()

    def translator_model(self, direction: str) -> str:
        return self.paths.translator.format(direction=direction, seed=self.translator_seed)

    def direction_of(self, lang: str) -> str:
        """The translator that translates text in `lang`."""
        return f"{lang}-{self.tgt if lang == self.src else self.src}"

    @staticmethod
    def direction_langs(direction: str) -> str:
        return "--src-lang {} --tgt-lang {}".format(*direction.split("-"))

    def translator_eval(self, direction: str, name: str) -> list[str]:
        """(source, reference) of an NMT eval set for a translator (the reverse one reads it backwards)."""
        files = self.eval_files(name)
        return files if direction == self.directions[0] else files[::-1]

    def translator_params(self) -> dict:
        """The translators' training params: the NMT systems' (nmt.params) under translators.params."""
        return {**self.nmt_params(), **self.translators.get("params", {})}

    def translator_params_json(self) -> str:
        return json.dumps(self.translator_params(), sort_keys=True)

    def _translated_texts(self) -> dict[str, tuple[str, int | None, str]]:
        out: dict[str, tuple[str, int | None, str]] = {}
        if self.filter_eval and self.filter_eval.get("paracrawl"):
            from marginmine.evaluate.filtereval import PARACRAWL_SIDES

            for side, lang in (("src", self.src), ("tgt", self.tgt)):
                out[f"paracrawl.{side}"] = (self.data_path(self.filter_eval["paracrawl"]), PARACRAWL_SIDES[side], lang)
        if self.mining_eval:
            for split in ("train", "test"):
                for side, lang in (("src", self.src), ("tgt", self.tgt)):
                    out[f"mining_eval.{split}.{side}"] = (f"{self.work}/mining_eval/{split}.{side}", None, lang)
        for name, (a, b) in self.vote_intrinsic_sets().items():
            out[f"intrinsic.{name}.src"] = (a, None, self.src)
            out[f"intrinsic.{name}.tgt"] = (b, None, self.tgt)
        return out

    def text_column_arg(self, name: str) -> str:
        column = self.translated_texts[name][1]
        return "" if column is None else f"--column {column}"

    def vote_intrinsic_sets(self) -> dict[str, tuple[str, str]]:
        """name -> (source-language file, target-language file) of the intrinsic sets in the
        experiment's language pair (either orientation in the config)."""
        out = {}
        for item in self.config.get("intrinsic", []):
            if {item["src_lang"], item["tgt_lang"]} == {self.src, self.tgt}:
                a, b = self.source_files(f"intrinsic-{item['name']}", item["source"])
                out[item["name"]] = (a, b) if item["src_lang"] == self.src else (b, a)
        return out

    def suite_votes(self, suite: str) -> bool:
        """Whether a suite has a scorer that votes over translations."""
        return any(n in self.translated for n in self.suites[suite]["scorers"])

    def text_translations(self, prefix: str) -> list[str]:
        """The translations of the evaluation texts whose names start with `prefix`, in name order."""
        return [self.paths.translated_text.format(name=n) for n in self.translated_texts if n.startswith(prefix)]

    def pool_translations(self, suite: str) -> list[str]:
        """The mining benchmark's pools translated, for a suite with a vote scorer (else none)."""
        return self.text_translations("mining_eval.") if self.suite_votes(suite) else []

    def pool_translation_args(self, input: Mapping[str, Any]) -> str:
        """--translated SPLIT.SIDE=FILE of the translated pools (rule eval_mining's input `translated`)."""
        if not input["translated"]:
            return ""
        keys = [n.removeprefix("mining_eval.") for n in self.translated_texts if n.startswith("mining_eval.")]
        pairs = " ".join(shlex.quote(f"{k}={f}") for k, f in zip(keys, input["translated"]))
        return f"--translated {pairs}"

    def shard_translation_embeddings(self, group: str, shard: str) -> list[str]:
        """The embedded translations of one shard (source side's, target side's) for a score group
        holding a vote scorer; none for the others."""
        if not any(self.kind_says(n, "translated") for n in self.group_scorers(group)):
            return []
        return [self.paths.translation_embedding.format(encoder=self.group_encoder(group), shard=shard, direction=d)
                for d in self.directions]

    @staticmethod
    def translation_args(input: Mapping[str, Any]) -> str:
        """The options naming both sides' translation embeddings, with a trailing space (rule
        score_translated puts them before --output in score_shard's command), or ''."""
        t = input["translated"]
        return f"--src-translated {shlex.quote(t[0])} --tgt-translated {shlex.quote(t[1])} " if t else ""

    def _votes(self) -> list[str]:
        return [n for n in self.suites["published"]["scorers"] if n in self.translated]

    def _translate_stats(self, direction: str) -> list[str]:
        return expand(self.paths.translate_stats, direction=[direction], shard=self.shards)

    def vote_report_inputs(self) -> dict[str, Any]:
        votes = self._votes()
        return {"encoder": self.encoder_json(self.all_scorers[votes[0]]["encoder"]),
                "bleu": [self.paths.translator_bleu.format(direction=d) for d in self.directions],
                "stats": [f for d in self.directions for f in self._translate_stats(d)],
                "scores": [f for n in votes for f in self.scorer_score_files(n)],
                "intrinsic": self.text_translations("intrinsic.")}

    def vote_report_args(self, input: Mapping[str, Any]) -> str:
        args = ["--translator", *(shlex.quote(f"{d}={f}") for d, f in zip(self.directions, input["bleu"]))]
        stats = {d: ",".join(self._translate_stats(d)) for d in self.directions}
        args += ["--stats", *(shlex.quote(f"{d}={files}") for d, files in stats.items())]
        args += ["--scores", *(shlex.quote(f"{n}={','.join(self.scorer_score_files(n))}") for n in self._votes())]
        for name, (a, b) in self.vote_intrinsic_sets().items():
            ta, tb = (self.paths.translated_text.format(name=f"intrinsic.{name}.{side}") for side in ("src", "tgt"))
            args.append(f"--set {shlex.quote(f'{name},{a},{b},{ta},{tb}')}")
        return " ".join(args)
