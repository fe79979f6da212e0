"""Significance between two rows of an evaluation table (marginmine.evaluate.paired): the tests give
known p-values, tell a real gap from a tie, and the items sidecars the tables' writers leave add up
to the tables' own numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marginmine.errors import MarginmineError
from marginmine.evaluate.paired import bootstrap_counts, bootstrap_ranked, compare, mcnemar
from marginmine.io.items import items_path, read_items, write_items


def test_mcnemar_gives_the_exact_binomial_p() -> None:
    items = [str(i) for i in range(100)]
    right = dict.fromkeys(items, False)
    ten = {k: int(k) < 10 for k in items}  # ten sentences wrong only for A
    assert mcnemar(ten, right).p == pytest.approx(2 / 2 ** 10)
    assert mcnemar(right, right).p == 1.0  # nothing discordant
    both = {k: int(k) < 3 for k in items}
    other = {k: 3 <= int(k) < 6 for k in items}  # 3 vs 3 discordant: p = 1
    assert mcnemar(both, other).p == 1.0
    with pytest.raises(MarginmineError, match="same items"):
        mcnemar(ten, {k: v for k, v in ten.items() if k != "0"})


def test_the_bootstrap_of_f1_separates_a_real_gap_from_none() -> None:
    """100 gold sources in a pool of 1,000: A finds 80 of them, B 50; the same run twice is p = 1."""
    a = {str(i): (1, 0, 1) for i in range(80)} | {str(i): (0, 0, 1) for i in range(80, 100)}
    b = {str(i): (1, 0, 1) for i in range(50)} | {str(i): (0, 0, 1) for i in range(50, 100)}
    b |= {str(i): (0, 1, 0) for i in range(500, 530)}  # and 30 wrong pairs
    assert bootstrap_counts(a, b, 1000, "f1", resamples=500).p < 0.01
    assert bootstrap_counts(a, a, 1000, "recall", resamples=200).p == 1.0
    with pytest.raises(MarginmineError, match="units"):
        bootstrap_counts(a, b, 10, "f1")


def test_the_bootstrap_of_auc_is_paired_when_the_items_agree_and_two_sample_when_not() -> None:
    rng = np.random.default_rng(0)
    labels = rng.random(400) < 0.5
    good = labels + rng.normal(0, 0.5, 400)  # separates
    noise = rng.normal(0, 1, 400)  # does not
    from marginmine.scoring.metrics import roc_auc

    def side(scores: np.ndarray, prefix: str = "") -> dict[str, tuple[bool, float]]:
        return {f"{prefix}{i}": (bool(lab), float(s)) for i, (lab, s) in enumerate(zip(labels, scores))}

    paired = bootstrap_ranked(side(good), side(noise), roc_auc, resamples=300)
    assert paired.paired and paired.p < 0.01 and paired.label() == "paired bootstrap"
    same = bootstrap_ranked(side(good), side(good), roc_auc, resamples=100)
    assert same.p == 1.0
    apart = bootstrap_ranked(side(good, "a"), side(noise, "b"), roc_auc, resamples=300)
    assert not apart.paired and apart.p < 0.01 and apart.label() == "two-sample bootstrap"


def test_compare_picks_the_items_of_the_column() -> None:
    items = [{"encoder": e, "set": "s", "margin": "cosine", "direction": d, "item": str(i),
              "wrong": "1" if (e == "a" and d == "src2tgt" and i < 12) else "0"}
             for e in ("a", "b") for d in ("src2tgt", "tgt2src") for i in range(50)]
    a, b = {"encoder": "a", "set": "s", "margin": "cosine"}, {"encoder": "b", "set": "s", "margin": "cosine"}
    assert compare(items, "err_src2tgt", a, b).p == pytest.approx(2 / 2 ** 12)  # type: ignore[union-attr]
    assert compare(items, "err_tgt2src", a, b).p == 1.0  # type: ignore[union-attr]
    avg = compare(items, "err_avg", a, b)  # per gold pair, both directions summed: a sign test
    assert avg.test == "sign test" and avg.items_a == 50 and avg.p == pytest.approx(2 / 2 ** 12)  # type: ignore[union-attr]
    assert compare(items, "pairs", a, b) is None  # no test for a count
    assert compare(items, "err_avg", a, {"encoder": "c"}) is None  # no items for a row


def test_the_shortcut_checks_auc_against_the_positives_is_tested_on_each_scorers_own_positives() -> None:
    """auc_vs_positives (kim-domain's column): a group's true pairs against each scorer's own re-paired
    positives, different negatives per scorer: a two-sample bootstrap, and a real gap is found."""
    rng = np.random.default_rng(0)
    items = []
    for scorer, shift in (("x", 3.0), ("y", 0.0)):
        true = rng.normal(shift, 1, 200)
        items += [{"scorer": scorer, "group": "g", "against": "own", "item": f"t{j}", "label": "1", "score": str(v)}
                  for j, v in enumerate(true)]
        items += [{"scorer": scorer, "group": "g", "against": "positives", "item": f"t{j}", "label": "1",
                   "score": str(v)} for j, v in enumerate(true)]
        items += [{"scorer": scorer, "group": "g", "against": "positives", "item": f"{scorer}:p{j}", "label": "0",
                   "score": str(v)} for j, v in enumerate(rng.normal(0, 1, 150))]
    a, b = {"scorer": "x", "group": "g"}, {"scorer": "y", "group": "g"}
    found = compare(items, "auc_vs_positives", a, b)
    assert found is not None and not found.paired and found.items_a == found.items_b == 350 and found.p < 0.01
    same = compare(items, "auc_vs_positives", a, a)
    assert same is not None and same.paired and same.p == 1.0


def test_the_items_sidecar_is_written_beside_its_table_and_read_back(tmp_path: Path) -> None:
    assert items_path(tmp_path / "bucc.tsv") == tmp_path / "bucc.items.tsv.gz"
    write_items(items_path(tmp_path / "q.tsv"), ("data", "scorer", "item", "label", "score"),
                [("d", "ratio", 0, 1, 1.23456789), ("d", "ratio", 1, 0, -0.5)])
    rows = read_items(tmp_path / "q.items.tsv.gz")
    assert rows[0] == {"data": "d", "scorer": "ratio", "item": "0", "label": "1", "score": "1.234568"}
    with pytest.raises(ValueError, match="2 fields for 3 columns"):
        write_items(tmp_path / "x.tsv.gz", ("a", "b", "c"), [("1", "2")])


def test_the_mining_items_add_up_to_the_tables_precision_recall_and_f1() -> None:
    """evaluate_split_pair's rows: the per-source counts of each split sum to the row's P/R/F1 on
    test and to its train F1 (a pool of noisy copies with planted gold pairs)."""
    from marginmine.evaluate.bucc import Split, evaluate_split_pair
    from marginmine.evaluate.paired import f1_of

    rng = np.random.default_rng(3)

    def split(n: int, gold: int) -> tuple[np.ndarray, np.ndarray, Split]:
        x = rng.normal(size=(n, 16)).astype(np.float32)
        y = rng.normal(size=(n, 16)).astype(np.float32)
        y[:gold] = x[:gold] + rng.normal(0, 0.9, (gold, 16))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        return x, y, Split([f"s{i}" for i in range(n)], [f"t{i}" for i in range(n)], [(i, i) for i in range(gold)])

    rows = evaluate_split_pair(split(300, 40), split(300, 40), 4, [("ratio", "ratio")])
    for r in rows:
        for name, want in (("test", (r.precision, r.recall, r.f1)), ("train", (None, None, r.train_f1))):
            counts = np.array([u[2:5] for u in r.items if u[0] == name], float).sum(0)
            got = [float(f1_of(*counts[:, None], c)[0]) for c in ("precision", "recall", "f1")]
            assert {u[-1] for u in r.items if u[0] == name} == {300}
            for g, w in zip(got, want):
                if w is not None:
                    assert g == pytest.approx(w), (r.retrieval, name)


def test_a_sidecar_is_read_only_for_the_rows_asked(tmp_path: Path) -> None:
    path = tmp_path / "q.items.tsv.gz"
    write_items(path, ("data", "scorer", "item", "label", "score"),
                [("d", s, i, i % 2, float(i)) for s in ("a", "b", "c") for i in range(4)])
    rows = read_items(path, where=({"scorer": "a"}, {"scorer": "c", "data": "d"}))
    assert [r["scorer"] for r in rows] == ["a"] * 4 + ["c"] * 4
    assert read_items(path, where=({"method": "a"},)) == []  # a column the file lacks matches nothing


def test_two_selections_shares_of_a_group_are_compared_on_the_pairs_one_keeps_and_the_other_not() -> None:
    """composition items: the Multi30k pairs each selection kept; 30 kept by both, 25 by ratio alone
    and 5 by cosine alone: McNemar 25 vs 5; the other group's pairs do not count."""
    keep = {"ratio": [f"m{i}" for i in range(55)], "cosine": [f"m{i}" for i in range(25, 60)]}
    items = [{"method": m, "N": "20k", "group": "clean:multi30k", "item": i} for m, ids in keep.items() for i in ids]
    items += [{"method": "ratio", "N": "20k", "group": "duplicate", "item": f"d{i}"} for i in range(100)]
    t = compare(items, "share", {"method": "ratio", "N": "20k", "group": "clean:multi30k"},
                {"method": "cosine", "N": "20k", "group": "clean:multi30k"})
    assert t is not None and t.test == "McNemar" and t.items_a == 60
    assert t.p == pytest.approx(mcnemar({str(i): i < 25 for i in range(30)}, {str(i): i >= 25 for i in range(30)}).p)
    assert t.p < 0.001
