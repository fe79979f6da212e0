"""The translate-then-vote report (``results/<exp>/published/votes.md``): what bounds the votes and
what they find, from files the workflow wrote.

* the translators: dev/test BLEU (``evaluate_translator``'s ``bleu.json``) and decoding speed over
  the corpus (``translate_shard``'s stats: lines, empty sources and translations, sentences/s);
* each set of an intrinsic benchmark in the experiment's language pair (Tatoeba, newstest2012):
  precision, recall and F1 of the five candidate sets (original, forward, backward, strict,
  pairwise; ratio margin, intersection, no threshold) against the gold alignment, all n x n pairs;
* the natural voted-set sizes on the corpus: per vote scorer, how many pairs its rule kept (score
  above 1, :func:`marginmine.scoring.votes.voted_score`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from marginmine.errors import InputError
from marginmine.io.safe import write_text
from marginmine.io.text import open_text_out, read_aligned, read_lines
from marginmine.scoring.votes import RULES, mined_sets, rule_pairs, set_prf


@dataclass(frozen=True)
class VoteSet:
    """An intrinsic set oriented to the experiment's (source, target) languages, with each side's
    translation into the other language (line-aligned files)."""

    name: str
    src: str
    tgt: str
    src_translated: str
    tgt_translated: str


def intrinsic_rows(encoder: Any, sets: Sequence[VoteSet], src_lang: str, tgt_lang: str, k: int) -> list[dict[str, Any]]:
    """P/R/F1 of every rule on each set (gold: line i with line i)."""
    rows = []
    for s in sets:
        src, tgt = read_aligned(s.src, s.tgt)
        texts = {"src": src, "tgt": tgt}
        for side, path in (("src", s.src_translated), ("tgt", s.tgt_translated)):
            got = read_lines(path)
            if len(got) != len(texts[side]):
                raise InputError(path, f"has {len(got)} lines, {getattr(s, side)} has {len(texts[side])}",
                                 hint="a translation must be line-aligned with what it translates: translate it again")
            texts[side + "_t"] = got
        x, y = encoder.encode(src, src_lang), encoder.encode(tgt, tgt_lang)
        xt, yt = encoder.encode(texts["src_t"], tgt_lang), encoder.encode(texts["tgt_t"], src_lang)
        found = mined_sets(x, y, xt, yt, k)
        gold = {(i, i) for i in range(len(src))}
        for rule in RULES:
            kept = rule_pairs(found, rule)
            p, r, f1 = set_prf(kept, gold)
            rows.append({"set": s.name, "rule": rule, "pairs": len(gold), "found": len(kept), "precision": p,
                         "recall": r, "f1": f1})
    return rows


def corpus_sizes(scores: dict[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Per vote scorer (name -> its shard score files): pairs scored and pairs its rule kept."""
    from marginmine.scoring.files import read_scores

    rows = []
    for name, files in scores.items():
        values = np.concatenate([read_scores(f, name) for f in files]) if files else np.zeros(0)
        rows.append({"scorer": name, "pairs": int(len(values)), "voted": int((values > 1).sum()),
                     "share": float((values > 1).mean()) if len(values) else 0.0})
    return rows


def translator_rows(bleu: dict[str, str], stats: dict[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Per direction: dev/test BLEU, corpus lines translated, empty translations, sentences/s."""
    rows = []
    for direction, path in bleu.items():
        b = json.loads(Path(path).read_text(encoding="utf-8"))
        st = [json.loads(Path(p).read_text(encoding="utf-8")) for p in stats.get(direction, [])]
        decoded = sum(s["lines"] - s["empty_sources"] for s in st)
        seconds = sum(s["call_seconds"] for s in st)
        rows.append({"direction": direction, "dev_bleu": b["dev"]["bleu"], "test_bleu": b["test"]["bleu"],
                     "corpus_lines": sum(s["lines"] for s in st),
                     "empty_translations": sum(s["empty_hypotheses"] for s in st),
                     "sentences_per_s": decoded / seconds if seconds else float("nan")})
    return rows


def _table(rows: Sequence[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["(none)"]
    fields = list(rows[0])

    def fmt(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    return ["| " + " | ".join(fields) + " |", "|" + "---|" * len(fields),
            *("| " + " | ".join(fmt(r[f]) for f in fields) + " |" for r in rows)]


def write_report(translators: Sequence[dict[str, Any]], intrinsic: Sequence[dict[str, Any]],
                 sizes: Sequence[dict[str, Any]], tsv: str | Path, md: str | Path, title: str) -> None:
    with open_text_out(tsv) as fh:
        for section, rows in (("translators", translators), ("intrinsic", intrinsic), ("corpus", sizes)):
            for r in rows:
                fh.write(section + "\t" + json.dumps(r, sort_keys=True) + "\n")
    lines = [f"# {title}", "", "## Translators (BLEU on the experiment's dev/test, read in their direction; "
             "decoding of the corpus)", "", *_table(translators), "",
             "## Intrinsic sets: the candidate sets against the gold alignment (ratio margin, intersection, "
             "no threshold, all n x n pairs)", "", *_table(intrinsic), "",
             "## Corpus: natural voted-set sizes (pairs each vote scorer's rule kept, over all scoring batches)",
             "", *_table(sizes)]
    write_text(md, "\n".join(lines) + "\n")
