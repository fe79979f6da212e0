"""The path templates that both a rule's output and the plan's input functions name (one home for a
path): the rule writes ``output: PLAN.paths.kept``, the plan expands the same template over the
shards. Templates keep their wildcards in braces (``{shard}``), as Snakemake reads them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import product


def expand(template: str, **values: Iterable[object] | str) -> list[str]:
    """Snakemake's ``expand`` for one template: every combination of the values, the first keyword
    varying slowest (``expand("{a}.{b}", a=[1, 2], b=["x", "y"])`` -> 1.x, 1.y, 2.x, 2.y); a string
    is one value, as in Snakemake."""
    keys = list(values)
    lists = [[v] if isinstance(v := values[k], str) else list(v) for k in keys]
    return [template.format(**dict(zip(keys, combo))) for combo in product(*lists)]


def one_of(names: Iterable[str], empty: str = "") -> str:
    """A wildcard constraint matching exactly one of ``names`` (``empty`` when there are none)."""
    return "|".join(map(re.escape, names)) or empty


def repeated(flag: str, files: Iterable[str]) -> str:
    """``flag`` before each file, each quoted for the shell (``--votes 'a b' --votes c``)."""
    return " ".join(f"{flag} {shlex.quote(str(f))}" for f in files)


def named_options(files: Mapping[str, str], names: Iterable[str]) -> str:
    """``--name FILE`` for each of ``names`` whose file is given (not empty), quoted for the shell."""
    return " ".join(f"--{k} {shlex.quote(str(files[k]))}" for k in names if files[k])


def tables(files: Iterable[str], *, but: str) -> list[str]:
    """The ``.tsv`` tables among ``files`` (a rule's inputs), all but ``but``."""
    return [f for f in files if f.endswith(".tsv") and f != but]


@dataclass(frozen=True)
class Paths:
    """Templates below the experiment's work and results directories (``work/<exp>``,
    ``results/<exp>``) and in its language pair."""

    work: str
    results: str
    src: str
    tgt: str

    @property
    def split_shard(self) -> str:
        """A shard of the split corpus, before the per-shard filters (rule split_corpus)."""
        return f"{self.work}/preprocess/split/shard{{shard}}.tsv.gz"

    @property
    def kept(self) -> str:
        """A preprocessed shard (rule preprocess_shard)."""
        return f"{self.work}/preprocess/kept/shard{{shard}}.tsv.gz"

    @property
    def embed_src(self) -> str:
        """A shard's source side embedded by an encoder (rule embed_shard)."""
        return f"{self.work}/embed/{{encoder}}/shard{{shard}}.{self.src}.npy"

    @property
    def embed_tgt(self) -> str:
        return f"{self.work}/embed/{{encoder}}/shard{{shard}}.{self.tgt}.npy"

    @property
    def scores(self) -> str:
        """A score group's scores of one shard (rules score_shard, score_translated)."""
        return f"{self.work}/score/{{group}}/shard{{shard}}.scores.tsv.gz"

    @property
    def baseline(self) -> str:
        """The noise baseline beside the scores."""
        return f"{self.work}/score/{{group}}/shard{{shard}}.baseline.tsv.gz"

    @property
    def head(self) -> str:
        """A fitted scorer's head manifest (rule fit_scorer)."""
        return f"{self.work}/heads/{{name}}/head.json"

    @property
    def select_pairs(self) -> str:
        """A selection's pairs (rule select_top)."""
        return f"{self.work}/select/{{method}}.{{N}}.tsv.gz"

    @property
    def select_report(self) -> str:
        return f"{self.results}/select/{{method}}.{{N}}.json"

    @property
    def bleu(self) -> str:
        """The headline BLEU of one N (rule headline_bleu)."""
        return f"{self.results}/bleu_{{N}}.txt"

    @property
    def translator(self) -> str:
        """A translator's averaged checkpoint (rule train_translator)."""
        return f"{self.work}/translate/{{direction}}/seed{{seed}}/checkpoint_avg.pt"

    @property
    def translator_bleu(self) -> str:
        """A translator's BLEU (rule evaluate_translator)."""
        return f"{self.results}/translate/{{direction}}/bleu.json"

    @property
    def translate_stats(self) -> str:
        """A translated shard side's statistics (rule translate_shard)."""
        return f"{self.work}/translate/{{direction}}/shard{{shard}}.json"

    @property
    def translated_text(self) -> str:
        """An evaluation text translated (rule translate_text)."""
        return f"{self.work}/translate/texts/{{name}}.txt"

    @property
    def translation_embedding(self) -> str:
        """A translated shard side embedded (rule embed_translation)."""
        return f"{self.work}/embed/{{encoder}}/shard{{shard}}.{{direction}}.npy"
