"""The clean-mix held-out sets: proportions, sentence-disjointness, refusals (toy pools), and the demo
corpus built with them on the real data (no corpus sentence in a held-out set, origins in the
corpus' proportions)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import data_dir
from marginmine.cli.main import main
from marginmine.data.cleanmix import hold_out, origin_lines, quotas
from marginmine.data.democorpus import build_demo_corpus
from marginmine.errors import MarginmineError
from marginmine.io.text import read_label_rows
from marginmine.preprocess.leakage import overlap_report
from marginmine.preprocess.normalize import sentence_key


@dataclass(frozen=True)
class P:
    en: str
    de: str
    origin: str


def pool(counts: dict[str, int]) -> list[P]:
    return [P(f"{o} sentence {i}", f"{o} Satz {i}", o) for o, n in counts.items() for i in range(n)]


def test_quotas_apportion_by_largest_remainder() -> None:
    assert quotas({"a": 600, "b": 300, "c": 100}, 10) == {"a": 6, "b": 3, "c": 1}
    got = quotas({"a": 1, "b": 1, "c": 1}, 2)
    assert sum(got.values()) == 2 and sorted(got.values()) == [0, 1, 1]
    got = quotas({"m30k": 28_000, "tatoeba": 30_000, "wmt": 5_000, "mlqe": 7_000}, 2000)
    assert sum(got.values()) == 2000 and got == {"m30k": 800, "tatoeba": 857, "wmt": 143, "mlqe": 200}


def test_hold_out_keeps_the_proportions_and_never_repeats_a_sentence() -> None:
    p = pool({"caption": 600, "tatoeba": 300, "news": 100})
    # pairs sharing a side with another pair: a held-out one must take the pairs sharing its side out of the rest
    p += [P("caption sentence 1", f"eine andere Übersetzung {i}", "caption") for i in range(3)]
    splits, rest, dropped, keys = hold_out(p, {"dev": 50, "test": 100}, random.Random(1))
    for split, size in (("dev", 50), ("test", 100)):
        got = Counter(x.origin for x in splits[split])
        assert sum(got.values()) == size
        assert got == Counter(quotas(Counter(x.origin for x in p), size)), (split, got)
    held = splits["dev"] + splits["test"]
    sides = [sentence_key(s) for x in held for s in (x.en, x.de)]
    assert len(sides) == len(set(sides)) == len(keys)  # no sentence twice, in or across splits
    assert not any(sentence_key(x.en) in keys or sentence_key(x.de) in keys for x in rest)
    assert len(rest) + len(held) + dropped == len(p)
    shared_out = any(x.en == "caption sentence 1" for x in held)
    assert dropped == (3 if shared_out else 0)  # the other three pairs with that English side
    again = hold_out(p, {"dev": 50, "test": 100}, random.Random(1))
    assert again[0] == splits and again[1] == rest  # deterministic


def test_a_clean_mix_larger_than_the_pool_or_an_origin_is_refused() -> None:
    p = pool({"a": 30, "b": 10})
    with pytest.raises(MarginmineError, match=r"clean-mix size 50 .* larger than the held-out pool \(40 clean pairs\)"):
        hold_out(p, {"dev": 20, "test": 30}, random.Random(1))
    same = [P("one sentence", f"Satz {i}", "a") for i in range(30)] + pool({"b": 10})  # 'a' has one English side
    with pytest.raises(MarginmineError, match="origin a has no more pairs with unused sentences"):
        hold_out(same, {"test": 20}, random.Random(1))
    with pytest.raises(MarginmineError, match="at least 1"):
        hold_out(p, {"test": 0}, random.Random(1))


def test_origin_lines_index_the_labels_in_line_order() -> None:
    assert origin_lines(["b", "a", "b"]) == {"a": [1], "b": [0, 2]}


@pytest.mark.slow
def test_demo_corpus_holds_out_clean_mix_sets_that_share_no_sentence_with_it(tmp_path: Path, capsys) -> None:
    out, labels, prefix = tmp_path / "corpus.tsv", tmp_path / "labels.tsv", tmp_path / "heldout"
    summary = build_demo_corpus(data_dir(), out, labels, seed=1234, scale=0.05, heldout={"dev": 100, "test": 200},
                                heldout_prefix=prefix)
    for split, size in (("dev", 100), ("test", 200)):
        en = Path(f"{prefix}.{split}.en").read_text(encoding="utf-8").splitlines()
        de = Path(f"{prefix}.{split}.de").read_text(encoding="utf-8").splitlines()
        rows = read_label_rows(f"{prefix}.{split}.labels.tsv")
        assert len(en) == len(de) == len(rows) == size and all(r["clean"] == "1" for r in rows)
        held = Counter(r["origin"] for r in rows)
        assert held == Counter(summary["heldout"][split]["by_origin"])
        # in the corpus' proportions of clean origins (ParaCrawl's labelled V pairs are not held out)
        corpus = {o: n for o, n in summary["clean_by_origin"].items() if o in held or not o.startswith("paracrawl")}
        total = sum(corpus.values())
        for origin, n in corpus.items():
            assert abs(held[origin] - size * n / total) <= 2, (split, origin, held[origin], size * n / total)
    files = [f"{prefix}.{s}.{x}" for s in ("dev", "test") for x in ("en", "de")]
    report = overlap_report([out], files)
    assert report["overlapping_pairs"] == 0 and report["pairs"] == summary["total"]
    assert summary["dropped"]["input"]["clean_mix_heldout"] >= 0
    # the CLI refuses a clean mix larger than the pool, naming both numbers
    rc = main(["demo-corpus", "--data-dir", str(data_dir()), "--output", str(tmp_path / "c2.tsv"), "--labels",
               str(tmp_path / "l2.tsv"), "--scale", "0.05", "--heldout", "dev=100000,test=1",
               "--heldout-prefix", str(tmp_path / "h2")])
    assert rc == 2 and not (tmp_path / "c2.tsv").exists()
    assert "clean-mix size 100001" in capsys.readouterr().err
