"""The labelled audit (marginmine.evaluate.audit): strata, the draw, the estimate, the streaming
ranks, and the simulation on the real ParaCrawl human labels."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from marginmine.cli.main import main
from marginmine.errors import InputError
from marginmine.evaluate.audit import (
    BAD,
    GOOD,
    UNSURE,
    Audit,
    allocate,
    draw_ranks,
    monotone,
    plan_strata,
    ranks_of,
    truth_at,
)
from marginmine.evaluate.audit_files import SamplePlan, draw_sample, read_labels
from marginmine.evaluate.audit_sim import simulate
from marginmine.evaluate.filtereval import read_paracrawl_eval

PARACRAWL = "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv"


def _pava(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    blocks: list[list[float]] = []
    for v, ww in zip(y, w):
        blocks.append([v * ww, ww, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, ww2, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += ww2
            blocks[-1][2] += c
    return np.concatenate([[s / ww] * int(c) for s, ww, c in blocks])


def test_monotone_fit_equals_pool_adjacent_violators() -> None:
    rng = np.random.default_rng(0)
    for _ in range(100):
        s = int(rng.integers(1, 14))
        y, w = rng.random(s), rng.random(s) + 0.1
        assert np.allclose(monotone(y, w), _pava(y, w))
    draws = rng.random((6, 50))
    fitted = monotone(draws, np.ones(6))
    assert np.all(np.diff(fitted, axis=0) <= 1e-12)
    assert np.allclose(fitted[:, 7], _pava(draws[:, 7], np.ones(6)))


def test_strata_double_from_the_top_and_cuts_are_edges() -> None:
    edges = plan_strata(90_999, 8, [5000, 20000, 40000])
    assert edges[0] == 0 and edges[-1] == 90_999 and {5000, 20000, 40000} <= set(edges)
    sizes = np.diff(edges)
    assert sizes.min() >= 700 and len(edges) - 1 >= 6
    # a geometric edge near a cut gives way to it: no stratum narrower than a quarter of its cut
    assert not any(0 < abs(e - c) <= 0.25 * c for e in edges for c in (5000, 20000, 40000))
    alloc = allocate(edges, 300)
    assert alloc.sum() == 300 and alloc.max() - alloc.min() <= 1
    small = allocate((0, 3, 10, 1000), 60)  # a stratum smaller than its share is labelled whole
    assert small.tolist() == [3, 7, 50]
    ranks = draw_ranks(edges, alloc, seed=5)
    assert len(np.unique(ranks)) == 300 and np.array_equal(ranks, draw_ranks(edges, alloc, seed=5))
    assert not np.array_equal(ranks, draw_ranks(edges, alloc, seed=6))
    with pytest.raises(ValueError):
        plan_strata(0, 8)


def test_estimate_of_a_fully_labelled_ranking_is_exact_and_unsure_is_left_out() -> None:
    rng = np.random.default_rng(1)
    positive = rng.random(500) < np.linspace(0.95, 0.2, 500)
    edges = plan_strata(500, 4, [100])
    audit = Audit(500, edges, np.arange(500), np.where(positive, GOOD, BAD))
    p = audit.precision([100, 250, 500], draws=200)
    truth = np.cumsum(positive)[[99, 249, 499]] / [100, 250, 500]
    assert np.allclose(p.point, truth) and np.allclose(p.low, truth) and np.allclose(p.high, truth)
    # unsure labels are counted and estimated like unlabelled pairs
    labels = np.where(positive, GOOD, BAD)
    labels[:50] = UNSURE
    part = Audit(500, edges, np.arange(500), labels)
    assert part.counts()["unsure"] == 50
    q = part.precision([100], draws=500)
    assert q.low[0] < truth[0] < q.high[0] and q.high[0] - q.low[0] > 0


def test_ranks_stream_as_top_n_selects_them(tmp_path: Path) -> None:
    """audit-sample's two-pass ranks over shards equal a sort of the whole corpus (ties in corpus
    order), so the rows it writes are the pairs at those ranks."""
    rng = np.random.default_rng(2)
    scores = np.round(rng.random(3000), 2)  # many ties
    shards, files = [], []
    for i, part in enumerate(np.array_split(np.arange(3000), 3)):
        p, f = tmp_path / f"s{i}.tsv", tmp_path / f"s{i}.scores.tsv"
        p.write_text("".join(f"src {j}\ttgt {j}\tid{j}\n" for j in part))
        f.write_text("x\n" + "".join(f"{scores[j]:.6f}\n" for j in part))
        shards.append(p)
        files.append(f)
    plan = draw_sample(shards, files, "x", 120, 6, [1000], [0.5], 3, 2, tmp_path / "s.tsv", tmp_path / "p.json")
    by_rank = np.argsort(ranks_of(scores))
    rows = [line.split("\t") for line in (tmp_path / "s.tsv").read_text().splitlines()[1:]]
    assert len(rows) == 120 and plan.thresholds == {"0.5": int((scores >= 0.5).sum())}
    assert int((scores >= 0.5).sum()) in plan.edges and 1000 in plan.edges
    for item, rank, stratum, first, last, pairs, score, pid, *_ in rows:
        assert pid == f"id{by_rank[int(rank) - 1]}" and float(score) == scores[by_rank[int(rank) - 1]]
        assert plan.ranks[int(item) - 1] == int(rank) - 1 and pairs == "3000"
        assert (int(first) - 1, int(last)) == plan.edges[int(stratum) - 1:int(stratum) + 1]
    assert SamplePlan.read(tmp_path / "p.json") == plan
    # the labels file alone is the audit: n, strata and ranks come back from its rows
    audit = read_labels(tmp_path / "s.tsv")
    assert audit.n == 3000 and audit.edges == plan.edges and plan.matches(audit)
    assert audit.counts()["unlabelled"] == 120
    # a corpus without an id column: the shard and line name the pair; an N above the pairs is skipped
    for i, p in enumerate(shards):
        p.write_text("".join("\t".join(line.split("\t")[:2]) + "\n" for line in p.read_text().splitlines()))
    plan2 = draw_sample(shards, files, "x", 30, 4, [5000], [], 3, 2, tmp_path / "s2.tsv", tmp_path / "p2.json")
    assert plan2.sizes == () and 5000 not in plan2.edges
    ids = [line.split("\t")[7] for line in (tmp_path / "s2.tsv").read_text().splitlines()[1:]]
    assert all(re.fullmatch(r"s[012]\.tsv:\d+", i) for i in ids), ids[:3]


def test_bad_label_files_name_the_line(tmp_path: Path) -> None:
    head = "item\trank\tfirst\tlast\tpairs\tlabel\n"
    bad = tmp_path / "l.tsv"
    bad.write_text(head + "1\t4\t1\t50\t100\tgood\n2\t61\t51\t100\t100\tmaybe\n")
    with pytest.raises(InputError, match="maybe") as err:
        read_labels(bad)
    assert err.value.line == 3
    bad.write_text(head + "1\t51\t1\t50\t100\tgood\n")
    with pytest.raises(InputError, match="not in its stratum"):
        read_labels(bad)
    bad.write_text(head + "1\t4\t1\t50\t100\tgood\n1\t61\t51\t100\t100\tbad\n")
    with pytest.raises(InputError, match="labelled twice"):
        read_labels(bad)
    bad.write_text(head + "1\t4\t1\t50\t100\tgood\n2\t61\t51\t90\t90\tbad\n")
    with pytest.raises(InputError, match="ranking sizes"):
        read_labels(bad)
    bad.write_bytes(("\ufeff" + head + "1\t4\t1\t50\t100\tGood\n2\t61\t51\t100\t100\t\n").encode("utf-16"))
    with pytest.raises(InputError, match="not UTF-8"):
        read_labels(bad)
    bad.write_bytes(("\ufeff" + head + "1\t4\t1\t50\t100\tGood\n2\t61\t51\t100\t100\t\n").encode("utf-8"))
    audit = read_labels(bad)  # a spreadsheet's BOM and capitals are fine
    assert audit.counts() == {"good": 1, "bad": 0, "unsure": 0, "unlabelled": 1}
    plan = SamplePlan("x", 100, (0, 50, 100), (3, 60), (50,), {}, 1)
    assert plan.matches(audit) and not SamplePlan("x", 100, (0, 25, 100), (3, 60), (50,), {}, 1).matches(audit)


def test_all_good_labels_keep_the_point_inside_its_interval() -> None:
    edges = plan_strata(2_000_000, 8, [50_000])
    ranks = draw_ranks(edges, allocate(edges, 300), 1)
    p = Audit(2_000_000, edges, ranks, np.full(len(ranks), GOOD)).precision([50_000, 2_000_000], draws=2000)
    assert np.all(p.point == 1.0) and np.all(p.high == 1.0) and np.all(p.low < 1.0) and np.all(p.low > 0.9)


def test_simulation_on_the_paracrawl_human_labels(real_data: Path) -> None:
    """200 labels of the 2,000 ParaCrawl pairs ranked by the scores shipped with them (BiCleaner,
    Zipporah: real filters' rankings of real web pairs); over 100 seeds the audit's median error and
    its intervals' coverage meet the issue's targets at N = 250, 500, 1,000 (bench/bench_audit.py runs
    200 seeds with our scorers)."""
    d = read_paracrawl_eval(real_data / PARACRAWL)
    ns = [250, 500, 1000]
    for scores in (d.shipped["bicleaner"], d.shipped["zipporah"]):
        sim = simulate(scores, d.positive, ns, 200, 8, range(100), draws=2000, monotone=False)
        assert np.all(sim["median_abs_error"] <= 0.05), sim["median_abs_error"]
        # 90-99% (100 seeds: a draw or two of slack below)
        assert np.all(sim["coverage"] >= 0.88) and np.all(sim["coverage"] <= 0.99), sim["coverage"]
        assert np.all(sim["mean_width"] < 0.25)
    # a ranking that does not sort good pairs first is estimated as such: random scores
    sim = simulate(np.random.default_rng(0).random(2000), d.positive, ns, 200, 8, range(20), draws=1000,
                   monotone=False)
    assert np.all(np.abs(sim["truth"] - d.positive.mean()) < 0.08)
    assert np.all(sim["median_abs_error"] <= 0.06)


def test_the_commands_end_to_end_on_real_pairs(real_data: Path, tmp_path: Path) -> None:
    d = read_paracrawl_eval(real_data / PARACRAWL)
    pairs, scores = tmp_path / "pairs.tsv", tmp_path / "scores.tsv"
    pairs.write_text("".join(f"{s}\t{t}\tpc:{i}\n" for i, (s, t) in enumerate(zip(d.src, d.tgt))))
    scores.write_text("bicleaner\n" + "".join(f"{v:.6f}\n" for v in d.shipped["bicleaner"]))
    sidecar = tmp_path / "labels.tsv"
    sidecar.write_text("id\torigin\tkind\tclean\n" + "".join(
        f"pc:{i}\tparacrawl\t{'clean' if p else 'noise'}\t{int(p)}\n" for i, p in enumerate(d.positive)))
    out = tmp_path / "audit"
    assert main(["audit-sample", "--pairs", str(pairs), "--scores", str(scores), "--scorer", "bicleaner",
                 "--labels", "200", "--sizes", "500", "1000", "--tsv", str(out / "s.tsv"), "--plan",
                 str(out / "p.json"), "--html", str(out / "s.html")]) == 0
    assert main(["audit-fill", "--sample", str(out / "s.tsv"), "--labels", str(sidecar),
                 "--output", str(out / "l.tsv")]) == 0
    assert main(["audit-estimate", "--plan", str(out / "p.json"), "--labels", str(out / "l.tsv"), "--tsv",
                 str(out / "e.tsv"), "--md", str(out / "e.md"), "--json", str(out / "e.json"), "--png",
                 str(out / "e.png")]) == 0
    result = json.loads((out / "e.json").read_text())
    truth = truth_at(ranks_of(d.shipped["bicleaner"]), d.positive, [500, 1000])
    for row, t in zip(result["rows"], truth):
        assert row["low"] - 0.03 <= t <= row["high"] + 0.03, (row, t)
    assert result["labels"]["good"] + result["labels"]["bad"] == 200
    assert (out / "e.png").stat().st_size > 10_000 and "largest N" in (out / "e.md").read_text()
    # the estimate refuses to overwrite its input and a label file of another sample
    assert main(["audit-estimate", "--plan", str(out / "p.json"), "--labels", str(out / "l.tsv"), "--tsv",
                 str(out / "l.tsv"), "--md", str(out / "e.md"), "--json", str(out / "e.json"), "--png",
                 str(out / "e.png")]) == 2


def test_hard_repairing_takes_the_nearest_other_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each source gets its nearest target that is not its own; the margin's source-side search is
    reused when it ran; a repeated pair is marked an original pair."""
    from marginmine.scoring.kinds import Batch

    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 16)).astype(np.float32)
    y = x + 0.05 * rng.normal(size=(6, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    gx = np.asarray([0, 1, 2, 3, 4, 5, 0])  # the last line repeats pair 0 with target 1: pair 0's
    gy = np.asarray([0, 1, 2, 3, 4, 5, 1])  # hard partner may be an original pair
    batch = Batch([f"s{i}" for i in gx], [f"t{i}" for i in gy], x, y, gx, gy)
    sims = x @ y.T
    np.fill_diagonal(sims, -np.inf)
    want = sims.argmax(axis=1)
    hard = batch.hard_repaired()
    assert hard.gy[:6].tolist() == want.tolist()
    assert [hard.tgt[i] for i in range(6)] == [f"t{j}" for j in want]
    assert hard.gy[6] == 0 and hard.original_pairs()[6]  # line 7's source 0, own target 1: y0, a pair
    assert hard.original_pairs()[:6].tolist() == [(int(a), int(b)) in set(zip(gx.tolist(), gy.tolist()))
                                                 for a, b in zip(gx[:6], want)]
    # after the margin's source-side search (k = 4) no new search is made
    batch2 = Batch([f"s{i}" for i in gx], [f"t{i}" for i in gy], x, y, gx, gy)
    batch2.side_mean("src", 4)
    import marginmine.search.knn as knn_module

    monkeypatch.setattr(knn_module, "knn", lambda *a, **k: pytest.fail("searched again"))
    assert batch2.hard_repaired().gy.tolist() == hard.gy.tolist()
    with pytest.raises(ValueError):
        hard.hard_repaired()
